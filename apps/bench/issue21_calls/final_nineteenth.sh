#!/usr/bin/env bash
# Nineteenth session, call 3 (H100): the final code. Pairs by size with the
# new default rule (fused, default, no-pairs: the gray pipelines and the
# smoothing pairs, 640x480 to 8192^2, to check call 2's H200 finding on the
# H100); the issue's pipelines with no schedule (gray pipeline at 4096^2
# and 8192^2, unsharp mask and difference of Gaussians at 4096^2); the GPU
# suites and sanitizers.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
sizes=(--size 640x480 --size 1920x1080 --size 3000x2000 --size 4096x4096 --size 8192x8192)
$u/bin/cbi-bench --suite filters --image 8u:3 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 "${gray_pipes[@]}" \
  --pipeline "gaussian:5 | gaussian:5" --pipeline "blur:3 | gaussian:5" \
  --runs 20 --csv $OUT/pairs3.csv > /tmp/p3.txt 2>&1; echo "pairs 8u:3 rc=$? ${SECONDS}s"
$u/bin/cbi-bench --suite filters --image 8u:1 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 \
  --pipeline "gaussian:5 | gaussian:5" --pipeline "blur:3 | gaussian:5" \
  --runs 20 --csv $OUT/pairs1.csv > /tmp/p1.txt 2>&1; echo "pairs 8u:1 rc=$? ${SECONDS}s"
$u/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 --filter gaussian:9 --schedule stream:256x16 \
  --pipeline apps/bench/pipelines/unsharp.json --pipeline apps/bench/pipelines/dog.json \
  --runs 20 --csv $OUT/blends.csv > /tmp/b.txt 2>&1; echo "blends rc=$? ${SECONDS}s"
grep -hE "DIFFERS|error|FAIL" /tmp/p1.txt /tmp/p3.txt /tmp/b.txt | head
python3 - $OUT <<'PY'
import csv, sys
d = {}
for n in ("pairs3", "pairs1", "blends"):
    for r in csv.DictReader(open(f"{sys.argv[1]}/{n}.csv")):
        if r["suite"] == "pipeline":
            d[(r["workload"], r["channels"], int(r["width"]), int(r["height"]), r["variant"])] = (float(r["median_ms"]), float(r["x_floor"]))
for k in sorted({k[:4] for k in d if k[4] == "default"}, key=lambda k: (k[1], k[0], k[2] * k[3])):
    f, df, n, u = (d[k + (v,)] for v in ("fused", "default", "no-pairs", "unfused"))
    print(f"{k[0][-36:]:36s} 8u:{k[1]} {k[2]:>5d}x{k[3]:<5d} fused {f[0]:.4f} default {df[0]:.4f} ({df[1]:.2f}x) "
          f"no-pairs {n[0]:.4f} unfused {u[0]:.4f} fused/no-pairs {f[0] / n[0]:.3f} default/no-pairs {df[0] / n[0]:.3f}")
PY
checks "Fusion.DefaultPairsTakeTheirStripHeightFromTheImage:Fusion.PairsMeasuredFaster*:Fusion.StreamPairs*:Fusion.StencilPairsOnStream*" \
  test_fusion test_defaults test_filters_cuda
