#!/usr/bin/env python3
"""Turns cbi-bench's CSV (with the NPP, CuPy and CPU rows appended, as
scripts/gpu-run.sh bench-all writes it) into the summary tables and PNG
figures of docs/performance.md.

    python3 apps/bench/plot.py --summary bench.csv          # markdown tables to stdout
    python3 apps/bench/plot.py bench.csv --out DIR [--md summary.md]   # figures too

Figures follow the thesis (seeds/000, chapter 5): Fig. 5.1a/5.2 (9x9 stencil
time per column width and block), 5.1b (1024^2 matrix product), 5.3 and 5.4
(time relative to naive against N), plus cbi vs peers vs the floor and the
CPU comparison. matplotlib is imported only for figures.
"""
import argparse
import csv
import math
import os
import sys
from collections import defaultdict

# The thesis' measurements (RTX 2080 Super), ms, rows: schedule, columns: blocks
# 32 64 128 256 512 1024. Fig. 5.1a (9x9 stencil 4096^2), 5.2 (4037^2), 5.1b (matmul 1024^2).
BLOCKS = [32, 64, 128, 256, 512, 1024]
THESIS = {
    "stencil-4096": """naive 2.02 1.42 1.42 1.46 1.51 1.62
4 7.61 7.55 7.53 7.48 7.47 7.6
8 4.09 3.91 3.88 3.84 3.84 3.84
16 2.17 2.05 2.02 1.99 2 2.1
30 2.27 2.14 2.09 2.05 2.04 2.19
31 2.28 2.13 2.09 2.06 2.05 2.2
32 1.48 1.36 1.32 1.29 1.37 1.62
33 2.23 2.03 2 1.95 1.92 2.08
34 2.14 1.98 1.95 1.9 1.87 2.04
48 1.69 1.68 1.66 1.58 1.55 1.81
64 1.46 1.39 1.38 1.31 1.33 1.59
96 1.47 1.44 1.44 1.36 1.34 1.61
128 1.47 1.47 1.47 1.38 1.34 1.6
256 1.47 1.46 1.47 1.46 1.38 1.6
512 1.49 1.47 1.46 1.45 1.47 1.61
1024 1.49 1.46 1.46 1.45 1.47 1.68
2048 1.49 1.45 1.45 1.44 1.47 1.67""",
    "stencil-4037": """naive 2.04 1.36 1.37 1.41 1.46 1.58
4 4.71 4.45 4.37 4.29 4.27 4.81
8 3.71 3.32 3.26 3.17 3.16 3.26
16 2.45 2.23 2.15 2.09 2.08 2.23
30 2.43 2.24 2.16 2.07 2.04 2.22
31 2.42 2.23 2.14 2.07 2.04 2.22
32 1.46 1.31 1.27 1.25 1.31 1.63
33 2.3 2.16 2.06 2 1.98 2.17
34 2.24 2.09 2.02 1.96 1.91 2.13
48 1.66 1.61 1.6 1.53 1.49 1.8
64 1.46 1.34 1.33 1.28 1.31 1.62
96 1.47 1.38 1.38 1.3 1.32 1.63
128 1.47 1.39 1.4 1.32 1.31 1.61
256 1.45 1.39 1.38 1.39 1.34 1.62
512 1.46 1.38 1.38 1.38 1.41 1.63
1024 1.47 1.38 1.38 1.38 1.41 1.67
2048 1.51 1.38 1.37 1.37 1.41 1.67""",
    "matmul-1024": """naive 2.36 2.31 2.31 2.31 2.34 2.38
4 6.55 6.55 6.55 6.57 6.58 6.58
8 3.67 3.66 3.66 3.66 3.65 3.75
16 2.35 2.34 2.34 2.32 2.29 2.29
30 2.43 2.44 2.44 2.43 2.35 2.37
31 2.51 2.49 2.48 2.53 2.55 2.89
32 1.83 1.85 1.85 1.85 1.74 1.74
33 3 3.01 3 3.07 3.07 3.46
34 2.88 2.89 2.89 2.91 2.8 2.89
48 2.22 2.23 2.22 2.21 2.1 2.09
64 1.81 1.81 1.81 1.81 1.72 1.68
96 2.03 1.97 1.99 1.8 1.75 1.68
128 2.13 2.15 2.3 1.77 1.71 1.66
256 2.26 2.24 2.3 2.31 1.74 1.68
512 2.32 2.28 2.31 2.31 2.34 1.82
1024 2.35 2.3 2.31 2.31 2.32 2.38
2048 2.36 2.31 2.3 2.31 2.32 2.38""",
}


def thesis_table(key):
    t = {}
    for line in THESIS[key].splitlines():
        p = line.split()
        name = "naive" if p[0] == "naive" else "column:" + p[0]
        t[name] = dict(zip(BLOCKS, map(float, p[1:])))
    return t


def read_rows(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in ("block", "width", "height", "channels", "runs"):
            r[k] = int(float(r[k]))
        for k in ("median_ms", "min_ms", "max_ms", "bytes", "flops", "GBps", "GFLOPs", "floor_ms", "x_floor"):
            r[k] = float(r[k])
    return rows


def sel(rows, **kw):
    return [r for r in rows if all(r[k] == v for k, v in kw.items())]


def width_of(schedule):
    return 0 if schedule == "naive" else int(schedule.split(":")[1])


def fmt(ms, floor=None):
    if ms is None:
        return "—"
    s = f"{ms:.3f}"
    return f"{s} ({ms / floor:.1f}×)" if floor else s


# ------------------------------------------------------------------ tables
def peers_table(rows, out):
    """Per filter and image: best cbi schedule, naive, NPP, CuPy, floor."""
    cases = sorted({(r["workload"], r["depth"], r["channels"]) for r in sel(rows, suite="filters")},
                   key=lambda c: (c[1] != "32f" or c[2] != 1, c[1], c[2], c[0]))
    out.append("| filter | image | best cbi (schedule, block) | cbi naive, block 256 | NPP | CuPy | floor |")
    out.append("| --- | --- | --- | --- | --- | --- | --- |")
    for wl, depth, ch in cases:
        mine = sel(rows, suite="filters", workload=wl, depth=depth, channels=ch)
        best = min(mine, key=lambda r: r["median_ms"])
        floor = best["floor_ms"]
        naive = sel(mine, variant="naive", block=256)
        npp = sel(rows, suite="npp", workload=wl, depth=depth, channels=ch)
        cupy = sel(rows, suite="cupy", workload=wl, depth=depth, channels=ch)
        npp_txt = "; ".join(f"{fmt(r['median_ms'], floor)} {r['variant']}" for r in npp) or "—"
        cupy_txt = "; ".join(fmt(r["median_ms"], floor) for r in cupy) or "—"
        out.append(f"| {wl} | {best['width']}² {depth}:{ch} | {fmt(best['median_ms'], floor)} "
                   f"{best['variant']} b{best['block']} | {fmt(naive[0]['median_ms'], floor) if naive else '—'} | "
                   f"{npp_txt} | {cupy_txt} | {floor:.3f} |")


def best_over_blocks(rows, variant):
    r = sel(rows, variant=variant)
    return min(r, key=lambda x: x["median_ms"]) if r else None


def thesis_vs_measured(rows, out):
    out.append("| workload | schedule | thesis best ms (block) | thesis vs naive | measured best ms (block) "
               "| measured vs naive |")
    out.append("| --- | --- | --- | --- | --- | --- |")
    sets = [("stencil-4096", "9×9 box 4096², thesis kernel", sel(rows, suite="thesis-stencil", workload="thesis-box9", width=4096)),
            ("stencil-4096", "9×9 box 4096², cbi blur:9", sel(rows, suite="thesis-stencil", workload="cbi-blur9", width=4096)),
            ("stencil-4037", "9×9 box 4037², thesis kernel", sel(rows, suite="thesis-stencil", workload="thesis-box9", width=4037)),
            ("matmul-1024", "matmul 1024²", sel(rows, suite="thesis-matmul", width=1024))]
    for key, label, mine in sets:
        if not mine:
            continue
        th = thesis_table(key)
        th_naive = min(th["naive"].values())
        me_naive = best_over_blocks(mine, "naive")
        for sched in ["naive", "column:16", "column:31", "column:32", "column:33", "column:64", "column:128",
                      "column:2048"]:
            tb = min(th[sched].items(), key=lambda kv: kv[1])
            m = best_over_blocks(mine, sched)
            if m is None:
                continue
            out.append(f"| {label} | {sched} | {tb[1]:.2f} (b{tb[0]}) | {tb[1] / th_naive:.3f} | "
                       f"{m['median_ms']:.3f} (b{m['block']}) | {m['median_ms'] / me_naive['median_ms']:.3f} |")
        best = min((r for r in mine if r["variant"] != "naive"), key=lambda r: r["median_ms"])
        tbest = min(((s, b, v) for s, d in th.items() if s != "naive" for b, v in d.items()), key=lambda x: x[2])
        out.append(f"| {label} | best column | {tbest[0]}: {tbest[2]:.2f} (b{tbest[1]}) | {tbest[2] / th_naive:.3f} | "
                   f"{best['variant']}: {best['median_ms']:.3f} (b{best['block']}) | "
                   f"{best['median_ms'] / me_naive['median_ms']:.3f} |")


def matmul_table(rows, out):
    ms = sel(rows, suite="matmul-sizes")
    if not ms:
        return
    sizes = sorted({r["width"] for r in ms})
    variants = list(dict.fromkeys(r["variant"] for r in ms))
    out.append("| variant | " + " | ".join(f"{n}²" for n in sizes) + " |")
    out.append("| --- |" + " --- |" * len(sizes))
    for v in variants:
        cells = []
        for n in sizes:
            r = sel(ms, variant=v, width=n)
            cells.append(f"{r[0]['median_ms']:.3f} ms, {r[0]['GFLOPs'] / 1000:.2f} TF" if r else "—")
        out.append(f"| {v} | " + " | ".join(cells) + " |")


def cpu_table(rows, out):
    cp = sel(rows, suite="cpu")
    if not cp:
        return
    out.append("| filter | image | threads | OpenCV ms | cbi CPU ms | cbi / OpenCV |")
    out.append("| --- | --- | --- | --- | --- | --- |")
    for r in sel(cp, variant="opencv"):
        c = sel(cp, variant="cbi-cpu", workload=r["workload"], depth=r["depth"], channels=r["channels"])
        if c:
            out.append(f"| {r['workload']} | {r['width']}² {r['depth']}:{r['channels']} | {r['block']} | "
                       f"{r['median_ms']:.2f} | {c[0]['median_ms']:.2f} | {c[0]['median_ms'] / r['median_ms']:.1f}× |")


def summary(rows):
    out = ["### cbi vs peers (median ms, × floor)", ""]
    peers_table(rows, out)
    out += ["", "### Thesis vs measured", ""]
    thesis_vs_measured(rows, out)
    out += ["", "### Matrix multiplication (median ms, TFLOP/s), block 256 for the remaps", ""]
    matmul_table(rows, out)
    out += ["", "### CPU: OpenCV vs cbi's CPU backend", ""]
    cpu_table(rows, out)
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ figures
def figures(rows, d):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(d, exist_ok=True)
    made = []

    def sweep(ax, mine, title, thesis_key=None):
        scheds = sorted({r["variant"] for r in mine}, key=width_of)
        xs = list(range(len(scheds)))
        for b in BLOCKS:
            ys = [next((r["median_ms"] for r in mine if r["variant"] == s and r["block"] == b), math.nan)
                  for s in scheds]
            ax.plot(xs, ys, marker="o", ms=3, label=f"b{b}")
        if thesis_key:
            th = thesis_table(thesis_key)
            base = min(r["median_ms"] for r in mine if r["variant"] == "naive")
            scale = base / min(th["naive"].values())
            ax.plot(xs, [min(th[s].values()) * scale for s in scheds], "k--", lw=1,
                    label="thesis best (scaled to our naive)")
        ax.set_xticks(xs)
        ax.set_xticklabels([s.replace("column:", "") for s in scheds], rotation=60, fontsize=7)
        ax.set_xlabel("column width (naive = row-major)")
        ax.set_ylabel("median ms (log)")
        ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)

    for n, key, fig_name in [(4096, "stencil-4096", "fig5_1a_stencil_4096.png"),
                             (4037, "stencil-4037", "fig5_2_stencil_4037.png")]:
        a = sel(rows, suite="thesis-stencil", workload="thesis-box9", width=n)
        b = sel(rows, suite="thesis-stencil", workload="cbi-blur9", width=n)
        if a:
            fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
            sweep(ax[0], a, f"thesis 9×9 box kernel, {n}² float", key)
            sweep(ax[1], b, f"cbi blur:9 (replicate), {n}² float")
            fig.tight_layout()
            fig.savefig(os.path.join(d, fig_name), dpi=110)
            plt.close(fig)
            made.append(fig_name)

    mm = sel(rows, suite="thesis-matmul", width=1024)
    if mm:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        sweep(ax, mm, "matrix product 1024² float, one thread per element of C", "matmul-1024")
        fig.tight_layout()
        fig.savefig(os.path.join(d, "fig5_1b_matmul_1024.png"), dpi=110)
        plt.close(fig)
        made.append("fig5_1b_matmul_1024.png")

    def relative(ax, mine, title):
        ax.set_prop_cycle(color=plt.cm.tab10.colors)
        sizes = sorted({r["width"] for r in mine})
        for s in sorted({r["variant"] for r in mine} - {"naive"}, key=width_of):
            ys = []
            for n in sizes:
                base = sel(mine, variant="naive", width=n)
                me = sel(mine, variant=s, width=n)
                ys.append(me[0]["median_ms"] / base[0]["median_ms"] if base and me else math.nan)
            ax.plot(sizes, ys, marker="o", ms=3, label=s)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("N (N×N)")
        ax.set_ylabel("time / naive")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)

    st = sel(rows, suite="thesis-sizes")
    if st:
        fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
        relative(ax[0], sel(st, workload="thesis-box9"), "Fig. 5.3: thesis 9×9 box kernel, block 256")
        relative(ax[1], sel(st, workload="cbi-blur9"), "cbi blur:9, block 256")
        fig.tight_layout()
        fig.savefig(os.path.join(d, "fig5_3_stencil_sizes.png"), dpi=110)
        plt.close(fig)
        made.append("fig5_3_stencil_sizes.png")

    ms = sel(rows, suite="matmul-sizes")
    if ms:
        fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
        relative(ax[0], [r for r in ms if r["variant"] == "naive" or r["variant"].startswith("column")],
                 "Fig. 5.4: matrix product, column:W vs naive, block 256")
        sizes = sorted({r["width"] for r in ms})
        ax[1].set_prop_cycle(color=plt.cm.tab20.colors)
        for v in dict.fromkeys(r["variant"] for r in ms):
            ax[1].plot(sizes, [next((r["GFLOPs"] / 1000 for r in ms if r["variant"] == v and r["width"] == n),
                                    math.nan) for n in sizes], marker="o", ms=3, label=v)
        ax[1].set_xscale("log", base=2)
        ax[1].set_yscale("log")
        ax[1].set_xlabel("N (N×N)")
        ax[1].set_ylabel("TFLOP/s (FP32)")
        ax[1].set_title("all matrix-product kernels and cuBLAS SGEMM", fontsize=9)
        ax[1].grid(alpha=0.3)
        ax[1].legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(os.path.join(d, "fig5_4_matmul_sizes.png"), dpi=110)
        plt.close(fig)
        made.append("fig5_4_matmul_sizes.png")

    f = sel(rows, suite="filters")
    if f:
        cases = sorted({(r["workload"], r["depth"], r["channels"]) for r in f}, key=lambda c: (c[1], c[2], c[0]))
        labels, series = [], defaultdict(list)
        for wl, depth, ch in cases:
            mine = sel(f, workload=wl, depth=depth, channels=ch)
            floor = mine[0]["floor_ms"]
            labels.append(f"{wl}\n{depth}:{ch}")
            naive = sel(mine, variant="naive", block=256)
            series["cbi naive (b256)"].append(naive[0]["median_ms"] / floor if naive else math.nan)
            series["cbi best schedule"].append(min(r["median_ms"] for r in mine) / floor)
            for suite, name in [("npp", "NPP"), ("cupy", "CuPy")]:
                p = [r for r in sel(rows, suite=suite, workload=wl, depth=depth, channels=ch)
                     if r["variant"] != "npp-fixedmask"]
                series[name].append(min(r["median_ms"] for r in p) / floor if p else math.nan)
        fig, ax = plt.subplots(figsize=(max(10, 0.9 * len(labels)), 5))
        width = 0.2
        for i, (name, ys) in enumerate(series.items()):
            ax.bar([x + (i - 1.5) * width for x in range(len(labels))], ys, width, label=name)
        ax.axhline(1.0, color="k", lw=1, label="floor (read + write once at copy bandwidth)")
        ax.set_yscale("log")
        ax.set_ylabel("median time / floor (log)")
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_title(f"cbi vs peers, {f[0]['width']}×{f[0]['height']}, replicate border, same GPU and run", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.tight_layout()
        fig.savefig(os.path.join(d, "peers.png"), dpi=110)
        plt.close(fig)
        made.append("peers.png")

    cp = sel(rows, suite="cpu")
    if cp:
        ocv = sel(cp, variant="opencv")
        labels = [f"{r['workload']}\n{r['depth']}:{r['channels']}" for r in ocv]
        ours = [next((c["median_ms"] for c in sel(cp, variant="cbi-cpu", workload=r["workload"], depth=r["depth"],
                                                   channels=r["channels"])), math.nan) for r in ocv]
        fig, ax = plt.subplots(figsize=(max(9, 0.8 * len(labels)), 4.5))
        ax.bar([x - 0.2 for x in range(len(labels))], [r["median_ms"] for r in ocv], 0.4, label="OpenCV")
        ax.bar([x + 0.2 for x in range(len(labels))], ours, 0.4, label="cbi CPU backend")
        ax.set_yscale("log")
        ax.set_ylabel("median ms (log)")
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_title(f"CPU, {ocv[0]['width']}², {ocv[0]['block']} threads each", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(d, "cpu.png"), dpi=110)
        plt.close(fig)
        made.append("cpu.png")
    return made


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+", help="CSV files in cbi-bench's format (rows are concatenated)")
    ap.add_argument("--summary", action="store_true", help="print the markdown tables only")
    ap.add_argument("--out", default="apps/bench/results", help="folder for the PNG figures")
    ap.add_argument("--md", help="also write the tables to this markdown file")
    a = ap.parse_args()
    rows = [r for p in a.csv for r in read_rows(p)]
    text = summary(rows)
    print(text)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)
    if not a.summary:
        for name in figures(rows, a.out):
            print("wrote", os.path.join(a.out, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
