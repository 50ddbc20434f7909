#!/usr/bin/env bash
# Eighteenth session, call 8: strip heights for the pair kernel (code of
# 7b07d4a): the fused variant of two pairs with both stencils on
# stream:256xH, H = 12 .. 32, four sizes. At 72 registers an SM holds 14
# two-warp blocks: 4096^2 at H = 16 is 2304 blocks (1.25 waves of 1848), at
# H = 20 1845 (one wave).
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
gpu_line
args=()
for h in 12 16 20 24 32; do
  args+=(--pipeline "color:gray | gaussian:5@stream:256x$h | sobel:mag@stream:256x$h")
done
$u/bin/cbi-bench --suite filters --image 8u:3 --size 1920x1080 --size 4096x4096 --size 6000x4000 --size 8192x8192 \
  --filter sobel:mag --schedule stream:256x16 "${args[@]}" --runs 20 --csv $OUT/heights3.csv > /tmp/h3.txt 2>&1; echo "8u:3 rc=$? ${SECONDS}s"
args=()
for h in 12 16 20 24 32; do args+=(--pipeline "gaussian:5@stream:256x$h | sobel:mag@stream:256x$h"); done
$u/bin/cbi-bench --suite filters --image 8u:1 --size 1920x1080 --size 4096x4096 --size 8192x8192 \
  --filter sobel:mag --schedule stream:256x16 "${args[@]}" --runs 20 --csv $OUT/heights1.csv > /tmp/h1.txt 2>&1; echo "8u:1 rc=$? ${SECONDS}s"
grep -hE "DIFFERS|error|FAIL" /tmp/h3.txt /tmp/h1.txt | head
python3 - $OUT <<'PY'
import csv, sys, re, collections
d = collections.defaultdict(dict)
for n in ("heights3", "heights1"):
    for r in csv.DictReader(open(f"{sys.argv[1]}/{n}.csv")):
        if r["variant"] != "fused": continue
        h = re.search(r"256x(\d+)", r["workload"]).group(1)
        name = re.sub(r"@stream:256x\d+", "", r["workload"])
        d[(name, r["width"] + "x" + r["height"])][int(h)] = float(r["median_ms"])
for k, v in d.items():
    print(f"{k[0][:36]:36s} {k[1]:>10s} " + "  ".join(f"H{h} {v[h]:.4f}" for h in sorted(v)))
PY
