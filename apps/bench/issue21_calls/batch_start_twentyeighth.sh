#!/usr/bin/env bash
# Twenty-eighth session, call 9 (on an H100): where a small GPU batch's
# whole-process time goes outside the batch's wall. The bundle of call 8
# (nvJPEG; cap from CBI_GPU_PROCESSORS, 4 here). 32 4096^2 JPEGs -> JPEG
# through dog.json, default device and --device cpu, twice each: the
# process start, the first output's appearance (polled every 5 ms), the
# last output's, the batch wall (--stats) and the process end.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
d=/tmp/b; rm -rf $d; mkdir -p $d/in32
photos4096 $d/in32
for r in 1 2; do
  for dev in default cpu; do
    a=(); [ $dev = cpu ] && a=(--device cpu)
    rm -rf $d/out; mkdir -p $d/out
    t0=$(date +%s.%N)
    CBI_GPU_PROCESSORS=4 $u/bin/cbi-filter --input-dir $d/in32 --output-dir $d/out "${a[@]}" --pipeline-file apps/bench/pipelines/dog.json --stats > /tmp/bs.txt 2>/tmp/bs.err &
    pid=$!; first=""; last=""
    while kill -0 $pid 2>/dev/null; do
      n=$(ls $d/out | grep -vc '^\.' )
      [ -z "$first" ] && [ "$n" -ge 1 ] && first=$(date +%s.%N)
      [ -z "$last" ] && [ "$n" -ge 32 ] && last=$(date +%s.%N)
      sleep 0.005
    done
    t1=$(date +%s.%N); wait $pid || { echo "FAIL rc=$?"; tail -3 /tmp/bs.err; }
    wall=$(grep -E '^wall' /tmp/bs.txt | awk '{print $2}')
    awk -v a="$t0" -v f="${first:-0}" -v l="${last:-0}" -v b="$t1" -v w="$wall" -v n="$dev" 'BEGIN { printf "  %-8s first output %.3f s, last %.3f s, end %.3f s; batch wall %s s\n", n, f - a, l - a, b - a, w }'
  done
done
echo "${SECONDS}s"
