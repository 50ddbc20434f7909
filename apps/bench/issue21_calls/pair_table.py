"""Two builds' default plans side by side: python3 pair_table.py DIR BASE NEW
reads DIR/BUILD-ROUND-CHANNELS.csv (cbi-bench) and prints, per pipeline,
channels and size, each round's median ms (x the floor) and NEW/BASE."""
import csv
import glob
import sys

d = {}
for f in glob.glob(sys.argv[1] + "/*.csv"):
    b, r, c = f.split("/")[-1][:-4].rsplit("-", 2)
    for x in csv.DictReader(open(f)):
        if x["suite"] == "pipeline" and x["variant"] == "default":
            key = (x["workload"], c, int(x["width"]) * int(x["height"]), x["width"] + "x" + x["height"])
            d.setdefault(key, {}).setdefault(b, []).append((float(x["median_ms"]), float(x["x_floor"])))
base, new = sys.argv[2], sys.argv[3]
for k in sorted(d):
    v = d[k]
    line = f"{k[0]:36s} c{k[1]} {k[3]:>9s}"
    for b in (base, new):
        line += f"  {b} " + " ".join(f"{m:.4f} ({x:.2f}x)" for m, x in v.get(b, []))
    if base in v and new in v:
        line += f"  {new}/{base} {sum(m for m, _ in v[new]) / sum(m for m, _ in v[base]):.3f}"
    print(line)
