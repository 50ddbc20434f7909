#!/usr/bin/env bash
# Eighteenth session, call 5: which stencil pairs win fused with the code of
# 4053436 (integer gray, ring of K2 rows, 72 registers, Sobel 3x3 constants),
# by size: fused (--fuse-stencils) against no-pairs (no stencil pair fused),
# 1-channel pairs and gray pipelines; then the build's GPU tests and sanitizers.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
sizes=(--size 1920x1080 --size 3000x2000 --size 4096x4096 --size 6000x4000 --size 8192x8192)
$u/bin/cbi-bench --suite filters --image 8u:1 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 \
  --pipeline "gaussian:5 | sobel:mag" --pipeline "gaussian:3 | sobel:mag" --pipeline "blur:3 | sobel:mag" \
  --pipeline "gaussian:5 | sobel:x" --pipeline "gaussian:5 | gaussian:5" --pipeline "blur:3 | gaussian:5" \
  --runs 20 --csv $OUT/pairs1.csv > /tmp/p1.txt 2>&1; echo "pairs 8u:1 rc=$? ${SECONDS}s"
$u/bin/cbi-bench --suite filters --image 8u:3 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 \
  --pipeline "gaussian:5 | sobel:mag" --pipeline "color:gray | gaussian:3 | sobel:mag" --pipeline "color:gray | gaussian:5 | sobel:x" \
  --runs 20 --csv $OUT/pairs3.csv > /tmp/p3.txt 2>&1; echo "pairs 8u:3 rc=$? ${SECONDS}s"
grep -hE "DIFFERS|error|FAIL" /tmp/p1.txt /tmp/p3.txt | head
python3 - $OUT > $OUT/pairs-by-size.txt <<'PY'
import collections, csv, sys
d = {}
for n in ("pairs1", "pairs3"):
    for r in csv.DictReader(open(f"{sys.argv[1]}/{n}.csv")):
        d[(r["workload"], r["channels"], int(r["width"]), int(r["height"]), r["variant"])] = float(r["median_ms"])
for k in sorted({k[:4] for k in d if k[4] == "fused"}, key=lambda k: (k[0], k[1], k[2] * k[3])):
    f, n = d[k + ("fused",)], d[k + ("no-pairs",)]
    print(f"{k[0][:36]:36s} c{k[1]} {k[2]:>5d}x{k[3]:<5d} fused {f:.4f} no-pairs {n:.4f} fused/no-pairs {f / n:.2f}")
PY
cat $OUT/pairs-by-size.txt
checks 'Fusion.StencilPairsOnStream*:Fusion.StreamPairs*' test_fusion test_filters_cuda
