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
  ncu_gray /tmp/$b/bin/cbi-bench 8192x8192 $OUT/ncu-$b.txt WarpStateStats
done
for b in base smem56; do sass_gray /tmp/$b/bin/cbi-bench $OUT/sass-$b.txt; done
