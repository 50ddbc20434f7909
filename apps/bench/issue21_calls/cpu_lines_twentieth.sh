#!/usr/bin/env bash
# Twentieth session, call 1: the GPU suites on the CPU line-buffer chains'
# build (the executor's fusion rules changed for the CPU only), then the
# CPU chains on the GPU host's 16 cores (apps/bench/cpu_fusion.sh: cbi's
# default against --fuse-stencils, --no-fuse and OpenCV, in one process per
# line) at 16 and 4 threads.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
lscpu | grep -E "Model name|^CPU\(s\)|L3"
checks "Fusion.FusedEqualsUnfused*:Fusion.StencilPairsOnStream*" test_fusion test_defaults
mkdir -p /tmp/cpu && ln -sf "$u/bin/cbi-chain-bench" /tmp/cpu/cbi-chain-bench
for threads in 16 4; do
  apps/bench/cpu_fusion.sh /tmp/cpu "$threads" bundle/samples/butterfly.jpg 2>&1 | tee "$OUT/cpu-fusion-$threads.txt"
done
echo "done ${SECONDS}s"
