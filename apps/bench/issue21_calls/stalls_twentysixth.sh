#!/usr/bin/env bash
# Twenty-sixth session, call 3: where the unsharp mask's blend kernel waits.
# Nsight Compute (full set, source counters) on the pair-rows kernel stored a
# batch at once (pairs: bundle-extra/pairs.tar.xz) and in turns of 3 rows
# (new: the bundle), 8u:3 4096^2: the warp stall reasons, and the per-SASS
# counts as CSV (ncu-*-sass.csv) for the notes.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new pairs.tar.xz
for b in pairs new; do
  timeout 200 ncu --kernel-name-base mangled -k regex:BlendedStencils -c 1 --set full -o /tmp/rep-$b -f \
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 --filter gaussian:9 --schedule stream:256x16 \
    --pipeline apps/bench/pipelines/unsharp.json --runs 20 > /tmp/ncu-$b.log 2>&1
  echo "ncu $b rc=$? ${SECONDS}s"; tail -3 /tmp/ncu-$b.log
  ncu -i /tmp/rep-$b.ncu-rep --page details --print-details all --section WarpStateStats > "$OUT/stalls-$b.txt" 2>&1
  grep -iE "stall|cycles per" "$OUT/stalls-$b.txt" | head -40
  ncu -i /tmp/rep-$b.ncu-rep --page raw --csv 2>/dev/null | python3 -c "
import csv,sys
rows=list(csv.reader(sys.stdin)); h=rows[0]; v=rows[2] if len(rows)>2 else rows[1]
for n,x in zip(h,v):
    if 'average_warp_latency_issue_stalled' in n or 'warps_issue_stalled' in n and n.endswith('_per_warp_active.pct'): print(n,x)
" | sort -t' ' -k2 -g -r | head -25
  ncu -i /tmp/rep-$b.ncu-rep --page source --csv --print-source sass > "$OUT/ncu-$b-sass.csv" 2>&1
  echo "sass csv $b $(wc -l < "$OUT/ncu-$b-sass.csv") lines ${SECONDS}s"
done
(cd "$OUT" && xz -9 ncu-*-sass.csv)
