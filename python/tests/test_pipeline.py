"""cbi.Pipeline: text and JSON, plan, halo (tiled with dask), run_folder."""
import _thread
import os
import pathlib
import threading
import time

import numpy as np
import pytest

import cbi
from conftest import have, random_image

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "samples"


def test_text_round_trip():
    for text in ["color:gray | gaussian:5 | sobel:mag", "blur:9@column:32", "gaussian:5:1.2 | laplacian:3"]:
        p = cbi.Pipeline(text)
        assert str(cbi.Pipeline(str(p))) == str(p)
    assert str(cbi.Pipeline("gaussian:5 |blur:3")) == "gaussian:5 | blur:3"
    assert "gaussian" in repr(cbi.Pipeline("gaussian:5"))


def test_pipeline_equals_eager_chain(rng):
    x = random_image(rng, (40, 60, 3), np.uint8)
    p = cbi.Pipeline("color:gray | gaussian:5 | sobel:mag")
    np.testing.assert_array_equal(p(x), cbi.sobel(cbi.gaussian(cbi.color(x, "gray"), 5), "mag"))


def test_json_several_outputs(rng):
    p = cbi.Pipeline.from_json(SAMPLES / "pipelines" / "dog.json")
    assert p.outputs == ["dog", "sharp"]
    x = random_image(rng, (50, 70, 3), np.uint8)
    dog, sharp = p(x)
    assert dog.shape == sharp.shape == (50, 70)
    d = p(x, as_dict=True)
    np.testing.assert_array_equal(d["dog"], dog)
    outs = (np.empty((50, 70), np.uint8), np.empty((50, 70), np.uint8))
    r = p(x, out=outs)
    assert r is outs
    np.testing.assert_array_equal(outs[1], sharp)
    assert str(p).startswith("{")  # a DAG prints as JSON
    assert cbi.Pipeline(p.json).json == p.json


def test_plan_is_print_pipeline():
    p = cbi.Pipeline("color:gray | gaussian:5 | sobel:mag")
    text = p.plan((480, 640, 3), np.uint8)
    assert "pipeline on cpu" in text and "640x480" in text and "buffer" in text
    assert "gaussian:5" in p.plan((10, 10), "uint16")


def test_halo():
    assert cbi.Pipeline("color:gray").halo == 0
    assert cbi.Pipeline("gaussian:5").halo == 2
    assert cbi.Pipeline("color:gray | gaussian:5 | sobel:mag").halo == 3
    assert cbi.Pipeline("blur:9 | laplacian").halo == 5
    assert cbi.Pipeline.from_json(SAMPLES / "pipelines" / "dog.json").halo == 4
    # Otsu's level comes from the whole image: no halo makes tiles equal it.
    with pytest.raises(cbi.Unsupported, match="whole image"):
        cbi.Pipeline("color:gray | gaussian:5 | threshold:0:255:otsu").halo


@pytest.mark.skipif(not have("dask"), reason="needs dask (python3-dask)")
@pytest.mark.parametrize("shape", [(301, 257), (211, 190, 3)])
def test_tiled_with_dask_equals_whole(rng, shape):
    import dask
    import dask.array as da
    x = random_image(rng, shape, np.uint8)
    p = cbi.Pipeline("gaussian:5 | sobel:mag | blur:3")
    chunks = (64, 64) + (() if len(shape) == 2 else (3,))
    # Colour: the channels stay in one chunk, with no overlap.
    depth = p.halo if len(shape) == 2 else {0: p.halo, 1: p.halo, 2: 0}
    tiled = da.map_overlap(p, da.from_array(x, chunks=chunks), depth=depth, boundary="none",
                           dtype=x.dtype, meta=np.empty((0,) * len(shape), x.dtype))
    with dask.config.set(scheduler="threads"):
        np.testing.assert_array_equal(tiled.compute(), p(x))


def _folder(tmp_path, n=6):
    import cv2
    src = tmp_path / "in"
    src.mkdir()
    rng = np.random.default_rng(5)
    for i in range(n):
        cv2.imwrite(str(src / f"img{i}.png"), random_image(rng, (40, 50, 3), np.uint8))
    return src


@pytest.mark.skipif(not have("cv2"), reason="needs cv2 to write the inputs")
def test_run_folder(tmp_path):
    import cv2
    src = _folder(tmp_path)
    (src / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    out = tmp_path / "out"
    seen = []
    p = cbi.Pipeline("gaussian:5")
    r = p.run_folder(src, out, device="cpu", progress=seen.append)
    assert (r.processed, r.failed) == (6, 1)
    assert len(seen) == 7 and seen[-1]["done"] == 7
    assert r.errors[0][0].endswith("broken.png") and "broken.png" in r.errors[0][1]
    with pytest.raises(cbi.Error):
        r.raise_for_failures()
    x = cv2.imread(str(src / "img0.png"))
    np.testing.assert_array_equal(cv2.imread(str(out / "img0.png")), p(x))
    assert sorted(os.listdir(out)) == [f"img{i}.png" for i in range(6)]
    (cpu,) = r.devices  # a CPU keeps no device-path times: zeros, as --stats prints none
    assert cpu["name"] == "cpu" and cpu["images"] == 6 and cpu["busy_s"] > 0
    assert (cpu["decode_s"], cpu["filter_s"], cpu["result_s"], cpu["hardware_batches"]) == (0, 0, 0, 0)
    again = p.run_folder(src, out, device="cpu", skip_existing=True)
    assert again.skipped == 6 and again.processed == 0


@pytest.mark.skipif(not have("cv2"), reason="needs cv2 to write the inputs")
def test_run_folder_progress_error_cancels(tmp_path):
    src = _folder(tmp_path)

    def boom(p):
        raise RuntimeError("stop here")
    with pytest.raises(RuntimeError, match="stop here"):
        cbi.Pipeline("blur:3").run_folder(src, tmp_path / "out", device="cpu", jobs=1, progress=boom)


@pytest.mark.skipif(not have("cv2"), reason="needs cv2 to write the inputs")
def test_run_folder_ctrl_c(tmp_path):
    src = _folder(tmp_path, n=40)
    out = tmp_path / "out"
    first = threading.Event()

    def progress(p):
        first.set()
        time.sleep(0.02)  # the batch lasts long enough for the interrupt to land inside it

    def interrupt():
        first.wait(10)
        _thread.interrupt_main()
    t = threading.Thread(target=interrupt)
    t.start()
    with pytest.raises(KeyboardInterrupt) as e:
        cbi.Pipeline("gaussian:31 | blur:31").run_folder(src, out, device="cpu", jobs=1, in_flight=1,
                                                       progress=progress)
    t.join()
    s = e.value.summary
    assert s["cancelled"] > 0 and s["processed"] + s["cancelled"] + s["failed"] == 40
    assert not [f for f in os.listdir(out) if not f.endswith(".png") or f.startswith(".")]  # no temporaries
