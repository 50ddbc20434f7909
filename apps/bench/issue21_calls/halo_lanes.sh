#!/usr/bin/env bash
# Call 7: one halo lane for 1-channel pairs. New build's tests and sanitizers; then base (0cc10f3) and new alternating.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
SECONDS=0
. apps/bench/issue21_calls/common.sh
$u/bin/test_fusion --gtest_brief=1 > /tmp/tf.log 2>&1; echo "test_fusion rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' /tmp/tf.log | tr '\n' ' ') ${SECONDS}s"
grep -E "Failure|FAILED|Expected|Which is" /tmp/tf.log | head -20
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --error-exitcode 99 $u/bin/test_fusion --gtest_brief=1 \
    --gtest_filter='Fusion.StencilPairsOnStream*:Fusion.StreamPairs*' > /tmp/$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' /tmp/$tool.log | tr '\n' ' ') ${SECONDS}s"
done
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
python3 - $OUT <<'PY'
import csv, sys, glob, collections
o = sys.argv[1]
d = collections.defaultdict(list)
for f in sorted(glob.glob(f"{o}/*-pipes*.csv") + glob.glob(f"{o}/*-one*.csv")):
    b = f.split("/")[-1].split("-")[0]
    for r in csv.DictReader(open(f)):
        d[(r["workload"], r["variant"], r["width"], r["height"], r["channels"], b)].append(float(r["median_ms"]))
for k in sorted({k[:5] for k in d}):
    cells = [" ".join(f"{m:.4f}" for m in d.get(k + (b,), [])) or "-" for b in ("base", "new")]
    print(f"{k[0][:36]:36s} {k[1]:9s} {k[2]:>5s}x{k[3]:<5s} c{k[4]} | base {cells[0]:14s} | new {cells[1]}")
PY
