#!/usr/bin/env bash
# Call 8: where the fused gray pipelines start winning with one halo lane (new build only, two rounds).
set -uo pipefail
cd "$(dirname "$0")/../../.."  # the repository root
. apps/bench/issue21_calls/common.sh
SECONDS=0
sizes=(--size 2048x1536 --size 3000x2000 --size 4000x3000 --size 4096x4096 --size 5472x3648)
pipes=(--pipeline "color:gray | gaussian:5 | sobel:mag" --pipeline "color:gray | blur:3 | sobel:mag" --pipeline "color:gray | gaussian:5 | gaussian:5" --pipeline "color:gray | gaussian:3 | sobel:mag")
for round in 1 2; do
  $u/bin/cbi-bench --suite filters --image 8u:3 "${sizes[@]}" --filter gaussian:5 --schedule stream:256x16 "${pipes[@]}" --csv $OUT/sizes$round.csv > /tmp/s$round.txt 2>&1
  echo "sizes $round rc=$? ${SECONDS}s"
done
grep -hE "DIFFERS|error|FAIL" /tmp/s?.txt | head
python3 - $OUT <<'PY'
import csv, sys, collections
o = sys.argv[1]
d = collections.defaultdict(list)
for n in (1, 2):
    for r in csv.DictReader(open(f"{o}/sizes{n}.csv")):
        if r["suite"] == "pipeline": d[(r["workload"], r["width"] + "x" + r["height"], r["variant"])].append(float(r["median_ms"]))
for w in sorted({k[0] for k in d}):
    for s in ("2048x1536", "3000x2000", "4000x3000", "4096x4096", "5472x3648"):
        f, n = d[(w, s, "fused")], d[(w, s, "no-pairs")]
        print(f"{w[:36]:36s} {s:10s} fused {' '.join(f'{x:.4f}' for x in f)} | no-pairs {' '.join(f'{x:.4f}' for x in n)} | ratio {sum(f)/sum(n):.3f}")
PY
