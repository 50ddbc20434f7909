#!/usr/bin/env bash
# Nineteenth session, call 7 (H100): which pairs still win fused now that
# single 8-bit stencils take strips of 8 or 12 rows (call 6: the unfused
# kernels got faster on small images, and fused gray pairs lost there).
# fused (--fuse-stencils) against no-pairs, Sobel pairs and gray pipelines,
# 640x480 to 8192^2. Same build as call 6.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
sizes=(--size 640x480 --size 1920x1080 --size 3000x2000 --size 4096x4096 --size 6000x4000 --size 8192x8192)
$u/bin/cbi-bench --suite filters --image 8u:1 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 \
  --pipeline "gaussian:5 | sobel:mag" --pipeline "blur:3 | sobel:mag" --pipeline "gaussian:5 | sobel:x" \
  --runs 20 --csv $OUT/pairs1.csv > /tmp/p1.txt 2>&1; echo "pairs 8u:1 rc=$? ${SECONDS}s"
$u/bin/cbi-bench --suite filters --image 8u:3 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 "${gray_pipes[@]}" \
  --pipeline "gaussian:5 | sobel:mag" --runs 20 --csv $OUT/pairs3.csv > /tmp/p3.txt 2>&1; echo "pairs 8u:3 rc=$? ${SECONDS}s"
grep -hE "DIFFERS|error|FAIL" /tmp/p1.txt /tmp/p3.txt | head
python3 - $OUT <<'PY'
import csv, sys
d = {}
for n in ("pairs1", "pairs3"):
    for r in csv.DictReader(open(f"{sys.argv[1]}/{n}.csv")):
        if r["suite"] == "pipeline":
            d[(r["workload"], r["channels"], int(r["width"]), int(r["height"]), r["variant"])] = float(r["median_ms"])
for k in sorted({k[:4] for k in d if k[4] == "fused"}, key=lambda k: (k[1], k[0], k[2] * k[3])):
    f, n = d[k + ("fused",)], d[k + ("no-pairs",)]
    print(f"{k[0][:36]:36s} 8u:{k[1]} {k[2]:>5d}x{k[3]:<5d} fused {f:.4f} no-pairs {n:.4f} fused/no-pairs {f / n:.3f}")
PY
