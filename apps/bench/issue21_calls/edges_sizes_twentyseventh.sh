#!/usr/bin/env bash
# Twenty-seventh session, call 2: what edge warps that copy nothing would
# give at other sizes (the bound on cheaper copies): new (the bundle)
# against nocopy (bundle-extra/nocopy.tar.xz), --border constant:0, the
# gray pipeline and gaussian:5 | sobel:mag (8u:1 and 8u:3), 640x480 to
# 6000x4000, in turn, twice.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
builds new nocopy.tar.xz
d=$OUT/sizes; mkdir -p $d
sizes=(--size 640x480 --size 1920x1080 --size 3000x2000 --size 4096x4096 --size 6000x4000)
for round in 1 2; do
  for b in new nocopy; do
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:3 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 --border constant:0 \
      --pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "gaussian:5 | sobel:mag" --runs 20 --csv $d/$b-3-$round.csv > /tmp/$b-3-$round.txt 2>&1
    echo "$b 3 $round rc=$? ${SECONDS}s"
    /tmp/$b/bin/cbi-bench --suite filters --image 8u:1 "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 --border constant:0 \
      --pipeline "gaussian:5 | sobel:mag" --runs 20 --csv $d/$b-1-$round.csv > /tmp/$b-1-$round.txt 2>&1
    echo "$b 1 $round rc=$? ${SECONDS}s"
  done
done
grep -hE "DIFFERS|error|FAIL" /tmp/new-?-?.txt /tmp/nocopy-?-?.txt | head
python3 - "$d" <<'PY'
import csv, sys, glob
d = {}
for f in glob.glob(sys.argv[1] + "/*.csv"):
    b, c, r = f.split("/")[-1][:-4].split("-")
    for x in csv.DictReader(open(f)):
        if x["suite"] == "pipeline" and x["variant"] == "default":
            d.setdefault((x["workload"], c, int(x["width"]), int(x["height"])), {}).setdefault(b, []).append((float(x["median_ms"]), float(x["x_floor"])))
for k in sorted(d, key=lambda k: (k[0], k[1], k[2] * k[3])):
    v = d[k]
    print(f"{k[0]:36s} c{k[1]} {k[2]:>5d}x{k[3]:<5d} new " + " ".join(f"{m:.4f}" for m, _ in v.get("new", [])) +
          "  nocopy " + " ".join(f"{m:.4f}" for m, _ in v.get("nocopy", [])) +
          f"  nocopy/new {sum(m for m, _ in v['nocopy']) / sum(m for m, _ in v['new']):.3f}")
PY
