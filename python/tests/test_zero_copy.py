"""Zero copy both ways, proved by pointer identity; no allocation on a
repeated call; reference counts and memory flat."""
import gc
import sys
import tracemalloc

import numpy as np

import cbi
from cbi import _core
from conftest import random_image

last = _core._testing.last_pointers


def ptr(a):
    return a.__array_interface__["data"][0]


def test_input_and_output_pointers(rng):
    x = random_image(rng, (64, 80, 3), np.uint8)
    y = cbi.blur(x, 3)
    assert last() == (ptr(x), [ptr(y)])
    assert isinstance(y, np.ndarray) and y.base is None  # NumPy's own allocation, not a view into cbi


def test_roi_view_without_copy(rng):
    big = random_image(rng, (100, 120, 3), np.uint16)
    roi = big[10:60, 20:90]  # strided rows
    assert not roi.flags.c_contiguous
    y = cbi.gaussian(roi, 5)
    assert last()[0] == ptr(roi)
    np.testing.assert_array_equal(y, cbi.gaussian(np.ascontiguousarray(roi), 5))


def test_out_written_in_place(rng):
    x = random_image(rng, (48, 64), np.float32)
    out = np.empty_like(x)
    r = cbi.sobel(x, "mag", out=out)
    assert r is out and last() == (ptr(x), [ptr(out)])
    np.testing.assert_array_equal(out, cbi.sobel(x, "mag"))


def test_out_roi_view(rng):
    x = random_image(rng, (30, 40, 3), np.uint8)
    canvas = np.zeros((50, 70, 3), np.uint8)
    view = canvas[5:35, 10:50]
    cbi.blur(x, 5, out=view)
    assert last()[1] == [ptr(view)]
    np.testing.assert_array_equal(canvas[5:35, 10:50], cbi.blur(x, 5))
    assert not canvas[:5].any() and not canvas[35:].any() and not canvas[:, :10].any() and not canvas[:, 50:].any()


def test_no_allocation_on_repeat(rng):
    x = random_image(rng, (64, 64, 3), np.uint8)
    p = cbi.Pipeline("gaussian:5 | sobel:mag")
    out = np.empty_like(x)
    p(x, out=out)
    before = (_core._testing.allocations(), _core._testing.executors())
    for _ in range(5):
        p(x, out=out)
    assert (_core._testing.allocations(), _core._testing.executors()) == before


def test_refcounts_unchanged(rng):
    x = random_image(rng, (32, 32, 3), np.uint8)
    out = np.empty_like(x)
    cbi.blur(x, 3, out=out)
    rx, ro = sys.getrefcount(x), sys.getrefcount(out)
    for _ in range(10):
        cbi.blur(x, 3, out=out)
        cbi.blur(x, 3)
    assert (sys.getrefcount(x), sys.getrefcount(out)) == (rx, ro)


def test_output_outlives_everything(rng):
    x = random_image(rng, (16, 16), np.uint8)
    y = cbi.blur(x, 3)
    want = y.copy()
    del x
    cbi.clear_cache()
    gc.collect()
    np.testing.assert_array_equal(y, want)


def test_memory_flat_over_1000_calls(rng):
    sizes = [(h, w) for h in (17, 32, 45) for w in (19, 40)]
    images = [random_image(rng, (h, w, 3), np.uint8) for h, w in sizes]
    for x in images:  # warm: each format's executor exists
        cbi.gaussian(x, 3)
    gc.collect()
    tracemalloc.start()
    for i in range(1000):
        cbi.gaussian(images[i % len(images)], 3)
    gc.collect()
    snap1 = tracemalloc.take_snapshot()
    for i in range(1000):
        cbi.gaussian(images[i % len(images)], 3)
    gc.collect()
    snap2 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in snap2.compare_to(snap1, "filename"))
    assert grown < 64 * 1024, f"Python memory grew by {grown} bytes over 1000 calls"


def test_rss_flat_over_many_sizes(rng):
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096
    x = random_image(rng, (300, 300, 3), np.uint8)
    for i in range(200):  # more formats than the pool keeps
        cbi.blur(x[: 100 + i, : 100 + i], 3)
    start = rss()
    for i in range(800):
        cbi.blur(x[: 100 + i % 200, : 100 + i % 200], 3)
    assert rss() - start < 32 * 2**20


def test_any_buffer_protocol_object(rng):
    x = random_image(rng, (20, 30, 3), np.uint16)
    y = cbi.gaussian(memoryview(x), 3)  # not NumPy: read through PEP 3118, answered with NumPy
    assert isinstance(y, np.ndarray) and last()[0] == ptr(x)
    np.testing.assert_array_equal(y, cbi.gaussian(x, 3))
