#!/usr/bin/env bash
# Issue 7 on the GPU host, from a bundle made by scripts/gpu-bundle.sh:
#   BUNDLE/run.sh tests (GPU suites), then cbi-bench on the fast schedules
#   against naive, with the copy-bandwidth floor measured in the same run.
#   apps/bench/issue7.sh BUNDLE [tests] [bench] [-- extra cbi-bench args]
# The CSV/JSON land in $OUT (or /tmp/cbi-out).
set -uo pipefail
bundle=$1; shift
do_tests=0; do_bench=0
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  case $1 in tests) do_tests=1 ;; bench) do_bench=1 ;; esac; shift
done
[ "${1:-}" = -- ] && shift
out=${OUT:-/tmp/cbi-out}
status=0
if [ $do_tests = 1 ]; then
  "$bundle/run.sh" tests || status=1
  [ -n "${OUT:-}" ] && mv "$OUT/logs.tgz" "$OUT/tests.tgz"
fi
if [ $do_bench = 1 ]; then
  if [ ! -x /tmp/cbi-bundle/bin/cbi-bench ]; then
    mkdir -p /tmp/cbi-bundle && tar -C /tmp/cbi-bundle -xJf "$bundle/libs.tar.xz" && tar -C /tmp/cbi-bundle -xJf "$bundle/bin.tar.xz"
  fi
  export LD_LIBRARY_PATH=/tmp/cbi-bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu --format=csv,noheader
  /tmp/cbi-bundle/bin/cbi-bench --suite filters --border replicate --image 32f:1 --image 8u:3 \
    --csv "$out/issue7.csv" --json "$out/issue7.json" "$@" || status=1
fi
exit $status
