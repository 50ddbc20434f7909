#!/usr/bin/env bash
# Nineteenth session, call 1: a default-fused pair's strip height chosen per
# image by waves (Backend::chain_strip_height; cuda_chain_stream.cuh,
# chain_stream_strip_height) against the table's H = 16 given by name, at five
# sizes; what the executor picks (--print-pipeline); single 8-bit stencils and
# the blends at H = 8 .. 24 on small images (measured only); the GPU suites and
# sanitizers.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
sizes=(--size 1920x1080 --size 3000x2000 --size 4096x4096 --size 6000x4000 --size 8192x8192)
g16="@stream:256x16"
$u/bin/cbi-bench --suite filters --image 8u:3 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 \
  --pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "color:gray | gaussian:5$g16 | sobel:mag$g16" \
  --pipeline "gaussian:5 | sobel:mag" --pipeline "gaussian:5$g16 | sobel:mag$g16" \
  --runs 20 --csv $OUT/pairs3.csv > /tmp/p3.txt 2>&1; echo "8u:3 rc=$? ${SECONDS}s"
$u/bin/cbi-bench --suite filters --image 8u:1 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 \
  --pipeline "gaussian:5 | sobel:mag" --pipeline "gaussian:5$g16 | sobel:mag$g16" \
  --pipeline "blur:3 | sobel:x" --pipeline "blur:3$g16 | sobel:x$g16" \
  --runs 20 --csv $OUT/pairs1.csv > /tmp/p1.txt 2>&1; echo "8u:1 rc=$? ${SECONDS}s"
grep -hE "DIFFERS|error|FAIL" /tmp/p3.txt /tmp/p1.txt | head
python3 - $OUT <<'PY'
import csv, sys, collections
d = collections.defaultdict(dict)
for n in ("pairs3", "pairs1"):
    for r in csv.DictReader(open(f"{sys.argv[1]}/{n}.csv")):
        if r["suite"] != "pipeline": continue
        given = "@stream:256x16" in r["workload"]
        name = r["workload"].replace("@stream:256x16", "") + f" 8u:{r['channels']}"
        key = "H16 given" if given else r["variant"]
        if given and r["variant"] != "fused": continue
        d[(name, r["width"] + "x" + r["height"])][key] = (float(r["median_ms"]), float(r["x_floor"]))
cols = ["fused", "H16 given", "default", "no-pairs", "unfused"]
print(f"{'pipeline':44s} {'size':>10s} " + " ".join(f"{c:>16s}" for c in cols) + "  fused/H16")
for (name, size), v in d.items():
    cells = " ".join(f"{v[c][0]:8.4f} ({v[c][1]:4.2f}x)" if c in v else " " * 16 for c in cols)
    print(f"{name[:44]:44s} {size:>10s} {cells}  {v['fused'][0] / v['H16 given'][0]:.3f}")
PY
# What the executor picks, per size (plans only).
python3 - <<'PY'
import cv2, numpy as np
for w, h in ((1920, 1080), (3000, 2000), (4096, 4096), (6000, 4000), (8192, 8192)):
    for c in (1, 3):
        cv2.imwrite(f"/tmp/plan-{w}x{h}-{c}.png", np.zeros((h, w, c) if c == 3 else (h, w), np.uint8))
PY
for s in 1920x1080 3000x2000 4096x4096 6000x4000 8192x8192; do
  for p in "3 color:gray | gaussian:5 | sobel:mag" "3 gaussian:5 | sobel:mag" "1 gaussian:5 | sobel:mag" "1 blur:3 | sobel:x"; do
    $u/bin/cbi-filter /tmp/plan-$s-${p%% *}.png --device cuda --fuse-stencils --pipeline "${p#* }" --print-pipeline |
      grep -o "stream:256x[0-9]* (default table, strip[^)]*)" | head -1 | sed "s/^/  $s 8u:${p%% *} ${p#* }: /"
  done
done
echo "picks ${SECONDS}s"
# Single 8-bit stencils and the blends on images of few blocks: strip heights.
sched=(); for h in 8 12 16 20 24; do sched+=(--schedule stream:256x$h); done
$u/bin/cbi-bench --suite filters --image 8u:3 --size 1920x1080 --size 3000x2000 --size 4096x4096 \
  --filter gaussian:9 --filter sobel:mag --filter blur:5 "${sched[@]}" --runs 20 --csv $OUT/single.csv > /tmp/s.txt 2>&1
echo "single rc=$? ${SECONDS}s"
for n in unsharp dog; do
  for h in 8 12 16 20 24; do
    sed "s/\"input\"}/\"input\", \"schedule\": \"stream:256x$h\"}/" apps/bench/pipelines/$n.json > /tmp/$n-$h.json
  done
done
bl=(); for h in 8 12 16 20 24; do bl+=(--pipeline /tmp/unsharp-$h.json --pipeline /tmp/dog-$h.json); done
$u/bin/cbi-bench --suite filters --image 8u:3 --size 1920x1080 --size 4096x4096 --filter gaussian:9 --schedule stream:256x16 \
  "${bl[@]}" --runs 20 --csv $OUT/blends.csv > /tmp/b.txt 2>&1; echo "blends rc=$? ${SECONDS}s"
grep -hE "DIFFERS|error|FAIL" /tmp/s.txt /tmp/b.txt | head
python3 - $OUT <<'PY'
import csv, sys, re, collections
d = collections.defaultdict(dict)
for n in ("single", "blends"):
    for r in csv.DictReader(open(f"{sys.argv[1]}/{n}.csv")):
        if n == "blends" and (r["suite"] != "pipeline" or r["variant"] != "default"): continue
        m = re.search(r"(\d+)x(\d+)$", r["variant"]) if n == "single" else re.search(r"-(\d+)\.json", r["workload"])
        if not m: continue
        h = int(m.group(m.lastindex))
        name = r["workload"] if n == "single" else re.sub(r"/tmp/(\w+)-\d+\.json", r"\1", r["workload"])
        d[(name, r["width"] + "x" + r["height"])][h] = float(r["median_ms"])
for k, v in d.items():
    print(f"{k[0][:24]:24s} {k[1]:>10s} " + "  ".join(f"H{h} {v[h]:.4f}" for h in sorted(v)))
PY
checks "Fusion.DefaultPairsTakeTheirStripHeightFromTheImage:Fusion.PairsMeasuredFaster*:Fusion.StreamPairs*" \
  test_fusion test_defaults test_filters_cuda
