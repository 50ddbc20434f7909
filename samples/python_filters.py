#!/usr/bin/env python3
"""cbi from Python: eager filters, a compiled pipeline, a tiled run with
dask, and a folder in batch mode. Results are compared with OpenCV.

    PYTHONPATH=build/python python3 samples/python_filters.py [samples/butterfly.jpg] [out_dir]
"""
import pathlib
import sys
import tempfile

import cv2
import numpy as np

import cbi

here = pathlib.Path(__file__).resolve().parent
src = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else here / "butterfly.jpg"
out_dir = pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else pathlib.Path(tempfile.mkdtemp(prefix="cbi-"))
out_dir.mkdir(parents=True, exist_ok=True)

img = cv2.imread(str(src))  # BGR, HxWx3 uint8, like every cbi default
print(f"{src.name}: {img.shape} {img.dtype}")

# Eager functions: one per filter kind, OpenCV's semantics and borders.
blurred = cbi.gaussian(img, 9, sigma=2.0)
same = cv2.GaussianBlur(img, (9, 9), 2.0, sigmaY=2.0, borderType=cv2.BORDER_REFLECT_101)
print("gaussian 9 vs OpenCV: max difference", int(np.abs(blurred.astype(int) - same).max()))
gray = cbi.color(img, "gray")
edges = cbi.sobel(gray, "mag", ksize=3)
cbi.blur(img, 5, out=blurred)  # in place into an existing array: no allocation
roi = img[100:300, 50:250]     # a view with strided rows: taken without a copy
print("ROI blur:", cbi.blur(roi, 3).shape)

# A pipeline, compiled once and callable on any image, from any thread.
p = cbi.Pipeline("color:gray | gaussian:5 | sobel:mag")
print("pipeline:", p, "| halo", p.halo)
print(p.plan(img.shape, img.dtype))
cv2.imwrite(str(out_dir / "edges.png"), p(img))

# Images larger than memory: tiles overlapped by the pipeline's halo give
# exactly the whole-image result.
try:
    import dask.array as da
    q = cbi.Pipeline("gaussian:5 | sobel:mag")
    tiled = da.map_overlap(q, da.from_array(gray, chunks=(128, 128)), depth=q.halo, boundary="none",
                           dtype=gray.dtype, meta=np.empty((0, 0), gray.dtype))
    print("dask tiles == whole image:", bool((tiled.compute() == q(gray)).all()))
except ImportError:
    print("dask not installed: skipping the tiled run")

# A DAG from JSON with two outputs.
dog, sharp = cbi.Pipeline.from_json(here / "pipelines" / "dog.json")(img)
cv2.imwrite(str(out_dir / "dog.png"), dog)

# Batch mode: a folder in, a folder out, per-file errors as results.
r = cbi.Pipeline("gaussian:5").run_folder(here, out_dir / "batch", pattern="*.jpg", device="cpu")
print(f"batch: {r.processed} processed, {r.failed} failed, {r.images_per_s:.1f} images/s")
print("outputs in", out_dir)
