#!/usr/bin/env bash
# The fast schedules on the GPU host, from a bundle made by scripts/gpu-bundle.sh:
#   BUNDLE/run.sh tests (GPU suites), then cbi-bench on the fast schedules
#   against naive, with the copy-bandwidth floor measured in the same run.
#   apps/bench/issue7.sh BUNDLE [tests] [bench] [npp] [ncu] [-- extra cbi-bench args]
# npp: cbi-bench dumps its inputs and references, and NPP (apps/bench/npp_peer.cu,
# compiled there) is timed on them in the same run. ncu: one Nsight Compute
# profile of sep:64x32 gaussian:9 on 8u:3 and 32f:1, when ncu exists there
# (CBI_NCU_KERNEL and CBI_NCU_SCHEDULE pick another kernel, e.g. stream_stencil, stream:1024x32).
# The CSV/JSON land in $OUT (or /tmp/cbi-out).
set -uo pipefail
bundle=$1; shift
do_tests=0; do_bench=0; do_npp=0; do_ncu=0
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  case $1 in tests) do_tests=1 ;; bench) do_bench=1 ;; npp) do_npp=1 ;; ncu) do_ncu=1 ;; esac; shift
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
  dump=(); [ $do_npp = 1 ] && dump=(--dump-dir /tmp/cbi-dump)
  /tmp/cbi-bundle/bin/cbi-bench --suite filters --border replicate --image 32f:1 --image 8u:3 \
    --csv "$out/issue7.csv" --json "$out/issue7.json" "${dump[@]}" "$@" || status=1
  if [ $do_npp = 1 ]; then
    here=$(cd "$(dirname "$0")" && pwd)
    nvcc -O3 -std=c++17 -arch=sm_90 "$here/npp_peer.cu" -o /tmp/npp_peer -lnppif -lnppicc -lnppc > /tmp/npp-build.log 2>&1 \
      && /tmp/npp_peer /tmp/cbi-dump "$out/npp.csv" || { status=1; tail -5 /tmp/npp-build.log; }
    [ -f "$out/npp.csv" ] && cut -d, -f2,3,7,8,9,18 "$out/npp.csv"
  fi
fi
if [ $do_ncu = 1 ]; then
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  if [ -n "$ncu" ]; then
    export LD_LIBRARY_PATH=/tmp/cbi-bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    for f in 8u:3 32f:1; do
      "$ncu" --kernel-name regex:"${CBI_NCU_KERNEL:-sep_stencil}" --launch-skip 5 --launch-count 1 --section SpeedOfLight \
        --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
        /tmp/cbi-bundle/bin/cbi-bench --filter gaussian:9 --image $f --schedule "${CBI_NCU_SCHEDULE:-sep:64x32}" --runs 20 --warmup 1 \
        > "$out/ncu-${f/:/_}.txt" 2>&1
      grep -E 'Duration|Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Stall|Warp Cycles Per Issued|Dynamic Shared' "$out/ncu-${f/:/_}.txt" | head -30
    done
  else echo "ncu: not on this machine"; fi
fi
exit $status
