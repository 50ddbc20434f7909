"""Base against new: python3 compare.py OUT GLOB... prints each (workload,
variant, size, channels) with the medians of every base-*.csv and new-*.csv
that GLOB (relative to OUT) matches, one line each."""
import collections
import csv
import glob
import sys

out, patterns = sys.argv[1], sys.argv[2:]
d = collections.defaultdict(list)
for f in sorted(f for p in patterns for f in glob.glob(f"{out}/{p}")):
    build = f.split("/")[-1].split("-")[0]
    for r in csv.DictReader(open(f)):
        d[(r["workload"], r["variant"], r["width"], r["height"], r["channels"], build)].append(float(r["median_ms"]))
for k in sorted({k[:5] for k in d}):
    cells = [" ".join(f"{m:.4f}" for m in d.get(k + (b,), [])) or "-" for b in ("base", "new")]
    print(f"{k[0][:36]:36s} {k[1]:15s} {k[2]:>5s}x{k[3]:<5s} c{k[4]} | base {cells[0]:16s} | new {cells[1]}")
