#!/usr/bin/env bash
# Call 7: one halo lane for 1-channel pairs. New build's tests and sanitizers; then base (0cc10f3) and new alternating.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
SECONDS=0
. apps/bench/issue21_calls/common.sh
$u/bin/test_fusion --gtest_brief=1 > /tmp/tf.log 2>&1; echo "test_fusion rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' /tmp/tf.log | tr '\n' ' ') ${SECONDS}s"
grep -E "Failure|FAILED|Expected|Which is" /tmp/tf.log | head -20
sanitize 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*'
mkdir -p /tmp/base && tar -C /tmp/base -xJf bundle-extra/base-bin.tar.xz
sizes=(--size 1920x1080 --size 4096x4096 --size 6000x4000 --size 8192x8192)
pipes=(--pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "color:gray | blur:3 | sobel:mag" --pipeline "color:gray | gaussian:5 | gaussian:5")
for round in 1 2; do
  for b in base new; do
    bin=/tmp/base/bin/cbi-bench; [ $b = new ] && bin=$u/bin/cbi-bench
    $bin --suite filters --image 8u:3 "${sizes[@]}" --filter gaussian:5 --schedule stream:256x16 "${pipes[@]}" --csv $OUT/$b-pipes$round.csv > /tmp/$b-p$round.txt 2>&1
    echo "$b pipes $round rc=$? ${SECONDS}s"
    $bin --suite filters --image 8u:1 --size 4096x4096 --filter gaussian:5 --schedule stream:256x16 --pipeline "gaussian:5 | sobel:mag" \
      --pipeline "blur:3 | gaussian:5" --csv $OUT/$b-one$round.csv > /tmp/$b-o$round.txt 2>&1
    echo "$b one $round rc=$? ${SECONDS}s"
  done
  [ $SECONDS -gt 400 ] && break
done
grep -hE "DIFFERS|error|FAIL" /tmp/*-p?.txt /tmp/*-o?.txt | head
python3 apps/bench/issue21_calls/compare.py $OUT '*-pipes*.csv' '*-one*.csv'
