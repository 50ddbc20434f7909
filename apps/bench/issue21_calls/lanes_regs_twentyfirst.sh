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
ncu_gray /tmp/cur/bin/cbi-bench 8192x8192 $d/ncu-cur.txt WarpStateStats
for b in cur hi; do sass_gray /tmp/$b/bin/cbi-bench $d/sass-$b.txt; done
tar -C $d -cJf $OUT/call3.tar.xz .
