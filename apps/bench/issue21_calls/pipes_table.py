"""The issue's pipelines: python3 pipes_table.py DIR NAME... prints, for each
pipeline and size in cbi-bench's DIR/NAME.csv files, the median ms and
multiple of the floor of the default, fused, no-pairs and unfused plans."""
import csv
import sys

d = {}
for n in sys.argv[2:]:
    for r in csv.DictReader(open(f"{sys.argv[1]}/{n}.csv")):
        if r["suite"] == "pipeline":
            d[(r["workload"], int(r["width"]), int(r["height"]), r["variant"])] = (float(r["median_ms"]), float(r["x_floor"]))
for k in sorted({k[:3] for k in d}, key=lambda k: (k[0], k[1] * k[2])):
    print(f"{k[0][-36:]:36s} {k[1]:>5d}x{k[2]:<5d} " + "  ".join(f"{v} {d[k + (v,)][0]:.4f} ({d[k + (v,)][1]:.2f}x)" for v in ("default", "fused", "no-pairs", "unfused")))
