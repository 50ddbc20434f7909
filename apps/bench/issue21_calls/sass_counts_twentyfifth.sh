#!/usr/bin/env bash
# Twenty-fifth session, call 1: the gray pipeline's pair kernel on the last
# commit (the bundle): its SASS, and Nsight Compute's per-instruction
# counts (executions, stall samples) at 4096^2 and 8192^2, as CSV.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
ncu --version | tail -1
sass_gray $u/bin/cbi-bench $OUT/sass.txt
for s in 4096x4096 8192x8192; do
  timeout 120 ncu -k regex:chain_stream -c 1 --section SourceCounters --section WarpStateStats --section SpeedOfLight \
    --section Occupancy --section LaunchStats -f -o /tmp/r-$s $u/bin/cbi-bench --suite filters --image 8u:3 --size $s \
    --pipeline "color:gray | gaussian:5 | sobel:mag" --runs 20 > /tmp/ncu-$s.log 2>&1
  echo "ncu $s rc=$? ${SECONDS}s"; tail -3 /tmp/ncu-$s.log
  ncu -i /tmp/r-$s.ncu-rep --page source --csv --print-source sass > $OUT/src-$s.csv 2> /tmp/src-$s.err
  echo "source $s rc=$? $(wc -l < $OUT/src-$s.csv) lines"; head -3 /tmp/src-$s.err
  ncu -i /tmp/r-$s.ncu-rep --page details > $OUT/details-$s.txt 2>&1
done
xz -9 $OUT/sass.txt $OUT/src-*.csv
ls -la $OUT
