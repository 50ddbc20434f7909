"""Strip shapes side by side: python3 shapes_table.py CSV prints, for each size in
cbi-bench's CSV, the fused plan's median ms (x floor) of each pipeline whose
stencils name stream:WxH (as WxH), and of the one without ("default")."""
import collections
import csv
import re
import sys

d = collections.defaultdict(dict)
for r in csv.DictReader(open(sys.argv[1])):
    if r["suite"] != "pipeline" or r["variant"] != "fused":
        continue
    m = re.search(r"stream:(\d+)x(\d+)", r["workload"])
    d[r["width"] + "x" + r["height"]][m.group(1) + "x" + m.group(2) if m else "default"] = (float(r["median_ms"]), float(r["x_floor"]))
for size, v in d.items():
    print(f"{size:>10s} " + "  ".join(f"{k} {ms:.4f} ({x:.2f}x)" for k, (ms, x) in sorted(v.items())))
