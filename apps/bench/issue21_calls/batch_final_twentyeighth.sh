#!/usr/bin/env bash
# Twenty-eighth session, call 6 (on an H100): the committed batch code
# (kGpuBatchProcessors = 4 per GPU, a task waiting for a processor
# suspended): test_devices and test_cuda_wait; then 32 and 128 4096^2
# JPEGs -> JPEG and 32 -> PNG through dog.json with no --device flag (the
# default: cuda) and --device cpu, in turn, twice, outputs compared; then
# 64 images in flight with 16 jobs, and --device cuda:0,0, each once.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
suites test_devices test_cuda_wait
d=/tmp/b; rm -rf $d; mkdir -p $d/in32 $d/in128
photos4096_x4 $d/in32 $d/in128
run() {  # LABEL N FORMAT OUT ARGS...
  local label=$1 n=$2 fmt=$3 out=$4; shift 4
  rm -rf $d/$out; local t0=$(date +%s.%N)
  $u/bin/cbi-filter --input-dir $d/in$n --output-dir $d/$out --format $fmt "$@" --pipeline-file apps/bench/pipelines/dog.json --stats > /tmp/bs.txt 2>/tmp/bs.err || { echo FAIL; tail -3 /tmp/bs.err; }
  local t1=$(date +%s.%N); awk -v a=$t0 -v b=$t1 -v c="$label" -v n=$n 'BEGIN { printf "  %-22s whole process %.2f s, %.2f images/s", c, b - a, n / (b - a) }'
  grep -E '^wall' /tmp/bs.txt | sed 's/;.*//; s/^/ | batch /' | tr -d '\n'
  grep -E '^process' /tmp/bs.txt | awk -v n=$n '{printf " | process busy %.3f s an image\n", $2 / n}'
}
for job in "32 jpg" "128 jpg" "32 png"; do
  set -- $job; n=$1 fmt=$2
  echo "== batch: $n JPEGs of 4096^2 -> $fmt, dog.json"
  for r in 1 2; do
    run default $n $fmt out-default
    run "--device cpu" $n $fmt out-cpu --device cpu
  done
  grep -E '^device' /tmp/bs.txt | sed 's/^/    /'
  python3 -c "
import cv2, glob
fs = sorted(glob.glob('$d/out-default/*')); n = 0
for f in fs:
    a = cv2.imread(f, -1); b = cv2.imread(f.replace('out-default', 'out-cpu'), -1); n += int(a.shape != b.shape or cv2.absdiff(a, b).max() > 0)
print('  default (cuda) vs cpu outputs: files with any pixel different:', n, 'of', len(fs))"
done
echo "== stress: 128 -> jpg"
run "--in-flight 64" 128 jpg out-a --in-flight 64
run "--device cuda:0,0" 128 jpg out-b --device cuda:0,0
grep -E '^device' /tmp/bs.txt | sed 's/^/    /'
echo "${SECONDS}s"
