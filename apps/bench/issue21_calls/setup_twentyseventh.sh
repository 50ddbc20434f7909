#!/usr/bin/env bash
# Twenty-seventh session, call 5: edgesvol2 (bundle-extra/edgesvol2.tar.xz:
# call 4's build with its set-up loops rolled) against new (the bundle):
# SASS of the pair kernels that the timed pipelines run (instruction and
# opcode counts), Nsight Compute on gaussian:5 | sobel:mag 8u:1 at 8192^2
# (duration, instructions, per-SASS counts as CSV), then the pipelines as
# call 4 timed them.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new edgesvol2.tar.xz
sass_pairs new edgesvol2
for b in new edgesvol2; do
  timeout 120 ncu -k regex:chain_stream -c 1 --section SourceCounters --section SpeedOfLight --section Occupancy --section LaunchStats -f -o /tmp/r-$b \
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:1 --size 8192x8192 --filter sobel:mag --schedule stream:256x16 \
    --pipeline "gaussian:5 | sobel:mag" --runs 20 > /tmp/ncu-$b.log 2>&1
  echo "ncu $b rc=$? ${SECONDS}s"
  ncu -i /tmp/r-$b.ncu-rep --page details --print-details all 2>/dev/null | grep -E "Duration|Executed Instructions  |Achieved Occupancy|Registers Per|Block Size|Grid Size" | head -8
  ncu -i /tmp/r-$b.ncu-rep --page source --csv --print-source sass > "$OUT/ncu-$b-sass.csv" 2>&1
done
(cd $OUT && xz -9 ncu-*-sass.csv)
d=$OUT/setup; mkdir -p $d
pairs_in_turn $d new edgesvol2
