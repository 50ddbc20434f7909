"""Pipeline rows of cbi-bench CSVs: python3 rows.py CSV... prints, per file,
each pipeline row's plan, size, median ms and multiple of the floor."""
import csv
import sys

for f in sys.argv[1:]:
    for r in csv.DictReader(open(f)):
        if r["suite"] == "pipeline":
            print(f"{f.split('/')[-1]:24s} {r['workload'][-60:]:60s} {r['variant']:9s} {r['width']:>5s}x{r['height']:<5s} "
                  f"{float(r['median_ms']):.4f} ({float(r['x_floor']):.2f}x)")
