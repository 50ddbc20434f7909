#!/usr/bin/env bash
# Twenty-sixth session, call 2: pair rows stored in turns of 3 rows (new:
# the bundle) against pair rows stored a batch of K rows at once (pairs:
# bundle-extra/pairs.tar.xz, call 1's build): test_fusion's blends and their
# sanitizers on the new build, both builds in turn on the blends, and Nsight
# Compute's warp states on the unsharp mask's kernel at 4096^2 for each.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new pairs.tar.xz
checks 'Fusion.Blends*' test_fusion
for round in 1 2; do
  for b in pairs new; do
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 --size 8192x8192 "${blend_args[@]}" --runs 20 \
      --csv "$OUT/$b-three$round.csv" > /tmp/$b-t$round.txt 2>&1
    echo "$b three $round rc=$? ${SECONDS}s"
  done
done
grep -hE "DIFFERS|error|FAIL" /tmp/*-t?.txt | head
python3 apps/bench/issue21_calls/builds_table.py "$OUT" default pairs new
for b in pairs new; do
  timeout 90 ncu --kernel-name-base mangled -k regex:BlendedStencils -c 1 --section SpeedOfLight --section Occupancy \
    --section InstructionStats --section WarpStateStats --section SchedulerStats --section LaunchStats /tmp/$b/bin/cbi-bench \
    --suite filters --image 8u:3 --size 4096x4096 --filter gaussian:9 --schedule stream:256x16 \
    --pipeline apps/bench/pipelines/unsharp.json --runs 20 > "$OUT/ncu-$b.txt" 2>&1
  echo "ncu $b rc=$? ${SECONDS}s"
  grep -E "Duration|Issued Warp Per|Achieved Occupancy|Theoretical Occupancy|Executed Instructions  |Block Limit Shared|Block Limit Reg|Warp Cycles Per Issued|Stall" "$OUT/ncu-$b.txt" | head -30
done
