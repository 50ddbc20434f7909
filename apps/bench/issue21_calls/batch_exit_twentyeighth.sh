#!/usr/bin/env bash
# Twenty-eighth session, call 10 (on an H100): ending without waiting for
# nvJPEG's start. "old" is call 8's cbi-filter (its cap from
# CBI_GPU_PROCESSORS, unset here: 4), "new" the same code with the _exit at
# the end of main while nvJPEG is still starting (both with nvJPEG).
# test_jpeg_gpu; then 32 4096^2 JPEGs -> JPEG through dog.json, default
# device, old and new in turn, and --device cpu, twice each: first and
# last output, process end, exit code; then exit codes with a corrupt file
# in the batch and for one image with --device cuda, and a batch under
# mpirun -n 2.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
suites test_jpeg_gpu
d=/tmp/b; rm -rf $d; mkdir -p $d/in32
photos4096 $d/in32
timed() {  # LABEL BIN ARGS...: first/last output and end of one batch into $d/out
  local label=$1 bin=$2; shift 2
  rm -rf $d/out; mkdir -p $d/out
  local t0=$(date +%s.%N) first="" last=""
  $bin --output-dir $d/out "$@" --pipeline-file apps/bench/pipelines/dog.json > /tmp/bs.txt 2>/tmp/bs.err &
  local pid=$!
  while kill -0 $pid 2>/dev/null; do
    local n=$(ls $d/out | wc -l)
    [ -z "$first" ] && [ "$n" -ge 1 ] && first=$(date +%s.%N)
    [ -z "$last" ] && [ "$n" -ge 32 ] && last=$(date +%s.%N)
    sleep 0.005
  done
  local t1=$(date +%s.%N); wait $pid; local rc=$?
  awk -v a="$t0" -v f="${first:-0}" -v l="${last:-0}" -v b="$t1" -v n="$label" -v rc=$rc 'BEGIN { printf "  %-8s first output %.3f s, last %.3f s, end %.3f s, exit %d\n", n, f - a, l - a, b - a, rc }'
}
for r in 1 2; do
  timed old $u/old/bin/cbi-filter --input-dir $d/in32
  timed new $u/bin/cbi-filter --input-dir $d/in32
  timed cpu $u/bin/cbi-filter --input-dir $d/in32 --device cpu
done
echo "== exit codes"
cp $d/in32/img000.jpg $d/in32/zz-corrupt.jpg; truncate -s 5000 $d/in32/zz-corrupt.jpg
timed "corrupt" $u/bin/cbi-filter --input-dir $d/in32
tail -2 /tmp/bs.err
rm $d/in32/zz-corrupt.jpg
t0=$(date +%s.%N); $u/bin/cbi-filter $d/in32/img001.jpg --device cuda --pipeline-file apps/bench/pipelines/dog.json -o $d/one.jpg; rc=$?; t1=$(date +%s.%N)
awk -v a=$t0 -v b=$t1 -v rc=$rc 'BEGIN { printf "  one image, --device cuda, JPEG out: %.3f s, exit %d\n", b - a, rc }'
t0=$(date +%s.%N); $u/old/bin/cbi-filter $d/in32/img001.jpg --device cuda --pipeline-file apps/bench/pipelines/dog.json -o $d/one-old.jpg; rc=$?; t1=$(date +%s.%N)
awk -v a=$t0 -v b=$t1 -v rc=$rc 'BEGIN { printf "  the same, old: %.3f s, exit %d\n", b - a, rc }'
cmp $d/one.jpg $d/one-old.jpg && echo "  one image: old and new outputs identical"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
rm -rf $d/mpi; t0=$(date +%s.%N)
mpirun -n 2 --bind-to none -x LD_LIBRARY_PATH $u/bin/cbi-filter --input-dir $d/in32 --output-dir $d/mpi --pipeline-file apps/bench/pipelines/dog.json > /tmp/mpi.txt 2>&1; rc=$?; t1=$(date +%s.%N)
awk -v a=$t0 -v b=$t1 -v rc=$rc 'BEGIN { printf "  mpirun -n 2: %.3f s, exit %d\n", b - a, rc }'
tail -3 /tmp/mpi.txt; ls $d/mpi | wc -l
echo "${SECONDS}s"
