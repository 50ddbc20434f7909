"""Shared fixtures and markers for cbi's Python tests.

Markers: ``gpu`` (needs CUDA and CuPy or torch: skipped where absent),
``parity`` (needs cv2). Run from a build: PYTHONPATH=build/python.
"""
import importlib.util

import numpy as np
import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device and CuPy or torch (skipped without)")
    config.addinivalue_line("markers", "parity: compared with OpenCV's cv2 (skipped without it)")


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def random_image(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.uint8:
        return rng.integers(0, 256, size=shape, dtype=np.uint8)
    if dtype == np.uint16:
        return rng.integers(0, 65536, size=shape, dtype=np.uint16)
    return (rng.random(size=shape, dtype=np.float32) * 255).astype(np.float32)


def have(module):
    return importlib.util.find_spec(module) is not None
