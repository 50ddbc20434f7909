#!/usr/bin/env bash
# Two builds' kernels on the same GPU in one call: cbi-bench of BEFORE and of
# AFTER, alternating (B A B A) so that clock and temperature drift fall on
# both, over the fast schedules and the default table; prints per
# configuration the median of each build's two medians and AFTER / BEFORE.
#   apps/bench/before_after.sh BEFORE/cbi-bench AFTER/cbi-bench   (on the GPU host)
# LD_LIBRARY_PATH must reach both binaries' libraries (an unpacked bundle's
# lib/, as run.sh makes). CSVs land in $OUT (or /tmp/cbi-before-after).
set -uo pipefail
before=$1 after=$2
out=${OUT:-/tmp/cbi-before-after}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
args=(--suite filters --border replicate --image 32f:1 --image 8u:3 --image 32f:3 --size 4096x4096
      --filter blur:9 --filter gaussian:9 --filter sobel:mag:3 --filter color:sepia --filter blur:31)
for s in default sep:128x32 sep:64x32 sep:32x32 stream:256x16 stream:128x16 vec:8 vec:4; do args+=(--schedule "$s"); done
status=0
for round in 1 2; do
  for build in before after; do
    bin=$before; [ $build = after ] && bin=$after
    "$bin" "${args[@]}" --csv "$out/$build-$round.csv" > "$out/$build-$round.txt" 2>&1 || status=1
    echo "$build round $round: $(grep -c . "$out/$build-$round.csv") rows"
  done
done
python3 - "$out" <<'PY'
import csv, statistics, sys
out = sys.argv[1]
def load(name):
    rows = {}
    for r in csv.DictReader(open(f"{out}/{name}.csv")):
        if r["suite"] != "filters": continue
        key = (r["workload"], r["depth"] + ":" + r["channels"], r["variant"].split("=")[0])
        rows[key] = float(r["median_ms"])
    return rows
runs = {b: [load(f"{b}-{i}") for i in (1, 2)] for b in ("before", "after")}
keys = sorted(set(runs["before"][0]) & set(runs["after"][0]))
ratios = []
print(f"{'workload':14} {'image':6} {'schedule':14} {'before ms':>10} {'after ms':>10} {'after/before':>12}")
for k in keys:
    b = statistics.median(r[k] for r in runs["before"] if k in r)
    a = statistics.median(r[k] for r in runs["after"] if k in r)
    # Run-to-run noise: the spread of each build's own two rounds.
    noise = max(abs(runs[x][0][k] - runs[x][1][k]) / min(runs[x][0][k], runs[x][1][k]) for x in runs if k in runs[x][1])
    ratios.append(a / b)
    print(f"{k[0]:14} {k[1]:6} {k[2]:14} {b:10.4f} {a:10.4f} {a / b:12.3f}   (own rounds differ {noise * 100:.1f} %)")
print(f"{len(ratios)} configurations: after/before median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}")
PY
exit $status
