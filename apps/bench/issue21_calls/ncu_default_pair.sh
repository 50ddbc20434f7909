#!/usr/bin/env bash
# Call 6: Nsight Compute on the default (fused) gray pipeline at 8192^2 and 6000x4000.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
S="--section SpeedOfLight --section Occupancy --section LaunchStats --section InstructionStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
for size in 8192x8192 6000x4000; do
  timeout 200 ncu -k regex:chain_stream -c 1 $S $u/bin/cbi-bench --suite filters --image 8u:3 --size $size \
    --pipeline "color:gray | gaussian:5 | sobel:mag" --runs 20 > $OUT/ncu-$size.txt 2>&1; echo "ncu $size rc=$?"
  grep -E "Duration|Executed Ipc A|Issue Slots Busy|Achieved Occupancy|Theoretical Occupancy|Registers Per|Waves Per SM|DRAM Throughput|Memory Throughput|Executed Instructions  |Block Size|Grid Size|No Eligible|Eligible Warps|Warp Cycles Per Issued" $OUT/ncu-$size.txt | head -30
done
