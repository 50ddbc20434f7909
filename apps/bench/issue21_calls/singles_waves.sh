#!/usr/bin/env bash
# Nineteenth session, call 5 (H100): single 8-bit stencils and fused blends
# on the default table's schedule now take their strip height by waves
# (size_strips; cuda_stream8.cuh, stream8_kernel_strip_height). Each as a
# one-node pipeline with no schedule (the executor picks H) against the
# same with stream:256x16 given, six sizes; the heights 8 .. 24 swept on the
# filters suite for the best; what the executor picks; the GPU suites and
# sanitizers.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
sizes=(--size 640x480 --size 1920x1080 --size 3000x2000 --size 4096x4096 --size 6000x4000 --size 8192x8192)
sched=(); for h in 8 12 16 20 24; do sched+=(--schedule stream:256x$h); done
for img in 8u:3 8u:1; do
  [ $img = 8u:3 ] && fs="gaussian:9 sobel:mag blur:5" || fs="gaussian:5 sobel:mag blur:9"
  pipes=(); filters=()
  for f in $fs; do pipes+=(--pipeline "$f" --pipeline "$f@stream:256x16"); filters+=(--filter $f); done
  $u/bin/cbi-bench --suite filters --image $img "${sizes[@]}" "${filters[@]}" "${sched[@]}" "${pipes[@]}" \
    --runs 20 --csv $OUT/singles-${img/:/}.csv > /tmp/s.txt 2>&1; echo "$img rc=$? ${SECONDS}s"
  grep -hE "DIFFERS|error|FAIL" /tmp/s.txt | head -5
done
for n in unsharp dog; do
  sed "s/\"input\"}/\"input\", \"schedule\": \"stream:256x16\"}/" apps/bench/pipelines/$n.json > /tmp/$n-16.json
done
$u/bin/cbi-bench --suite filters --image 8u:3 --size 1920x1080 --size 4096x4096 --size 8192x8192 --filter gaussian:9 \
  --schedule stream:256x16 --pipeline apps/bench/pipelines/unsharp.json --pipeline /tmp/unsharp-16.json \
  --pipeline apps/bench/pipelines/dog.json --pipeline /tmp/dog-16.json --runs 20 --csv $OUT/blends.csv > /tmp/b.txt 2>&1
echo "blends rc=$? ${SECONDS}s"; grep -hE "DIFFERS|error|FAIL" /tmp/b.txt | head -5
python3 - $OUT <<'PY'
import csv, sys, re, collections
sweep = collections.defaultdict(dict); pipe = collections.defaultdict(dict)
for n in ("singles-8u3", "singles-8u1", "blends"):
    for r in csv.DictReader(open(f"{sys.argv[1]}/{n}.csv")):
        size = r["width"] + "x" + r["height"]
        if r["suite"] == "filters":
            m = re.search(r"256x(\d+)$", r["variant"])
            if m: sweep[(r["workload"], r["channels"], size)][int(m.group(1))] = float(r["median_ms"])
        elif r["variant"] == "default":
            w = r["workload"]
            given = "@stream:256x16" in w or "-16.json" in w
            name = re.sub(r"@stream:256x16$", "", w)
            name = re.sub(r".*/(\w+?)(-16)?\.json$", r"\1", name)
            pipe[(name, r["channels"], size)]["H16" if given else "waves"] = (float(r["median_ms"]), float(r["x_floor"]))
print(f"{'node':12s} {'img':4s} {'size':>10s} {'waves (x)':>17s} {'H16 given':>10s} waves/H16 {'best swept':>14s}")
for k, v in pipe.items():
    s = sweep.get(k, {})
    best = f"H{min(s, key=s.get)} {min(s.values()):.4f}" if s else ""
    print(f"{k[0]:12s} 8u:{k[1]} {k[2]:>10s} {v['waves'][0]:8.4f} ({v['waves'][1]:5.2f}x) {v['H16'][0]:10.4f} {v['waves'][0] / v['H16'][0]:9.3f} {best:>14s}")
PY
python3 -c "
import cv2, numpy as np
for w, h in ((640, 480), (1920, 1080), (3000, 2000), (4096, 4096), (6000, 4000), (8192, 8192)):
    cv2.imwrite(f'/tmp/plan-{w}x{h}.png', np.zeros((h, w, 3), np.uint8))"
for s in 640x480 1920x1080 3000x2000 4096x4096 6000x4000 8192x8192; do
  echo "  $s 8u:3: gaussian:9 $($u/bin/cbi-filter /tmp/plan-$s.png --device cuda --gaussian 9 --print-pipeline | grep -o 'stream:256x[0-9]*' | head -1)," \
    "sobel:mag $($u/bin/cbi-filter /tmp/plan-$s.png --device cuda --pipeline sobel:mag --print-pipeline | grep -o 'stream:256x[0-9]*' | head -1)," \
    "unsharp $($u/bin/cbi-filter /tmp/plan-$s.png --device cuda --pipeline-file apps/bench/pipelines/unsharp.json --print-pipeline | grep -o 'stream:256x[0-9]* (its' | head -1)"
done
checks "Fusion.DefaultStreamSchedules*:Fusion.PairsMeasuredFaster*:Fusion.Blends*:Fusion.StreamPairs*" \
  test_fusion test_defaults test_filters_cuda
