#!/usr/bin/env bash
# Twenty-sixth session, call 4: the blend kernel's row loop with the source
# loaded before the row pass, the integer finish chosen once a turn and its
# rounding without branches; pair rows in turns of 3 for two passes only
# (new: the bundle), against call 1's build (pairs). test_fusion and the
# blend sanitizers; both builds in turn on the blends; Nsight Compute's
# per-SASS counts of the new unsharp and DoG kernels at 4096^2.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new pairs.tar.xz
checks 'Fusion.Blends*' test_fusion
for round in 1 2; do
  for b in pairs new; do
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:3 --size 1920x1080 --size 4096x4096 --size 8192x8192 "${blend_args[@]}" --runs 20 \
      --csv "$OUT/$b-three$round.csv" > /tmp/$b-t$round.txt 2>&1
    echo "$b three $round rc=$? ${SECONDS}s"
  done
done
grep -hE "DIFFERS|error|FAIL" /tmp/*-t?.txt | head
python3 apps/bench/issue21_calls/builds_table.py "$OUT" default pairs new
for p in unsharp dog; do
  timeout 200 ncu --kernel-name-base mangled -k regex:BlendedStencils -c 1 --set full -o /tmp/rep-$p -f \
    /tmp/new/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 --filter gaussian:9 --schedule stream:256x16 \
    --pipeline apps/bench/pipelines/$p.json --runs 20 > /tmp/ncu-$p.log 2>&1
  echo "ncu $p rc=$? ${SECONDS}s"; tail -1 /tmp/ncu-$p.log
  ncu -i /tmp/rep-$p.ncu-rep --page details --print-details all --section WarpStateStats --section Occupancy --section SpeedOfLight \
    --section InstructionStats > "$OUT/ncu-$p.txt" 2>&1
  grep -E "Duration|Achieved Occupancy|Executed Instructions  |Block Limit Shared|Block Limit Reg|Warp Cycles Per Issued|Stall (Long|Wait|Short|No Inst|Math)" "$OUT/ncu-$p.txt" | head -14
  ncu -i /tmp/rep-$p.ncu-rep --page source --csv --print-source sass > "$OUT/ncu-$p-sass.csv" 2>&1
done
(cd "$OUT" && xz -9 ncu-*-sass.csv)
