"""Fused against no pairs fused: python3 fused_vs_unfused.py DIR SIZE... prints,
for each pipeline, channels and SIZE in cbi-bench's DIR/sizes*.csv (one file a
round), every round's median ms of the fused, no-pairs and default plans and
fused / no-pairs over all rounds."""
import collections
import csv
import glob
import sys

out, sizes = sys.argv[1], sys.argv[2:]
d = collections.defaultdict(list)
for f in sorted(glob.glob(f"{out}/sizes*.csv")):
    for r in csv.DictReader(open(f)):
        if r["suite"] == "pipeline":
            d[(r["workload"], r["channels"], r["width"] + "x" + r["height"], r["variant"])].append(float(r["median_ms"]))
fmt = lambda v: " ".join(f"{x:.4f}" for x in v)
for w, c in sorted({k[:2] for k in d}):
    for s in sizes:
        f, n, df = d[(w, c, s, "fused")], d[(w, c, s, "no-pairs")], d[(w, c, s, "default")]
        if f and n:
            print(f"{w[:36]:36s} c{c} {s:10s} fused {fmt(f)} | no-pairs {fmt(n)} | default {fmt(df)} | fused/no-pairs {sum(f) / sum(n):.3f}")
