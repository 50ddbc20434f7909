#!/usr/bin/env bash
# Twenty-eighth session, call 8 (on an H100): the GPU batch cap with
# nvJPEG. The bundle's cbi-filter is the committed code built with nvJPEG
# (CBI_NVJPEG_ROOT) plus an experiment patch that reads the cap from
# CBI_GPU_PROCESSORS (0: one processor per image in flight, the code before
# this session); test_jpeg_gpu is that build's. 32 and 128 4096^2 JPEGs ->
# JPEG through dog.json with no --device flag (cuda, JPEGs decoded and
# encoded on the GPU once nvJPEG has started) at caps 0, 4 and 8, and
# --device cpu, in turn, twice, --stats.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
suites test_jpeg_gpu
d=/tmp/b; rm -rf $d; mkdir -p $d/in32 $d/in128
photos4096_x4 $d/in32 $d/in128
for n in 32 128; do
  echo "== batch: $n JPEGs of 4096^2 -> JPEG, dog.json"
  for r in 1 2; do
    for cfg in "default 0" "default 4" "default 8" "cpu"; do
      set -- $cfg; a=(); [ $1 = cpu ] && a=(--device cpu)
      rm -rf $d/out; t0=$(date +%s.%N)
      CBI_GPU_PROCESSORS=${2:-0} $u/bin/cbi-filter --input-dir $d/in$n --output-dir $d/out "${a[@]}" --pipeline-file apps/bench/pipelines/dog.json --stats > /tmp/bs.txt 2>/tmp/bs.err || { echo FAIL; tail -3 /tmp/bs.err; }
      t1=$(date +%s.%N); awk -v a=$t0 -v b=$t1 -v c="$cfg" -v n=$n 'BEGIN { printf "  %-10s whole process %.2f s, %.2f images/s", c, b - a, n / (b - a) }'
      grep -E '^wall' /tmp/bs.txt | sed 's/;.*//; s/^/ | batch /' | tr -d '\n'
      grep -E '^process' /tmp/bs.txt | awk -v n=$n '{printf " | process busy %.3f s an image", $2 / n}'
      grep -E '^jpeg decodes' /tmp/bs.txt | sed 's/ (.*//; s/^/ | /'
    done
  done
done
codec_only $d/in32 jpg
echo "${SECONDS}s"
