#!/usr/bin/env bash
# Twenty-seventh session, call 8: where call 7's smemcopy build spends the
# time it lost: Nsight Compute's per-SASS counts (as CSV) for the pair
# kernel of gaussian:5 | sobel:mag 8u:1 at 4096^2, new (the bundle) and
# smemcopy (bundle-extra/smemcopy.tar.xz).
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new smemcopy.tar.xz
for b in new smemcopy; do
  timeout 120 ncu -k regex:chain_stream -c 1 --section SourceCounters --section SpeedOfLight -f -o /tmp/r-$b \
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:1 --size 4096x4096 --filter sobel:mag --schedule stream:256x16 \
    --pipeline "gaussian:5 | sobel:mag" --runs 20 > /tmp/ncu-$b.log 2>&1
  echo "ncu $b rc=$? ${SECONDS}s"
  ncu -i /tmp/r-$b.ncu-rep --page details --print-details all 2>/dev/null | grep -E "Duration|Executed Instructions  " | head -3
  ncu -i /tmp/r-$b.ncu-rep --page source --csv --print-source sass > "$OUT/ncu-$b-sass.csv" 2>&1
done
(cd $OUT && xz -9 ncu-*-sass.csv)
