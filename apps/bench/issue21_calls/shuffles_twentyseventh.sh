#!/usr/bin/env bash
# Twenty-seventh session, call 3: edge warps that copy by shuffles (edges:
# bundle-extra/edges.tar.xz, cbi-bench only) against the bundle's (new:
# through shared memory), on the default border and at --border
# constant:0 (where call 2 measured nocopy). The gray pipeline and gaussian:5 | sobel:mag (8u:1, 8u:3),
# 1920x1080, 4096^2 and 8192^2, in turn, twice.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new edges.tar.xz
d=$OUT/shuffles; mkdir -p $d
sizes=(--size 1920x1080 --size 4096x4096 --size 8192x8192)
run() {  # BUILD BORDER TAG
  /tmp/$1/bin/cbi-bench --suite filters --image 8u:3 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 --border $2 \
    --pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "gaussian:5 | sobel:mag" --runs 20 --csv $d/$1-$3-3.csv > /tmp/$1-$3-3.txt 2>&1
  echo "$1 $3 3 rc=$? ${SECONDS}s"
  /tmp/$1/bin/cbi-bench --suite filters --image 8u:1 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 --border $2 \
    --pipeline "gaussian:5 | sobel:mag" --runs 20 --csv $d/$1-$3-1.csv > /tmp/$1-$3-1.txt 2>&1
  echo "$1 $3 1 rc=$? ${SECONDS}s"
}
for round in 1 2; do
  for b in new edges; do run $b reflect101 r$round; done
  for b in new edges; do run $b constant:0 c$round; done
done
grep -hE "DIFFERS|error|FAIL" /tmp/*-[rc][12]-[13].txt | head
python3 - "$d" <<'PY'
import csv, sys, glob
d = {}
for f in glob.glob(sys.argv[1] + "/*.csv"):
    b, tag, c = f.split("/")[-1][:-4].split("-")
    for x in csv.DictReader(open(f)):
        if x["suite"] == "pipeline" and x["variant"] == "default":
            d.setdefault((tag[0], x["workload"], c, int(x["width"]) * int(x["height"]), x["width"] + "x" + x["height"]), {}).setdefault(b, []).append(
                (float(x["median_ms"]), float(x["x_floor"])))
for k in sorted(d):
    v = d[k]
    line = f"{'reflect101' if k[0] == 'r' else 'constant:0':10s} {k[1]:36s} c{k[2]} {k[4]:>9s}"
    for b in ("new", "edges", "nocopy"):
        if b in v: line += f"  {b} " + " ".join(f"{m:.4f} ({x:.2f}x)" for m, x in v[b])
    line += f"  edges/new {sum(m for m, _ in v['edges']) / sum(m for m, _ in v['new']):.3f}"
    print(line)
PY
