"""Builds side by side: python3 builds_table.py DIR VARIANTS BUILD... prints,
for each (workload, variant, size, channels) of cbi-bench's pipeline suite in
DIR/BUILD-*.csv (and the filters suite's rows of the default table's choice),
every run's median per build and the first run's multiple of
the floor. VARIANTS: the variants shown, comma-separated, or "all"."""
import collections
import csv
import glob
import sys

out, variants, builds = sys.argv[1], sys.argv[2], sys.argv[3:]
d = collections.defaultdict(list)
for f in sorted(glob.glob(out + "/*-*.csv")):
    b = f.split("/")[-1].split("-")[0]
    for r in csv.DictReader(open(f)):
        # filters rows: the default table's choice (variant "default=CHOICE") counts as "default"
        if r["suite"] in ("pipeline", "filters") and (variants == "all" or r["variant"].split("=")[0] in variants.split(",")):
            d[(r["workload"][-36:], r["variant"].split("=")[0], r["width"], r["height"], r["channels"], b)].append((float(r["median_ms"]), float(r["x_floor"])))
print(f'{"workload":36s} {"variant":9s} {"size":11s} ch | ' + " | ".join(f"{b:>22s}" for b in builds))
for k in sorted({k[:5] for k in d}):
    cells = [" ".join(f"{m:.4f}" for m, _ in d.get(k + (b,), [])) + (f" {d[k + (b,)][0][1]:.2f}x" if d.get(k + (b,)) else "") for b in builds]
    print(f"{k[0]:36s} {k[1]:9s} {k[2]:>5s}x{k[3]:<5s} c{k[4]} | " + " | ".join(f"{c:>22s}" for c in cells))
