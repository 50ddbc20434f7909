#!/usr/bin/env bash
# Twenty-fifth session, call 2: the pair kernel's edge warps, whose lanes
# outside the image copy their input samples from the lanes that hold them
# (new: the bundle) against the last commit (base: bundle-extra/base.tar.xz).
# The bundle's test_fusion and test_defaults, the sanitizers on the pair
# tests; both builds in turn; Nsight Compute's per-instruction counts of the
# new gray pair kernel at 4096^2.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new base.tar.xz
checks 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.FusedEqualsUnfused*' test_fusion test_defaults
d=$OUT; in_turn $d 330 base new
s=4096x4096
timeout 120 ncu -k regex:chain_stream -c 1 --section SourceCounters --section WarpStateStats --section SpeedOfLight \
  --section Occupancy --section LaunchStats -f -o /tmp/r-$s $u/bin/cbi-bench --suite filters --image 8u:3 --size $s \
  --pipeline "color:gray | gaussian:5 | sobel:mag" --runs 20 > /tmp/ncu-$s.log 2>&1
echo "ncu $s rc=$? ${SECONDS}s"
ncu -i /tmp/r-$s.ncu-rep --page source --csv --print-source sass | xz -9 > $d/src-new-$s.csv.xz
ncu -i /tmp/r-$s.ncu-rep --page details > $d/details-new-$s.txt 2>&1
grep -E "Duration|Achieved Occupancy|Executed Instructions  |Issued Warp" $d/details-new-$s.txt | head
(cd $d && tar -cJf csv.tar.xz *.csv && rm -f *.csv)
