#!/usr/bin/env bash
# Twenty-ninth session: test_fusion's blend cases, then Nsight Compute's
# per-SASS counts and stall reasons for the tensor-core blend kernel
# (blend_mma8) on the unsharp mask at 4096^2 8u:3 (CBI_MMA_STEPS=${STEPS:-4}):
# $OUT/sass-unsharp.csv.xz, and the stall breakdown.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
blend_tests
for pipe in ${PIPES:-unsharp}; do
  CBI_MMA_STEPS=${STEPS:-4} timeout 150 ncu -k regex:blend_mma8 -c 1 --section SourceCounters --section WarpStateStats --section LaunchStats \
    --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio -f -o /tmp/r-$pipe \
    $u/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 --filter gaussian:9 --schedule stream:256x16 \
    --pipeline apps/bench/pipelines/$pipe.json --runs 20 > /tmp/ncu-$pipe.log 2>&1
  echo "ncu $pipe rc=$? ${SECONDS}s"
  ncu -i /tmp/r-$pipe.ncu-rep --page details --print-details all 2>/dev/null | grep -E "Duration|Executed Instructions  |stalled|Registers Per" | sort -k3 -rn | head -30
  ncu -i /tmp/r-$pipe.ncu-rep --page source --csv --print-source sass > "$OUT/sass-$pipe.csv" 2>&1
  xz -9 "$OUT/sass-$pipe.csv"
done
