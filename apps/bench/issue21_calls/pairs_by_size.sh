#!/usr/bin/env bash
# SASS of the chain_stream kernels and the stream8 kernels of a cbi-bench build.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
mkdir -p /tmp/s && tar -C /tmp/s -xJf ${BIN:-bundle-extra/base-bin.tar.xz}
export PATH=$PATH:/usr/local/cuda/bin
cuobjdump -lelf /tmp/s/bin/cbi-bench | head -3
cuobjdump -sass /tmp/s/bin/cbi-bench > /tmp/all.sass 2>&1; echo "rc=$? $(wc -l < /tmp/all.sass)"
grep -n "Function : .*chain_stream" /tmp/all.sass | head -40
python3 - <<'PY' > $OUT/chain.sass
import re
text = open('/tmp/all.sass').read()
parts = re.split(r'(?=\n\s*Function : )', text)
for p in parts:
    if 'chain_stream' in p.split('\n', 2)[1]:
        print(p)
PY
xz -9 $OUT/chain.sass; ls -la $OUT
BIN=bundle-extra/base-bin.tar.xz; . apps/bench/issue21_calls/common.sh
/tmp/s/bin/cbi-bench --suite filters --image 8u:1 --size 4096x4096 --size 8192x8192 --filter gaussian:5 --schedule stream:256x16 \
  --pipeline "gaussian:5 | sobel:mag" --pipeline "gaussian:3 | sobel:mag" --pipeline "blur:3 | gaussian:5" --pipeline "gaussian:5 | gaussian:5" \
  --pipeline "gaussian:5 | sobel:x" --pipeline "blur:5 | blur:5" --runs 20 --csv $OUT/pairs1.csv > $OUT/pairs1.txt 2>&1; echo "pairs1 rc=$?"
/tmp/s/bin/cbi-bench --suite filters --image 8u:3 --size 1920x1080 --size 6000x4000 --filter gaussian:5 --schedule stream:256x16 \
  --pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "color:gray | gaussian:3 | sobel:mag" --pipeline "color:gray | blur:3 | sobel:mag" \
  --pipeline "color:gray | gaussian:5 | gaussian:5" --pipeline "color:gray | gaussian:5 | sobel:x" --runs 20 --csv $OUT/pairs3.csv > $OUT/pairs3.txt 2>&1; echo "pairs3 rc=$?"
python3 - $OUT <<'PY'
import csv, sys
o = sys.argv[1]
for n in ("pairs1", "pairs3"):
    for r in csv.DictReader(open(f"{o}/{n}.csv")):
        print(f'{r["workload"][:44]:44s} {r["variant"]:16s} {r["width"]:>5s} {r["channels"]} {float(r["median_ms"]):.4f} {float(r["x_floor"]):.2f}')
PY
