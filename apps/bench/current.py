#!/usr/bin/env python3
"""The current table and figure of docs/performance.md from one run of
apps/bench/current.sh (cbi-bench's CSV at 4096^2 and 8192^2, the NPP and
CuPy peers on the 4096^2 inputs):

    python3 apps/bench/current.py DIR --out apps/bench/results --tag 2026-11-24-h100

DIR holds bench-4096.csv, bench-8192.csv, npp.csv and cupy.csv. Prints
the markdown tables; writes TAG-current.png (matplotlib) to --out.
"""
import argparse
import csv
import os
from collections import defaultdict

FILTERS = ["blur:9", "gaussian:9", "sobel:mag:3", "blur:31", "color:sepia"]
IMAGES = ["32f:1", "8u:3", "32f:3"]


def read(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def cells(rows):
    """(filter, image) -> {variant: (ms, floor_ms)} for the filters suite."""
    out = defaultdict(dict)
    for r in rows:
        if r["suite"] not in ("filters", "npp", "cupy"):
            continue
        key = (r["workload"], f'{r["depth"]}:{r["channels"]}')
        ms = float(r["median_ms"])
        prev = out[key].get(r["variant"])
        if prev is None or ms < prev[0]:
            out[key][r["variant"]] = (ms, float(r["floor_ms"]))
    return out


def pick(v, prefix):
    for name, val in v.items():
        if name.startswith(prefix + "="):
            return name.split("=", 1)[1], val
    return None, None


def best_fixed(v):
    fixed = {n: t for n, t in v.items() if "=" not in n and n not in ("npp", "cupy") and not n.startswith("npp")}
    if not fixed:
        return None, None
    name = min(fixed, key=lambda n: fixed[n][0])
    return name, fixed[name]


def peer(v, name):
    got = [(n, t) for n, t in v.items() if n == name or n.startswith(name + "-")]
    return min(got, key=lambda x: x[1][0]) if got else (None, None)


def table(c4, c8):
    lines = ["| filter | image | size | default (its choice) | auto (its choice) | best fixed | default ÷ best | NPP | CuPy |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    worst = 1.0
    for f in FILTERS:
        for im in IMAGES:
            for size, c in (("4096²", c4), ("8192²", c8)):
                v = c.get((f, im))
                if not v:
                    continue
                dn, d = pick(v, "default")
                an, a = pick(v, "auto")
                bn, b = best_fixed(v)
                if not d or not b:
                    continue
                floor = d[1]
                ratio = d[0] / min(b[0], d[0])
                worst = max(worst, ratio)
                npp_n, npp_t = peer(v, "npp")
                cupy_n, cupy_t = peer(v, "cupy")
                x = lambda t: f"{t[0]:.3f} ({t[0] / floor:.2f}×)"
                lines.append(f"| `{f}` | {im} | {size} | {x(d)} `{dn}` | {x(a) + ' `' + an + '`' if a else '—'} | "
                             f"{x(b)} `{bn}` | {ratio:.3f} | {x(npp_t) + (' ' + npp_n if npp_n != 'npp' else '') if npp_t else '—'} | "
                             f"{x(cupy_t) if cupy_t else '—'} |")
    return "\n".join(lines), worst


def pipelines(rows):
    lines = ["| pipeline | size | fused ms | unfused ms |", "| --- | --- | --- | --- |"]
    for r in rows:
        if r["suite"] == "pipeline" and r["variant"] in ("fused", "unfused") and r["depth"] == "8u":
            lines.append(f'| `{r["workload"]}` | {r["width"]}² | {float(r["median_ms"]):.3f} |' if r["variant"] == "fused"
                         else f'| `{r["workload"]}` | {r["width"]}² | | {float(r["median_ms"]):.3f} |')
    return "\n".join(lines)


def figure(c4, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels, series = [], defaultdict(list)
    for f in FILTERS:
        for im in IMAGES:
            v = c4.get((f, im))
            if not v or not pick(v, "default")[1]:
                continue
            labels.append(f"{f}\n{im}")
            floor = pick(v, "default")[1][1]
            for name, val in (("default", pick(v, "default")[1]), ("auto", pick(v, "auto")[1]),
                              ("best fixed", best_fixed(v)[1]), ("NPP", peer(v, "npp")[1]), ("CuPy", peer(v, "cupy")[1])):
                series[name].append(val[0] / floor if val else float("nan"))
    fig, ax = plt.subplots(figsize=(14, 5))
    n = len(series)
    w = 0.8 / n
    for i, (name, ys) in enumerate(series.items()):
        ax.bar([j + i * w for j in range(len(labels))], ys, w, label=name)
    ax.axhline(1.0, color="k", lw=0.8, ls="--", label="floor (DRAM copy of in + out)")
    ax.set_xticks([j + 0.4 - w / 2 for j in range(len(labels))])
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("time ÷ floor (lower is better)")
    ax.set_yscale("log")
    ax.set_title("4096², replicate border, H100: cbi with no schedule (default) against auto, the best fixed schedule, NPP and CuPy")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--out")
    p.add_argument("--tag", default="current")
    a = p.parse_args()
    r4 = read(os.path.join(a.dir, "bench-4096.csv"))
    r8 = read(os.path.join(a.dir, "bench-8192.csv"))
    peers = read(os.path.join(a.dir, "npp.csv")) + read(os.path.join(a.dir, "cupy.csv"))
    c4, c8 = cells(r4 + peers), cells(r8)
    text, worst = table(c4, c8)
    print(text)
    print(f"\nlargest default ÷ best fixed: {worst:.3f}\n")
    print(pipelines(r4 + r8))
    if a.out:
        figure(c4, os.path.join(a.out, f"{a.tag}-current.png"))


if __name__ == "__main__":
    main()
