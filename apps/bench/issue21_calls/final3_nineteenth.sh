#!/usr/bin/env bash
# Nineteenth session, call 8 (H100): the final code (the pair rule of
# 7b07d4a kept, every kernel on its strip height by waves): the issue's
# pipelines with no schedule, the gray pipeline on small images (not fused
# by default), the GPU suites and sanitizers.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
$u/bin/cbi-bench --suite filters --image 8u:3 --size 640x480 --size 1920x1080 --size 3000x2000 --size 4096x4096 --size 8192x8192 \
  --filter sobel:mag --schedule stream:256x16 --pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "gaussian:5 | sobel:mag" \
  --runs 20 --csv $OUT/pipes.csv > /tmp/p.txt 2>&1; echo "pipes rc=$? ${SECONDS}s"
$u/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 --size 8192x8192 --filter gaussian:9 --schedule stream:256x16 \
  --pipeline apps/bench/pipelines/unsharp.json --pipeline apps/bench/pipelines/dog.json \
  --runs 20 --csv $OUT/blends.csv > /tmp/b.txt 2>&1; echo "blends rc=$? ${SECONDS}s"
grep -hE "DIFFERS|error|FAIL" /tmp/p.txt /tmp/b.txt | head
python3 - $OUT <<'PY'
import csv, sys
d = {}
for n in ("pipes", "blends"):
    for r in csv.DictReader(open(f"{sys.argv[1]}/{n}.csv")):
        if r["suite"] == "pipeline":
            d[(r["workload"], int(r["width"]), int(r["height"]), r["variant"])] = (float(r["median_ms"]), float(r["x_floor"]))
for k in sorted({k[:3] for k in d}, key=lambda k: (k[0], k[1] * k[2])):
    print(f"{k[0][-36:]:36s} {k[1]:>5d}x{k[2]:<5d} " + "  ".join(f"{v} {d[k + (v,)][0]:.4f} ({d[k + (v,)][1]:.2f}x)" for v in ("default", "fused", "no-pairs", "unfused")))
PY
checks "Fusion.DefaultStreamSchedules*:Fusion.PairsMeasuredFaster*:Fusion.Blends*:Fusion.StreamPairs*:Fusion.StencilPairsOnStream*" \
  test_fusion test_defaults test_filters_cuda
