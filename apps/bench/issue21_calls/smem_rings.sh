#!/usr/bin/env bash
# Twenty-first session, call 1: the pair kernel's rings in shared memory
# (slots cycle by index; no register moves) at three register caps. The new
# build's tests and sanitizers (bundle/: the rings in shared memory, cap 72),
# then, as xz tarballs of bin/cbi-bench in bundle-extra/: base (7adf07d,
# rings in registers), smem72, smem56, smem48 (the same code capped at 72,
# 56, 48 registers), in turn, twice; Nsight Compute on base and the fastest.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
checks 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.FusedEqualsUnfused*' test_fusion test_defaults
builds=(base smem72 smem56 smem48)
for b in "${builds[@]}"; do unpack $b; done
for round in 1 2; do
  for b in "${builds[@]}"; do
    [ $SECONDS -gt 420 ] && break 2
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:3 --size 1920x1080 --size 4096x4096 --size 8192x8192 --filter sobel:mag \
      --schedule stream:256x16 --pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "gaussian:5 | sobel:mag" \
      --runs 20 --csv $OUT/$b-three$round.csv > /tmp/$b-t$round.txt 2>&1; echo "$b three $round rc=$? ${SECONDS}s"
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:1 --size 4096x4096 --filter sobel:mag --schedule stream:256x16 \
      --pipeline "gaussian:5 | sobel:mag" --pipeline "blur:3 | gaussian:5" \
      --runs 20 --csv $OUT/$b-one$round.csv > /tmp/$b-o$round.txt 2>&1; echo "$b one $round rc=$? ${SECONDS}s"
  done
done
grep -hE "DIFFERS|error|FAIL" /tmp/*-t?.txt /tmp/*-o?.txt | head
python3 apps/bench/issue21_calls/builds_table.py $OUT all "${builds[@]}"
for b in base smem56; do
  [ $SECONDS -gt 500 ] && break
  timeout 45 ncu -k regex:chain_stream -c 1 --section SpeedOfLight --section Occupancy --section InstructionStats --section SchedulerStats \
    --section WarpStateStats /tmp/$b/bin/cbi-bench --suite filters --image 8u:3 --size 8192x8192 --pipeline "color:gray | gaussian:5 | sobel:mag" \
    --runs 3 > $OUT/ncu-$b.txt 2>&1
  echo "ncu $b rc=$? ${SECONDS}s"
  grep -E "Duration|Issued Warp Per|No Eligible|Achieved Occupancy|Theoretical Occupancy|Registers Per|DRAM Throughput|Executed Instructions  |Block Limit" $OUT/ncu-$b.txt | head -16
done
# The gray pipeline's pair kernel (border 0 on both stencils, 3x3 Sobel magnitude) in SASS, base and smem56.
k=_ZN3cbi4cuda12chain_streamINS_10GaussianOpIhLNS_10BorderModeE0ENS_20AnyBorderColorSourceIhEEEENS_7SobelOpIhLS3_0ENS_15AnyBorderSourceIhEEEELi3ELi1ELi2ELb1ELb1EEEvT_T0_NS0_9ChainTapsILi1ELi5EEENSD_IXT3_EXT1_EEENS0_9ChainGrayEiiNS_9TileOrderE
for b in base smem56; do cuobjdump -sass -fun "$k" /tmp/$b/bin/cbi-bench > $OUT/sass-$b.txt 2>&1; echo "sass $b rc=$? $(grep -cE '^\s+/\*[0-9a-f]+\*/' $OUT/sass-$b.txt) instructions"; done
