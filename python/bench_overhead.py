#!/usr/bin/env python3
"""The cost of calling cbi from Python (a benchmark, not a test).

CPU: one call on a 512x512 8u:3 NumPy image (out= preallocated) against cv2
doing the same filter on the same threads (target: cbi <= 1.2x cv2).
GPU (where torch and a CUDA build are present): cbi.gaussian on a 4096x4096
8u:3 torch CUDA tensor: the host time to issue a call against the GPU time
of a call (CUDA events), so the Python layer's cost shows next to the
kernels'.

    PYTHONPATH=build/python python3 python/bench_overhead.py [--threads N] [--repeat R]

--threads N pins the process to N cores before cbi (TBB) or cv2 start, so
both use the same N threads.
"""
import argparse
import os
import statistics
import sys
import time

# python/ holds the package's sources without the built extension: import
# cbi from PYTHONPATH (build/python) or the installed package instead.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]


def median_time(fn, repeat, inner):
    for _ in range(3):
        fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def paired(a, b, repeat, inner):
    """Medians of a and b timed in alternation, so that load on the machine
    drifts over both alike."""
    for _ in range(3):
        a(), b()
    sa, sb = [], []
    for _ in range(repeat):
        for fn, samples in ((a, sa), (b, sb)):
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(sa), statistics.median(sb)


def cpu(repeat):
    import cv2
    import numpy as np
    import cbi
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (512, 512, 3), dtype=np.uint8)
    out = np.empty_like(x)
    dst = np.empty_like(x)
    r101 = cv2.BORDER_REFLECT_101
    cases = [
        ("gaussian:5", lambda: cbi.gaussian(x, 5, out=out), lambda: cv2.GaussianBlur(x, (5, 5), 0, dst=dst, borderType=r101)),
        ("blur:9", lambda: cbi.blur(x, 9, out=out), lambda: cv2.blur(x, (9, 9), dst=dst, borderType=r101)),
        ("gaussian:9:2", lambda: cbi.gaussian(x, 9, sigma=2.0, out=out),
         lambda: cv2.GaussianBlur(x, (9, 9), 2.0, dst=dst, sigmaY=2.0, borderType=r101)),
        ("color:gray", lambda: cbi.color(x, "gray"), lambda: cv2.cvtColor(x, cv2.COLOR_BGR2GRAY)),
    ]
    p = cbi.Pipeline("gaussian:5")
    cases.append(("Pipeline gaussian:5", lambda: p(x, out=out), lambda: cv2.GaussianBlur(x, (5, 5), 0, dst=dst,
                                                                                            borderType=r101)))
    print(f"CPU: 512x512 8u:3, {len(os.sched_getaffinity(0))} cores, cv2 threads {cv2.getNumThreads()}, "
          f"median of {repeat}")
    print(f"  {'filter':22s} {'cbi us':>9s} {'cv2 us':>9s} {'cbi/cv2':>8s}")
    for name, a, b in cases:
        ta, tb = paired(a, b, repeat, 10)
        print(f"  {name:22s} {ta * 1e6:9.1f} {tb * 1e6:9.1f} {ta / tb:8.2f}")
    tiny = np.zeros((8, 8, 3), np.uint8)
    tiny_out = np.empty_like(tiny)
    t = median_time(lambda: cbi.blur(tiny, 3, out=tiny_out), repeat, 200)
    print(f"  fixed cost of a call (8x8 blur:3, out=): {t * 1e6:.1f} us")


def gpu(repeat):
    try:
        import torch
    except ImportError:
        print("GPU: skipped (no torch)")
        return
    import cbi
    if not (cbi.built_with_cuda() and torch.cuda.is_available()):
        print("GPU: skipped (no CUDA build of cbi or no GPU)")
        return
    x = torch.randint(0, 256, (4096, 4096, 3), dtype=torch.uint8, device="cuda")
    out = torch.empty_like(x)
    for _ in range(5):
        cbi.gaussian(x, 9, out=out)
    torch.cuda.synchronize()
    host, gpu_ms = [], []
    n = 20
    for _ in range(repeat):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        t0 = time.perf_counter()
        for _ in range(n):
            cbi.gaussian(x, 9, out=out)
        host.append((time.perf_counter() - t0) / n)
        stop.record()
        stop.synchronize()
        gpu_ms.append(start.elapsed_time(stop) / n)
    p = cbi.Pipeline("gaussian:9")
    print(f"GPU: {torch.cuda.get_device_name()}, 4096x4096 8u:3 cbi.gaussian(x, 9, out=), median of {repeat}x{n}")
    print(f"  host time to issue a call {statistics.median(host) * 1e6:.1f} us; GPU time per call "
          f"{statistics.median(gpu_ms) * 1e3:.1f} us (back to back on torch's stream)")
    print(p.plan((4096, 4096, 3), "uint8", "cuda"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=0, help="pin to this many cores (default: all)")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--gpu-only", action="store_true")
    ap.add_argument("--cpu-only", action="store_true")
    a = ap.parse_args()
    if a.threads:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: a.threads])
    if not a.gpu_only:
        cpu(a.repeat)
    if not a.cpu_only:
        gpu(a.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
