#!/usr/bin/env bash
# Twenty-second session, call 2: strips taller than the candidates (pairs
# 12 .. 24, blends 8 .. 24), given by name: the gray pipeline and
# gaussian:5 | sobel:mag (base: 63cb9e5's cbi-bench), the unsharp mask and
# the difference of Gaussians (r80: call 1's blend kernel at 80 registers),
# at H = 16 .. 64, twice; the default's own choice beside them. Binaries:
# bundle-extra/blends-bins.tar.xz (call 1's).
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
d=/tmp/call2; mkdir -p $d
tar -C /tmp -xJf bundle-extra/blends-bins.tar.xz
heights=(16 20 24 32 40 48 64)
for round in 1 2; do
  pipes=(--pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "gaussian:5 | sobel:mag")
  for h in "${heights[@]}"; do
    pipes+=(--pipeline "color:gray | gaussian:5@stream:256x$h | sobel:mag@stream:256x$h" --pipeline "gaussian:5@stream:256x$h | sobel:mag@stream:256x$h")
  done
  /tmp/base/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 --size 6000x4000 --size 8192x8192 --filter sobel:mag \
    --schedule stream:256x16 "${pipes[@]}" --runs 20 --csv $d/pairs$round.csv > /tmp/p$round.txt 2>&1; echo "pairs $round rc=$? ${SECONDS}s"
  blends=(--pipeline apps/bench/pipelines/unsharp.json --pipeline apps/bench/pipelines/dog.json)
  for h in "${heights[@]}"; do
    for p in unsharp dog; do
      sed "s/^{/{\"schedule\": \"stream:256x$h\",/" apps/bench/pipelines/$p.json > /tmp/$p-H$h.json
      blends+=(--pipeline /tmp/$p-H$h.json)
    done
  done
  /tmp/r80/bin/cbi-bench --suite filters --image 8u:3 --size 4096x4096 --size 8192x8192 --filter gaussian:9 \
    --schedule stream:256x16 "${blends[@]}" --runs 20 --csv $d/blends$round.csv > /tmp/b$round.txt 2>&1; echo "blends $round rc=$? ${SECONDS}s"
done
grep -hE "DIFFERS|error|FAIL" /tmp/p?.txt /tmp/b?.txt | head
python3 - $d <<'PY'
import csv, sys, collections, glob, re
d = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + "/*.csv")):
    for r in csv.DictReader(open(f)):
        if r["suite"] != "pipeline": continue
        w = r["workload"]
        m = re.search(r"stream:256x(\d+)", w) or re.search(r"-H(\d+)\.json", w)
        name = re.sub(r"@stream:256x\d+", "", re.sub(r"/tmp/(\w+)-H\d+\.json", r"\1", w)).replace("apps/bench/pipelines/", "").replace(".json", "")
        if m and r["variant"] != "fused": continue
        if not m and r["variant"] != "default": continue
        col = "H" + m.group(1) if m else "default"
        d[(name, r["width"] + "x" + r["height"], col)].append((float(r["median_ms"]), float(r["x_floor"])))
cols = ["default"] + [f"H{h}" for h in (16, 20, 24, 32, 40, 48, 64)]
print(f"{'pipeline':38s} {'size':>9s} | " + " | ".join(f"{c:>15s}" for c in cols))
for k in sorted({k[:2] for k in d}):
    cells = [" ".join(f"{m:.4f}" for m, _ in d.get(k + (c,), [])) for c in cols]
    print(f"{k[0][:38]:38s} {k[1]:>9s} | " + " | ".join(f"{c:>15s}" for c in cells))
PY
tar -C $d -cJf $OUT/call2.tar.xz .
