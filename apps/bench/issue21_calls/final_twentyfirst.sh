#!/usr/bin/env bash
# Twenty-first session, call 4: a 3x3 Sobel magnitude's sum of squares by
# one exact FMA and the output bytes packed by permutes (new: bundle/),
# against hi (call 3's kept build, as bundle-extra/hi-bin.tar.xz), in turn,
# twice; then the new build on the issue's pipelines with their floors
# (final3_nineteenth.sh's runs), Nsight Compute's counts, the GPU suites and
# sanitizers. Everything goes back in one tarball.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
d=/tmp/call4; mkdir -p $d
unpack hi; mkdir -p /tmp/new/bin && cp $u/bin/cbi-bench /tmp/new/bin/
for round in 1 2; do
  for b in hi new; do
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:3 --size 1920x1080 --size 4096x4096 --size 8192x8192 --filter sobel:mag \
      --schedule stream:256x16 --pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "gaussian:5 | sobel:mag" \
      --runs 20 --csv $d/$b-three$round.csv > /tmp/$b-t$round.txt 2>&1
    echo "$b three $round rc=$? ${SECONDS}s"
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:1 --size 4096x4096 --filter sobel:mag --schedule stream:256x16 \
      --pipeline "gaussian:5 | sobel:mag" --runs 20 --csv $d/$b-one$round.csv > /tmp/$b-o$round.txt 2>&1; echo "$b one $round rc=$? ${SECONDS}s"
  done
done
grep -hE "DIFFERS|error|FAIL" /tmp/*-t?.txt /tmp/*-o?.txt | head
python3 apps/bench/issue21_calls/builds_table.py $d fused,default hi new
$u/bin/cbi-bench --suite filters --image 8u:3 --size 640x480 --size 1920x1080 --size 3000x2000 --size 4096x4096 --size 8192x8192 \
  --filter sobel:mag --schedule stream:256x16 --pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "gaussian:5 | sobel:mag" \
  --runs 20 --csv $d/final-pipes.csv > /tmp/p.txt 2>&1; echo "pipes rc=$? ${SECONDS}s"
$u/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 --size 8192x8192 --filter gaussian:9 --schedule stream:256x16 \
  --pipeline apps/bench/pipelines/unsharp.json --pipeline apps/bench/pipelines/dog.json \
  --runs 20 --csv $d/final-blends.csv > /tmp/b.txt 2>&1; echo "blends rc=$? ${SECONDS}s"
grep -hE "DIFFERS|error|FAIL" /tmp/p.txt /tmp/b.txt | head
python3 apps/bench/issue21_calls/pipes_table.py $d final-pipes final-blends
ncu_gray $u/bin/cbi-bench 8192x8192 $d/ncu-new.txt
checks "Fusion.StencilPairsOnStream*:Fusion.StreamPairs*:Fusion.FusedEqualsUnfused*:Fusion.DefaultStreamSchedules*:Fusion.Blends*" \
  test_fusion test_defaults test_filters_cuda
tar -C $d -cJf $OUT/call4.tar.xz .
