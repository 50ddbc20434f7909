#!/usr/bin/env bash
# Call 4: the new build's tests and sanitizers, then base vs new benches, alternating.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
SECONDS=0
bundle/run.sh chain > $OUT/run-chain.txt 2>&1; echo "run.sh chain rc=$? ${SECONDS}s"
grep -E "test_fusion|memcheck|racecheck" $OUT/run-chain.txt
mv $OUT/chain.csv $OUT/new-chain.csv
. apps/bench/issue21_calls/common.sh
suites test_filters_cuda test_defaults
mkdir -p /tmp/base && tar -C /tmp/base -xJf bundle-extra/base-bin.tar.xz
sizes=(--size 1920x1080 --size 3000x2000 --size 4096x4096 --size 6000x4000 --size 8192x8192)
pipes=(--pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "color:gray | blur:3 | sobel:mag" --pipeline "color:gray | gaussian:5 | gaussian:5")
single=(--suite filters --size 4096x4096 --filter gaussian:9 --filter blur:9 --filter sobel:mag --schedule stream:256x16 --schedule stream:256x20)
for round in 1 2; do
  for b in base new; do
    bin=/tmp/base/bin/cbi-bench; [ $b = new ] && bin=/tmp/cbi-bundle/bin/cbi-bench
    $bin --suite filters --image 8u:3 "${sizes[@]}" --filter gaussian:5 --schedule stream:256x16 "${pipes[@]}" --csv $OUT/$b-pipes$round.csv > /tmp/$b-pipes$round.txt 2>&1
    echo "$b pipes $round rc=$? ${SECONDS}s"
    $bin "${single[@]}" --image 8u:3 --image 8u:1 --csv $OUT/$b-single$round.csv > /tmp/$b-single$round.txt 2>&1
    echo "$b single $round rc=$? ${SECONDS}s"
  done
  [ $SECONDS -gt 420 ] && break
done
grep -hE "DIFFERS|error|FAIL" /tmp/*-pipes*.txt /tmp/*-single*.txt | head
python3 apps/bench/issue21_calls/compare.py $OUT '*-pipes*.csv' '*-single*.csv'
