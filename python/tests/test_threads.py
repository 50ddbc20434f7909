"""One pipeline from many threads; the GIL released during a call."""
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import cbi
from conftest import random_image


def test_eight_threads_one_pipeline(rng):
    p = cbi.Pipeline("gaussian:5 | sobel:mag")
    images = [random_image(rng, (30 + 7 * i, 40 + 5 * i, 3), np.uint8) for i in range(8)]
    want = [p(x) for x in images]

    def work(i):
        for _ in range(20):
            np.testing.assert_array_equal(p(images[i]), want[i])
        return True
    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, range(8)))


def test_gil_released_during_a_call(rng):
    x = random_image(rng, (2000, 2000, 3), np.uint8)
    p = cbi.Pipeline("blur:31 | gaussian:31 | blur:31")
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)
    t = threading.Thread(target=ticker)
    p(x[:64, :64])  # warm
    t.start()
    start = time.perf_counter()
    while time.perf_counter() - start < 0.3:
        p(x)
    end = time.perf_counter()
    stop.set()
    t.join()
    during = [s for s in ticks if start < s < end]
    assert len(during) >= 20, f"only {len(during)} ticks in {end - start:.3f} s: the GIL was held"


def test_clear_cache_while_idle(rng):
    p = cbi.Pipeline("blur:3")
    x = random_image(rng, (20, 20), np.uint8)
    p(x)
    assert p._p.idle_executors() == 1
    cbi.clear_cache()
    assert p._p.idle_executors() == 0
    np.testing.assert_array_equal(p(x), cbi.blur(x, 3))


def test_set_num_threads(rng):
    x = random_image(rng, (300, 200, 3), np.uint8)
    want = cbi.gaussian(x, 5)
    all_cores = cbi.get_num_threads()
    cbi.set_num_threads(1)
    try:
        assert cbi.get_num_threads() == 1
        np.testing.assert_array_equal(cbi.gaussian(x, 5), want)
    finally:
        cbi.set_num_threads(0)
    assert cbi.get_num_threads() == all_cores
    with pytest.raises(ValueError):
        cbi.set_num_threads(-1)
