"""GPU tests: torch and CuPy arrays in, the same kind out on the same device,
on the caller's stream. Skipped without a CUDA build, device, torch or CuPy."""
import numpy as np
import pytest

import cbi
from conftest import have, random_image

pytestmark = pytest.mark.gpu

cuda_ok = cbi.built_with_cuda() and cbi._core.cuda_device_count() > 0
needs_torch = pytest.mark.skipif(not (cuda_ok and have("torch")), reason="needs a CUDA build, a GPU and torch")
needs_cupy = pytest.mark.skipif(not (cuda_ok and have("cupy")), reason="needs a CUDA build, a GPU and CuPy")


@needs_torch
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "float32"])
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_torch_same_kind_same_device_bit_exact(rng, dtype, channels):
    import torch
    shape = (67, 91) if channels == 1 else (67, 91, channels)
    x = random_image(rng, shape, dtype)
    for text in ["blur:5", "gaussian:7:1.5", "sobel:mag", "laplacian:3", "color:gray" if channels > 1 else "blur:1"]:
        p = cbi.Pipeline(text)
        t = torch.from_numpy(x).cuda()
        y = p(t)
        assert isinstance(y, torch.Tensor) and y.device == t.device and y.dtype == t.dtype
        want = p(x)
        got = y.cpu().numpy()
        if dtype == "float32":
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4, err_msg=text)
        else:
            np.testing.assert_array_equal(got, want, err_msg=text)


@needs_torch
def test_torch_zero_copy_and_out():
    import torch
    t = torch.randint(0, 255, (64, 64, 3), dtype=torch.uint8, device="cuda")
    out = torch.empty_like(t)
    r = cbi.blur(t, 3, out=out)
    assert r is out and cbi._core._testing.last_pointers() == (t.data_ptr(), [out.data_ptr()])
    roi = t[8:40, 4:60]
    y = cbi.blur(roi, 3)
    assert cbi._core._testing.last_pointers()[0] == roi.data_ptr()
    torch.testing.assert_close(y, cbi.blur(roi.contiguous(), 3))


@needs_torch
def test_torch_no_host_sync_and_stream_order():
    import torch
    x = torch.randint(0, 255, (2048, 2048, 3), dtype=torch.uint8, device="cuda")
    cbi.blur(x, 5)  # warm: the executor's first run allocates (which may synchronise)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(1)  # warm: a kernel's first launch loads its module, which waits for the GPU
        x.fill_(0)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(2_000_000_000)  # a busy producer on another stream (about a second)
        x.fill_(7)
    torch.cuda.current_stream().wait_stream(side)
    assert not torch.cuda.current_stream().query(), "the producer must still be busy when cbi is called"
    y = cbi.blur(x, 5)  # on torch's current stream: after the fill
    assert not torch.cuda.current_stream().query(), "cbi waited for the GPU"
    torch.cuda.synchronize()
    assert (y == 7).all()


@needs_torch
def test_torch_stream_negotiation_through_dlpack():
    import torch
    x = torch.zeros((1024, 1024), dtype=torch.uint8, device="cuda")
    producer = torch.cuda.Stream()
    consumer = torch.cuda.Stream()
    with torch.cuda.stream(consumer):
        cbi.blur(x, 3)  # warm: executor and allocator
    torch.cuda.synchronize()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(200_000_000)
        x.fill_(9)
    # cbi on `consumer`: __dlpack__(stream=consumer) makes it wait for torch's
    # current stream (the default), so order the producer before that first.
    torch.cuda.current_stream().wait_stream(producer)
    with cbi.stream(consumer):
        y = cbi.blur(x, 3)
    consumer.synchronize()
    assert (y == 9).all()


@needs_torch
def test_torch_negative_control_detects_the_race():
    import torch
    x = torch.zeros((1024, 1024), dtype=torch.uint8, device="cuda")
    producer = torch.cuda.Stream()
    consumer = torch.cuda.Stream()
    with torch.cuda.stream(consumer):
        cbi.blur(x, 3)  # warm: executor and allocator (a first allocation may synchronise)
    torch.cuda.synchronize()
    with torch.cuda.stream(producer):
        torch.cuda._sleep(500_000_000)
        x.fill_(9)
    with torch.cuda.stream(consumer):
        # No ordering at all (the producer is not on the current stream): the
        # blur reads zeros, proving the positive test can fail.
        y = cbi.blur(x, 3, stream=consumer)
    consumer.synchronize()
    torch.cuda.synchronize()
    assert (y == 0).all()


@needs_torch
def test_inputs_live_until_done():
    import gc
    import weakref
    import torch
    x = torch.randint(0, 255, (2048, 2048), dtype=torch.uint8, device="cuda")
    cbi.blur(x, 3)
    cbi.synchronize()
    assert cbi._core._testing.pending() == 0
    torch.cuda._sleep(200_000_000)
    cbi.blur(x, 3)
    assert cbi._core._testing.pending() >= 1
    cbi.synchronize()
    assert cbi._core._testing.pending() == 0
    gc.collect()


@needs_torch
def test_host_data_on_cuda_equals_cpu(rng):
    x = random_image(rng, (100, 120, 3), np.uint8)
    np.testing.assert_array_equal(cbi.gaussian(x, 5, device="cuda"), cbi.gaussian(x, 5))


@needs_cupy
def test_cupy_same_kind(rng):
    import cupy
    x = random_image(rng, (50, 60, 3), np.uint16)
    c = cupy.asarray(x)
    y = cbi.gaussian(c, 5)
    assert isinstance(y, cupy.ndarray) and y.device == c.device
    np.testing.assert_array_equal(cupy.asnumpy(y), cbi.gaussian(x, 5))
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        y2 = cbi.gaussian(c, 5)
    s.synchronize()
    np.testing.assert_array_equal(cupy.asnumpy(y2), cbi.gaussian(x, 5))


@needs_torch
@pytest.mark.skipif(not cuda_ok or cbi._core.cuda_device_count() < 2, reason="needs two GPUs")
def test_cuda1_stays_on_1(rng):
    import torch
    x = random_image(rng, (64, 64, 3), np.uint8)
    t = torch.from_numpy(x).to("cuda:1")
    torch.cuda.set_device(0)
    y = cbi.blur(t, 5)
    assert y.device == t.device and torch.cuda.current_device() == 0
    np.testing.assert_array_equal(y.cpu().numpy(), cbi.blur(x, 5))


@pytest.mark.skipif(not have("torch"), reason="needs torch")
def test_torch_cpu_tensor_through_dlpack(rng):
    import torch
    x = random_image(rng, (30, 40, 3), np.uint8)
    t = torch.from_numpy(x)
    y = cbi.blur(t, 3)
    assert isinstance(y, torch.Tensor) and y.device.type == "cpu"
    np.testing.assert_array_equal(y.numpy(), cbi.blur(x, 3))
