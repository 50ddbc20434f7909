#!/usr/bin/env bash
# Twenty-first session, call 3: a Sobel magnitude's high 16-bit lane made a
# float by one shift-and-add (hi), and the pair kernel capped at 64
# registers (r64). The bundle's tests and sanitizers (bundle/: hi at 72),
# then, as xz tarballs of bin/cbi-bench in bundle-extra/: cur (9706dd1),
# hi, r64 (cur at 64), hi64, in turn, twice; Nsight Compute's stall reasons
# on cur. Every CSV and report goes back in one tarball (a call returns 8 files).
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
checks 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.FusedEqualsUnfused*' test_fusion test_defaults
builds=(cur hi r64 hi64)
d=/tmp/call3; mkdir -p $d
for b in "${builds[@]}"; do unpack $b; done
for round in 1 2; do
  for b in "${builds[@]}"; do
    [ $SECONDS -gt 420 ] && break 2
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:3 --size 1920x1080 --size 4096x4096 --size 8192x8192 --filter sobel:mag \
      --schedule stream:256x16 --pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "gaussian:5 | sobel:mag" \
      --runs 20 --csv $d/$b-three$round.csv > /tmp/$b-t$round.txt 2>&1
    echo "$b three $round rc=$? ${SECONDS}s"
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:1 --size 4096x4096 --filter sobel:mag --schedule stream:256x16 \
      --pipeline "gaussian:5 | sobel:mag" --runs 20 --csv $d/$b-one$round.csv > /tmp/$b-o$round.txt 2>&1; echo "$b one $round rc=$? ${SECONDS}s"
  done
done
grep -hE "DIFFERS|error|FAIL" /tmp/*-t?.txt /tmp/*-o?.txt | head
python3 apps/bench/issue21_calls/builds_table.py $d fused,default "${builds[@]}"
timeout 60 ncu -k regex:chain_stream -c 1 --section SpeedOfLight --section Occupancy --section InstructionStats --section SchedulerStats \
  --section WarpStateStats --section LaunchStats /tmp/cur/bin/cbi-bench --suite filters --image 8u:3 --size 8192x8192 \
  --pipeline "color:gray | gaussian:5 | sobel:mag" --runs 20 > $d/ncu-cur.txt 2>&1
echo "ncu cur rc=$? ${SECONDS}s"
grep -E "Duration|Issued Warp Per|No Eligible|Achieved Occupancy|Executed Instructions  |Stall|Warp Cycles Per Issued" $d/ncu-cur.txt | head -20
k=_ZN3cbi4cuda12chain_streamINS_10GaussianOpIhLNS_10BorderModeE0ENS_20AnyBorderColorSourceIhEEEENS_7SobelOpIhLS3_0ENS_15AnyBorderSourceIhEEEELi3ELi1ELi2ELb1ELb1EEEvT_T0_NS0_9ChainTapsILi1ELi5EEENSD_IXT3_EXT1_EEENS0_9ChainGrayEiiNS_9TileOrderE
for b in cur hi; do cuobjdump -sass -fun "$k" /tmp/$b/bin/cbi-bench > $d/sass-$b.txt 2>&1; echo "sass $b $(grep -cE '^\s+/\*[0-9a-f]+\*/' $d/sass-$b.txt) instructions"; done
tar -C $d -cJf $OUT/call3.tar.xz .
