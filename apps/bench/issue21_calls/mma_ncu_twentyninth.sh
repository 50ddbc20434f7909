#!/usr/bin/env bash
# Twenty-ninth session: Nsight Compute on the tensor-core blend kernel
# (blend_mma8) for the unsharp mask at 4096^2 8u:3 (CBI_MMA_STEPS=${STEPS:-2}):
# duration, instructions, occupancy, registers, stall reasons, memory.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
for pipe in ${PIPES:-unsharp}; do
  CBI_MMA_STEPS=${STEPS:-2} timeout 120 ncu -k regex:blend_mma8 -c 1 --section SpeedOfLight --section Occupancy --section InstructionStats \
    --section SchedulerStats --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
    $u/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 --filter gaussian:9 --schedule stream:256x16 \
    --pipeline apps/bench/pipelines/$pipe.json --runs 20 > $OUT/ncu-$pipe.txt 2>&1
  echo "ncu $pipe rc=$? ${SECONDS}s"
  grep -E "Duration|Issued Warp Per|No Eligible|Achieved Occupancy|Theoretical Occupancy|Registers Per|DRAM Throughput|Executed Instructions  |Waves Per SM|Block Limit|Warp Cycles Per Issued|Stall|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Local" $OUT/ncu-$pipe.txt | head -40
done
