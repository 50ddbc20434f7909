#!/usr/bin/env bash
# Twenty-eighth session, call 4 (on an H100): where the GPU batch's process
# stage goes. 32 and 128 4096^2 JPEGs -> JPEG through dog.json on the
# 16-core host: --device cuda at the default --in-flight (32: a processor,
# with its own device buffers and pinned staging, per image in flight) and
# at 8 and 4; --device cpu beside it; in turn, twice, --stats.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
d=/tmp/b; rm -rf $d; mkdir -p $d/in32 $d/in128
photos4096_x4 $d/in32 $d/in128
for n in 32 128; do
  echo "== batch: $n JPEGs of 4096^2 -> JPEG, dog.json"
  for r in 1 2; do
    for cfg in "cuda" "cuda 8" "cuda 4" "cpu"; do
      set -- $cfg; a=(--device $1); [ $# = 2 ] && a+=(--in-flight $2)
      rm -rf $d/out; t0=$(date +%s.%N)
      $u/bin/cbi-filter --input-dir $d/in$n --output-dir $d/out "${a[@]}" --pipeline-file apps/bench/pipelines/dog.json --stats > /tmp/bs.txt 2>/tmp/bs.err || { echo FAIL; tail -3 /tmp/bs.err; }
      t1=$(date +%s.%N); awk -v a=$t0 -v b=$t1 -v c="$cfg" -v n=$n 'BEGIN { printf "  %-8s whole process %.2f s, %.2f images/s", c, b - a, n / (b - a) }'
      grep -E '^wall' /tmp/bs.txt | sed 's/;.*//; s/^/ | batch /' | tr -d '\n'
      grep -E '^process' /tmp/bs.txt | awk -v n=$n '{printf " | process busy %.3f s an image\n", $2 / n}'
    done
  done
done
echo "${SECONDS}s"
