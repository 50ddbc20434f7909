#!/usr/bin/env bash
# Twenty-eighth session, call 5 (on an H100): GPU processors per device in
# a batch (pipeline/batch.hpp, BatchDevice::processors). The bundle's
# cbi-filter is an experiment build that reads the cap from
# CBI_GPU_PROCESSORS (0: one processor per image in flight, the code before;
# the committed build has no such variable). 32 and 128 4096^2 JPEGs ->
# JPEG and 32 -> PNG through dog.json, --device cuda at caps 0, 2, 4, 8 and
# 16, and --device cpu, in turn, twice, --stats.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
d=/tmp/b; rm -rf $d; mkdir -p $d/in32 $d/in128
photos4096_x4 $d/in32 $d/in128
for job in "32 jpg" "128 jpg" "32 png"; do
  set -- $job; n=$1 fmt=$2
  echo "== batch: $n JPEGs of 4096^2 -> $fmt, dog.json"
  for r in 1 2; do
    for cfg in "cuda 0" "cuda 2" "cuda 4" "cuda 8" "cuda 16" "cpu"; do
      set -- $cfg; a=(--device $1)
      rm -rf $d/out; t0=$(date +%s.%N)
      CBI_GPU_PROCESSORS=${2:-0} $u/bin/cbi-filter --input-dir $d/in$n --output-dir $d/out --format $fmt "${a[@]}" --pipeline-file apps/bench/pipelines/dog.json --stats > /tmp/bs.txt 2>/tmp/bs.err || { echo FAIL; tail -3 /tmp/bs.err; }
      t1=$(date +%s.%N); awk -v a=$t0 -v b=$t1 -v c="$cfg" -v n=$n 'BEGIN { printf "  %-8s whole process %.2f s, %.2f images/s", c, b - a, n / (b - a) }'
      grep -E '^wall' /tmp/bs.txt | sed 's/;.*//; s/^/ | batch /' | tr -d '\n'
      grep -E '^process' /tmp/bs.txt | awk -v n=$n '{printf " | process busy %.3f s an image\n", $2 / n}'
    done
  done
done
echo "${SECONDS}s"
