#!/usr/bin/env python3
"""The cost of calling cbi from Python (a benchmark, not a test).

CPU: one call on a 512x512 8u:3 NumPy image (out= preallocated) against cv2
doing the same filter on the same threads (target: cbi <= 1.2x cv2), and the
fixed cost of a call (an 8x8 image, where the kernel costs next to nothing).
--kinds: every filter kind with a cv2 equivalent, on 512x512 8u:3 and 8u:1.
GPU (where torch and a CUDA build are present): cbi.gaussian on a 4096x4096
8u:3 torch CUDA tensor: the host time to issue a call against the GPU time
of a call (CUDA events), so the Python layer's cost shows next to the
kernels'.
--gpu-pipeline [TEXT]: only a pipeline (default "color:gray | gaussian:5 |
sobel:mag") on a torch CUDA 4096x4096 8u:3 tensor, many calls back to back
on torch's stream with no synchronisation between them, CUDA events around
each batch: GPU time per call, to compare with the same pipeline in C++
(cbi-bench --suite filters --pipeline TEXT, its "default" row).

    PYTHONPATH=build/python python3 python/bench_overhead.py [--threads N] [--repeat R] [--kinds]
    PYTHONPATH=build/python python3 python/bench_overhead.py --gpu-pipeline ["color:gray | gaussian:5 | sobel:mag"]

--threads N pins the process to N cores before cbi (TBB) or cv2 start, and
sets cbi's and cv2's thread counts to N (cbi.set_num_threads,
cv2.setNumThreads), so both use the same N threads. torch is
imported only by the GPU modes.
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
    fixed_cost(repeat)


def fixed_cost(repeat):
    """Calls on an 8x8 image, where the kernel costs next to nothing: what
    every call pays in Python and the binding."""
    import numpy as np
    import cbi
    tiny = np.zeros((8, 8, 3), np.uint8)
    tiny_out = np.empty_like(tiny)
    p = cbi.Pipeline("blur:3")
    cases = [
        ("cbi.blur(x, 3, out=)", lambda: cbi.blur(tiny, 3, out=tiny_out)),
        ("cbi.blur(x, 3)", lambda: cbi.blur(tiny, 3)),
        ("cbi.gaussian(x, 5, sigma=1.2, out=)", lambda: cbi.gaussian(tiny, 5, sigma=1.2, out=tiny_out)),
        ("Pipeline('blur:3')(x, out=)", lambda: p(tiny, out=tiny_out)),
    ]
    print(f"  fixed cost of a call (8x8 8u:3), median of {repeat} x 500 calls:")
    for name, fn in cases:
        print(f"    {name:36s} {median_time(fn, repeat, 500) * 1e6:6.2f} us")


def kind_cases(x, cv2, np, cbi):
    """(name, cbi call, cv2 call) for every kind with a cv2 equivalent on x
    (8u, 1 or 3 channels); outputs preallocated on both sides where the
    shape allows."""
    r101 = cv2.BORDER_REFLECT_101
    c = 1 if x.ndim == 2 else x.shape[2]
    out, dst = np.empty_like(x), np.empty_like(x)
    gray_out, gray_dst = np.empty(x.shape[:2], x.dtype), np.empty(x.shape[:2], x.dtype)
    f32 = [np.empty(x.shape, np.float32) for _ in range(3)]
    s16 = np.empty(x.shape, np.int16)
    ones = {k: np.ones((k, k), np.uint8) for k in (3, 5, 9)}
    lut = np.array([min(255, round(255 * (i / 255) ** (1 / 2.2))) for i in range(256)], np.uint8)
    sepia = np.array([[0.131, 0.534, 0.272], [0.168, 0.686, 0.349], [0.189, 0.769, 0.393]], np.float32)
    sharpen = np.array([[0, -1, 0], [-1, 5, -1], [0, -1, 0]], np.float32)
    kx = np.array([1, 2, 1], np.float32)
    ky = np.array([-1, 0, 1], np.float32)

    def sobel_x():
        cv2.Sobel(x, cv2.CV_16S, 1, 0, dst=s16, ksize=3, borderType=r101)
        return cv2.convertScaleAbs(s16, dst=dst)

    def gradient_mag(op):
        def run():
            op(x, cv2.CV_32F, 1, 0, dst=f32[0], borderType=r101)
            op(x, cv2.CV_32F, 0, 1, dst=f32[1], borderType=r101)
            cv2.magnitude(f32[0], f32[1], magnitude=f32[2])
            return cv2.convertScaleAbs(f32[2], dst=dst)
        return run

    def laplacian():
        cv2.Laplacian(x, cv2.CV_16S, dst=s16, ksize=3, borderType=r101)
        return cv2.convertScaleAbs(s16, dst=dst)

    def morph(op, k):
        return lambda: cv2.morphologyEx(x, op, ones[k], dst=dst)

    cases = [
        ("blur:3", lambda: cbi.blur(x, 3, out=out), lambda: cv2.blur(x, (3, 3), dst=dst, borderType=r101)),
        ("blur:9", lambda: cbi.blur(x, 9, out=out), lambda: cv2.blur(x, (9, 9), dst=dst, borderType=r101)),
        ("gaussian:5", lambda: cbi.gaussian(x, 5, out=out),
         lambda: cv2.GaussianBlur(x, (5, 5), 0, dst=dst, borderType=r101)),
        ("gaussian:9:2", lambda: cbi.gaussian(x, 9, 2.0, out=out),
         lambda: cv2.GaussianBlur(x, (9, 9), 2.0, dst=dst, sigmaY=2.0, borderType=r101)),
        ("sobel:x:3", lambda: cbi.sobel(x, "x", 3, out=out), sobel_x),
        ("sobel:mag:3", lambda: cbi.sobel(x, "mag", 3, out=out), gradient_mag(lambda *a, **k: cv2.Sobel(*a, ksize=3, **k))),
        ("scharr:mag", lambda: cbi.scharr(x, "mag", out=out), gradient_mag(cv2.Scharr)),
        ("laplacian:3", lambda: cbi.laplacian(x, 3, out=out), laplacian),
        ("median:5", lambda: cbi.median(x, 5, out=out), lambda: cv2.medianBlur(x, 5, dst=dst)),
        ("erode:3", lambda: cbi.erode(x, 3, out=out), lambda: cv2.erode(x, ones[3], dst=dst)),
        ("dilate:5", lambda: cbi.dilate(x, 5, out=out), lambda: cv2.dilate(x, ones[5], dst=dst)),
        ("open:3", lambda: cbi.open(x, 3, out=out), morph(cv2.MORPH_OPEN, 3)),
        ("close:3", lambda: cbi.close(x, 3, out=out), morph(cv2.MORPH_CLOSE, 3)),
        ("gradient:3", lambda: cbi.gradient(x, 3, out=out), morph(cv2.MORPH_GRADIENT, 3)),
        ("tophat:9", lambda: cbi.tophat(x, 9, out=out), morph(cv2.MORPH_TOPHAT, 9)),
        ("blackhat:9", lambda: cbi.blackhat(x, 9, out=out), morph(cv2.MORPH_BLACKHAT, 9)),
        ("bilateral:9:75:75", lambda: cbi.bilateral(x, 9, 75, 75, out=out),
         lambda: cv2.bilateralFilter(x, 9, 75, 75, dst=dst, borderType=r101)),
        ("filter2d:sharpen", lambda: cbi.filter2d(x, "0,-1,0;-1,5,-1;0,-1,0", out=out),
         lambda: cv2.filter2D(x, -1, sharpen, dst=dst, borderType=r101)),
        ("sepfilter2d:121;-101", lambda: cbi.sepfilter2d(x, "1,2,1;-1,0,1", out=out),
         lambda: cv2.sepFilter2D(x, -1, kx, ky, dst=dst, borderType=r101)),
        ("threshold:127", lambda: cbi.threshold(x, 127, out=out),
         lambda: cv2.threshold(x, 127, 255, cv2.THRESH_BINARY, dst=dst)),
        ("gamma:2.2", lambda: cbi.gamma(x, 2.2, out=out), lambda: cv2.LUT(x, lut, dst=dst)),
        ("scale:1.5:10", lambda: cbi.scale(x, 1.5, 10, out=out),
         lambda: cv2.convertScaleAbs(x, dst=dst, alpha=1.5, beta=10)),
    ]
    if c == 1:
        cases.append(("adaptive:255:mean:11:2", lambda: cbi.adaptive(x, 255, "mean", 11, 2, out=out),
                      lambda: cv2.adaptiveThreshold(x, 255, cv2.ADAPTIVE_THRESH_MEAN_C, cv2.THRESH_BINARY, 11, 2,
                                                    dst=dst)))
    if c == 3:
        cases += [
            ("color:gray", lambda: cbi.color(x, "gray", out=gray_out),
             lambda: cv2.cvtColor(x, cv2.COLOR_BGR2GRAY, dst=gray_dst)),
            ("color:ycrcb", lambda: cbi.color(x, "ycrcb", out=out),
             lambda: cv2.cvtColor(x, cv2.COLOR_BGR2YCrCb, dst=dst)),
            ("color:sepia", lambda: cbi.color(x, "sepia", out=out), lambda: cv2.transform(x, sepia, dst=dst)),
            ("hsv", lambda: cbi.hsv(x, out=out), lambda: cv2.cvtColor(x, cv2.COLOR_BGR2HSV, dst=dst)),
            ("hls", lambda: cbi.hls(x, out=out), lambda: cv2.cvtColor(x, cv2.COLOR_BGR2HLS, dst=dst)),
        ]
    have = {k["name"] for k in cbi.filter_kinds()}
    return [case for case in cases if case[0].split(":")[0] in have]


def kinds(repeat, inner):
    """Every kind against cv2 on 512x512 8u:3 and 8u:1, timed in alternation."""
    import cv2
    import numpy as np
    import cbi
    rng = np.random.default_rng(0)
    print(f"Kinds: 512x512, {len(os.sched_getaffinity(0))} cores, cv2 threads {cv2.getNumThreads()}, "
          f"median of {repeat} x {inner} calls; * over 1.2x")
    for channels in (3, 1):
        shape = (512, 512, channels) if channels > 1 else (512, 512)
        x = rng.integers(0, 256, shape, dtype=np.uint8)
        print(f"  8u:{channels}  {'filter':24s} {'cbi us':>9s} {'cv2 us':>9s} {'cbi/cv2':>8s}")
        for name, a, b in kind_cases(x, cv2, np, cbi):
            ta, tb = paired(a, b, repeat, inner)
            flag = " *" if ta > 1.2 * tb else ""
            print(f"        {name:24s} {ta * 1e6:9.1f} {tb * 1e6:9.1f} {ta / tb:8.2f}{flag}", flush=True)


def gpu_times(torch, fn, repeat, n):
    """Medians over `repeat` batches of n calls of fn, on torch's current
    stream with no synchronisation between calls, in microseconds per call:
    (host time to issue, GPU time when the calls run as issued, GPU time
    when all n were queued before the GPU reached them). For the last, a
    sleep kernel ahead of the start event holds the GPU while the host
    issues, so the events time the calls' own work back to back: the
    kernel time alone, with what each call enqueues besides its kernels."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()

    def batch(sleep_cycles):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        if sleep_cycles:
            torch.cuda._sleep(sleep_cycles)
        start.record()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        host = (time.perf_counter() - t0) / n
        stop.record()
        stop.synchronize()
        return host * 1e6, start.elapsed_time(stop) * 1e3 / n

    free = [batch(0) for _ in range(repeat)]
    host = statistics.median(h for h, _ in free)
    queued = []
    if hasattr(torch.cuda, "_sleep"):
        # Cycles for twice the host's time to issue the batch, at up to 2.5 GHz.
        cycles = int(2 * n * host * 1e-6 * 2.5e9) + 1_000_000
        queued = [g for _, g in (batch(cycles) for _ in range(repeat))]
    return host, statistics.median(g for _, g in free), statistics.median(queued) if queued else float("nan")


def print_gpu_times(host, free, queued):
    print(f"  host time to issue a call {host:.1f} us; GPU time per call {free:.1f} us as issued, "
          f"{queued:.1f} us queued ahead (the kernels alone)")
    if queued == queued:  # not NaN
        limit = 1.1 * queued + 30
        print(f"  target (kernels alone + 10 % + 30 us = {limit:.1f} us per call): "
              f"{'met' if max(host, free) <= limit else 'NOT met'} (host {host:.1f}, as issued {free:.1f})")


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
    n = 20
    host, free, queued = gpu_times(torch, lambda: cbi.gaussian(x, 9, out=out), repeat, n)
    print(f"GPU: {torch.cuda.get_device_name()}, 4096x4096 8u:3 cbi.gaussian(x, 9, out=), median of {repeat}x{n}")
    print_gpu_times(host, free, queued)
    tiny = torch.zeros((8, 8, 3), dtype=torch.uint8, device="cuda")
    tiny_out = torch.empty_like(tiny)
    host, free, queued = gpu_times(torch, lambda: cbi.gaussian(tiny, 9, out=tiny_out), repeat, 200)
    print(f"  fixed cost of a call (8x8 8u:3 torch CUDA, out=): host {host:.1f} us to issue; GPU {queued:.1f} us "
          f"per call queued ahead")
    print(cbi.Pipeline("gaussian:9").plan((4096, 4096, 3), "uint8", "cuda"))


def gpu_pipeline(repeat, text, size):
    """A pipeline on a torch CUDA size x size 8u:3 tensor: calls back to
    back on torch's current stream, no synchronisation between them, CUDA
    events around each batch (gpu_times)."""
    try:
        import torch
    except ImportError:
        print("GPU pipeline: skipped (no torch)")
        return
    import cbi
    if not (cbi.built_with_cuda() and torch.cuda.is_available()):
        print("GPU pipeline: skipped (no CUDA build of cbi or no GPU)")
        return
    p = cbi.Pipeline(text)
    x = torch.randint(0, 256, (size, size, 3), dtype=torch.uint8, device="cuda")
    out = p(x)  # allocated once by torch; then out= on every call
    outs = out if isinstance(out, tuple) else (out,)
    n = 50
    host, free, queued = gpu_times(torch, lambda: p(x, out=out), repeat, n)
    shapes = ", ".join("x".join(map(str, o.shape)) for o in outs)
    print(f"GPU pipeline: {torch.cuda.get_device_name()}, {text!r} on a torch CUDA {size}x{size} 8u:3 tensor "
          f"(out {shapes}), median of {repeat} x {n} calls back to back, no sync between calls")
    print_gpu_times(host, free, queued)
    print(p.plan((size, size, 3), "uint8", "cuda"))
    print(f"  compare: cbi-bench --suite filters --size {size}x{size} --image 8u:3 --filter gaussian:9 "
          f"--pipeline '{text}' (its 'pipeline' row 'default'; cbi-bench flushes the L2 before each run)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=0, help="pin to this many cores (default: all)")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--gpu-only", action="store_true")
    ap.add_argument("--cpu-only", action="store_true")
    ap.add_argument("--kinds", action="store_true", help="only every kind against cv2 (CPU, 8u:3 and 8u:1)")
    ap.add_argument("--fixed", action="store_true", help="only the fixed cost of a call (CPU, 8x8)")
    ap.add_argument("--inner", type=int, default=10, help="--kinds: calls per timed sample")
    ap.add_argument("--gpu-pipeline", nargs="?", const="color:gray | gaussian:5 | sobel:mag", default=None,
                    metavar="TEXT", help="only a pipeline on a torch CUDA tensor (default: %(const)s)")
    ap.add_argument("--size", type=int, default=4096, help="--gpu-pipeline: image side")
    a = ap.parse_args()
    if a.threads:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: a.threads])
        import cbi
        if hasattr(cbi, "set_num_threads"):  # a module before it had only the affinity
            cbi.set_num_threads(a.threads)
        if not a.gpu_only and a.gpu_pipeline is None:
            import cv2
            cv2.setNumThreads(a.threads)
    if a.gpu_pipeline is not None:
        gpu_pipeline(a.repeat, a.gpu_pipeline, a.size)
        return 0
    if a.kinds or a.fixed:
        if a.fixed:
            fixed_cost(a.repeat)
        if a.kinds:
            kinds(a.repeat, a.inner)
        return 0
    if not a.gpu_only:
        cpu(a.repeat)
    if not a.cpu_only:
        gpu(a.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
