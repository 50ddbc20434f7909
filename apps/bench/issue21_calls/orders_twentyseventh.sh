#!/usr/bin/env bash
# Twenty-seventh session, call 10: block orders for the fused pairs at one
# strip height (call 1 measured +column:1 and +column:3 2-3 % faster than
# row-major once, at 4096^2): the bundle, each pair pipeline on
# stream:256x20 row-major, +column:1 and +column:3, 1920x1080 to 8192^2,
# two rounds.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
d=$OUT/orders; mkdir -p $d
sizes=(--size 1920x1080 --size 4096x4096 --size 6000x4000 --size 8192x8192)
for round in 1 2; do
  for c in 3 1; do
    args=()
    for o in "" "+column:1" "+column:3"; do
      [ $c = 3 ] && args+=(--pipeline "color:gray | gaussian:5@stream:256x20$o | sobel:mag@stream:256x20$o")
      args+=(--pipeline "gaussian:5@stream:256x20$o | sobel:mag@stream:256x20$o")
    done
    $u/bin/cbi-bench --suite filters --image 8u:$c "${sizes[@]}" --filter sobel:mag --schedule stream:256x16 "${args[@]}" \
      --runs 20 --csv $d/orders-$round-$c.csv > /tmp/o-$round-$c.txt 2>&1
    echo "round $round c$c rc=$? ${SECONDS}s"
  done
done
grep -hE "DIFFERS|error|FAIL" /tmp/o-?-?.txt | head
python3 - $d <<'PY'
import csv, glob, re, sys
d = {}
for f in sorted(glob.glob(sys.argv[1] + "/*.csv")):
    c = f[-5]
    for x in csv.DictReader(open(f)):
        if x["suite"] != "pipeline" or x["variant"] != "fused": continue
        w = x["workload"]; o = re.search(r"stream:256x20(\+column:\d)?", w).group(1) or "row-major"
        base = re.sub(r"@stream:256x20(\+column:\d)?", "", w)
        d.setdefault((base, c, int(x["width"]) * int(x["height"]), x["width"] + "x" + x["height"]), {}).setdefault(o, []).append(float(x["median_ms"]))
for k in sorted(d):
    v = d[k]; r = sum(v["row-major"])
    print(f"{k[0]:36s} c{k[1]} {k[3]:>9s}  " + "  ".join(f"{o} " + " ".join(f"{m:.4f}" for m in v[o]) + f" ({sum(v[o]) / r:.3f})" for o in ("row-major", "+column:1", "+column:3")))
PY
