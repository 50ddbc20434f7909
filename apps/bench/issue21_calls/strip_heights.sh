#!/usr/bin/env bash
# Strip height sweep: stream8 single stencils and the gray pipeline (fused/unfused) on stream:256xH.
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
BIN=${BIN:-bundle-extra/base-bin.tar.xz}; . apps/bench/issue21_calls/common.sh
bench=/tmp/cbi-bundle/bin/cbi-bench
sched=(); for h in 8 12 16 20 24 28 32 40 48 64 96; do sched+=(--schedule stream:256x$h); done
$bench --suite filters --image 8u:3 --size 4096x4096 --size 8192x8192 --filter gaussian:9 --filter blur:9 --filter sobel:mag "${sched[@]}" --runs 20 --csv $OUT/single.csv > $OUT/single.txt 2>&1; echo "single rc=$?"
$bench --suite filters --image 8u:1 --size 4096x4096 --filter gaussian:5 "${sched[@]}" --runs 20 --csv $OUT/single1.csv > $OUT/single1.txt 2>&1; echo "single1 rc=$?"
pipes=(); for h in 12 16 20 24 26 28 32 40 48; do pipes+=(--pipeline "color:gray | gaussian:5@stream:256x$h | sobel:mag@stream:256x$h"); done
$bench --suite filters --image 8u:3 --size 4096x4096 --size 8192x8192 --filter gaussian:9 --schedule stream:256x16 "${pipes[@]}" --runs 20 --csv $OUT/pipes.csv > $OUT/pipes.txt 2>&1; echo "pipes rc=$?"
python3 - $OUT <<'PY'
import csv, sys
o = sys.argv[1]
for n in ("single", "single1", "pipes"):
    for r in csv.DictReader(open(f"{o}/{n}.csv")):
        print(f'{r["workload"][:60]:60s} {r["variant"]:16s} {r["width"]:>5s} {r["channels"]} {float(r["median_ms"]):.4f} {float(r["x_floor"]):.2f}')
PY
