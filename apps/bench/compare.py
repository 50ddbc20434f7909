#!/usr/bin/env python3
"""Compares two benchmark results files of the one schema (docs/performance.md#results-files).

    python3 apps/bench/compare.py OLD NEW [--threshold 0.05] [--suite filters] [--match gaussian] [--all] [--fail]

OLD and NEW are cbi-bench's CSV (--csv), a results file under apps/bench/results/ (the same
columns with a leading `run` column), or cbi-bench's JSON (--json). Rows are matched on
suite, workload, variant, block, width, height, depth and channels; where a file holds a
configuration twice, its last row counts (results files list runs oldest first). For each
configuration in both files it prints the median times and NEW / OLD; rows whose ratio is
outside 1 +- threshold are marked (slower: `+`, faster: `-`), and only those are printed
unless --all. The summary gives the geometric mean of the ratios and the configurations
found in one file only. Exit status: 0, or 1 with --fail when a configuration got slower
than the threshold allows; 2 on a usage or file error. Standard library only.
"""
import argparse
import csv
import json
import math
import sys

KEY = ("suite", "workload", "variant", "block", "width", "height", "depth", "channels")


def load(path):
    """Configuration key -> row (a dict of strings), the last row of a key winning."""
    rows = {}
    with open(path, newline="") as fh:
        if path.endswith(".json"):
            records = json.load(fh).get("results", [])
        else:
            records = csv.DictReader(fh)
        for r in records:
            r = {k: str(v) for k, v in r.items()}
            missing = [k for k in KEY + ("median_ms",) if k not in r]
            if missing:
                raise ValueError(f"{path}: no column {', '.join(missing)}")
            rows[tuple(r[k] for k in KEY)] = r
    return rows


def label(key):
    suite, workload, variant, block, width, height, depth, channels = key
    return f"{suite:9} {workload:40} {variant:28} {width}x{height} {depth}:{channels} b{block}"


def main():
    ap = argparse.ArgumentParser(description="Compare two cbi benchmark results files.")
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--threshold", type=float, default=0.05, help="relative change that counts (default 0.05)")
    ap.add_argument("--suite", action="append", help="only these suites (repeatable)")
    ap.add_argument("--match", help="only workloads or variants containing this text")
    ap.add_argument("--all", action="store_true", help="print every matched configuration, not only changes")
    ap.add_argument("--fail", action="store_true", help="exit 1 when a configuration got slower")
    a = ap.parse_args()
    try:
        old, new = load(a.old), load(a.new)
    except (OSError, ValueError, json.JSONDecodeError) as e:
        print(f"compare: error: {e}", file=sys.stderr)
        return 2

    def wanted(key):
        if a.suite and key[0] not in a.suite:
            return False
        return not a.match or a.match in key[1] or a.match in key[2]

    both = [k for k in old if k in new and wanted(k)]
    only_old = [k for k in old if k not in new and wanted(k)]
    only_new = [k for k in new if k not in old and wanted(k)]
    log_sum, counted, slower, faster = 0.0, 0, 0, 0
    print(f"{'configuration':108} {'old ms':>10} {'new ms':>10} {'new/old':>8}")
    for k in sorted(both):
        try:
            t_old, t_new = float(old[k]["median_ms"]), float(new[k]["median_ms"])
        except ValueError:
            continue
        if t_old <= 0 or t_new <= 0:
            continue
        ratio = t_new / t_old
        log_sum += math.log(ratio)
        counted += 1
        mark = " "
        if ratio > 1 + a.threshold:
            mark, slower = "+", slower + 1
        elif ratio < 1 - a.threshold:
            mark, faster = "-", faster + 1
        if a.all or mark != " ":
            print(f"{label(k):108} {t_old:10.4f} {t_new:10.4f} {ratio:8.3f} {mark}")
    geomean = math.exp(log_sum / counted) if counted else float("nan")
    print(f"# {counted} configurations in both: geometric mean new/old {geomean:.3f}; "
          f"{slower} slower and {faster} faster than +-{a.threshold:.0%}; "
          f"{len(only_old)} only in {a.old}, {len(only_new)} only in {a.new}")
    return 1 if a.fail and slower else 0


if __name__ == "__main__":
    sys.exit(main())
