"""The eager functions against OpenCV at every depth and channel count."""
import numpy as np
import pytest

import cbi
from conftest import random_image

cv2 = pytest.importorskip("cv2")
pytestmark = pytest.mark.parity

DTYPES = [np.uint8, np.uint16, np.float32]
CHANNELS = [1, 3, 4]
R101 = cv2.BORDER_REFLECT_101


def shape_of(channels, h=37, w=53):
    return (h, w) if channels == 1 else (h, w, channels)


def to_depth(f, dtype):
    """cbi's conversion of a float result to the input depth: rounded, saturated."""
    if dtype == np.float32:
        return f.astype(np.float32)
    info = np.iinfo(dtype)
    return np.clip(np.rint(f), info.min, info.max).astype(dtype)


def assert_close(got, want, dtype):
    assert got.shape == want.shape and got.dtype == want.dtype
    if dtype == np.float32:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    else:
        diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
        assert diff.max() <= 1, f"max difference {diff.max()}"
    assert np.any(got != 0), "an all-zero output never passes"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", CHANNELS)
def test_blur(rng, dtype, channels):
    x = random_image(rng, shape_of(channels), dtype)
    assert_close(cbi.blur(x, 5), cv2.blur(x, (5, 5), borderType=R101), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", CHANNELS)
def test_gaussian(rng, dtype, channels):
    x = random_image(rng, shape_of(channels), dtype)
    assert_close(cbi.gaussian(x, 7, sigma=1.5), cv2.GaussianBlur(x, (7, 7), 1.5, sigmaY=1.5, borderType=R101), dtype)
    assert_close(cbi.gaussian(x, 5), cv2.GaussianBlur(x, (5, 5), 0, borderType=R101), dtype)


def test_gaussian_8u_exact(rng):
    x = random_image(rng, (41, 29, 3), np.uint8)
    np.testing.assert_array_equal(cbi.gaussian(x, 5), cv2.GaussianBlur(x, (5, 5), 0, borderType=R101))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", CHANNELS)
@pytest.mark.parametrize("mode", ["x", "y", "mag"])
def test_sobel(rng, dtype, channels, mode):
    x = random_image(rng, shape_of(channels), dtype)
    gx = cv2.Sobel(x, cv2.CV_32F, 1, 0, ksize=3, borderType=R101)
    gy = cv2.Sobel(x, cv2.CV_32F, 0, 1, ksize=3, borderType=R101)
    want = {"x": np.abs(gx), "y": np.abs(gy), "mag": np.sqrt(gx * gx + gy * gy)}[mode]
    assert_close(cbi.sobel(x, mode, ksize=3), to_depth(want, dtype), dtype)


@pytest.mark.skipif(not hasattr(cbi, "scharr"), reason="this build has no scharr kind")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", CHANNELS)
@pytest.mark.parametrize("mode", ["x", "y", "mag"])
def test_scharr(rng, dtype, channels, mode):
    x = random_image(rng, shape_of(channels), dtype)
    gx = cv2.Scharr(x, cv2.CV_32F, 1, 0, borderType=R101)
    gy = cv2.Scharr(x, cv2.CV_32F, 0, 1, borderType=R101)
    want = {"x": np.abs(gx), "y": np.abs(gy), "mag": np.sqrt(gx * gx + gy * gy)}[mode]
    assert_close(cbi.scharr(x, mode), to_depth(want, dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", CHANNELS)
def test_laplacian(rng, dtype, channels):
    x = random_image(rng, shape_of(channels), dtype)
    want = np.abs(cv2.Laplacian(x, cv2.CV_32F, ksize=3, borderType=R101))
    assert_close(cbi.laplacian(x, 3), to_depth(want, dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", [3, 4])
def test_color_gray(rng, dtype, channels):
    x = random_image(rng, shape_of(channels), dtype)
    want = cv2.cvtColor(x, cv2.COLOR_BGR2GRAY if channels == 3 else cv2.COLOR_BGRA2GRAY)
    assert_close(cbi.color(x, "gray"), want, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_color_ycrcb(rng, dtype):
    x = random_image(rng, shape_of(3), dtype)
    if dtype == np.float32:
        x = x / 255  # OpenCV's float YCrCb offset (0.5) is for [0, 1] data
    assert_close(cbi.color(x, "ycrcb"), cv2.cvtColor(x, cv2.COLOR_BGR2YCrCb), dtype)


def test_color_of_gray_is_itself(rng):
    x = random_image(rng, (20, 30), np.uint8)
    np.testing.assert_array_equal(cbi.color(x, "gray"), x)
    assert cbi.color(x, "sepia").shape == (20, 30, 3)


def test_color_matrix(rng):
    x = random_image(rng, (20, 30, 3), np.float32)
    m = np.eye(3)  # rows R', G', B' over (R, G, B): the identity keeps the image
    np.testing.assert_allclose(cbi.color(x, m), x, rtol=1e-6)
    np.testing.assert_allclose(cbi.color(x, [[0, 0, 1], [0, 1, 0], [1, 0, 0]]), x[..., ::-1], rtol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", CHANNELS)
def test_filter2d_takes_the_kernel_as_cv2_does(rng, dtype, channels):
    # A 2-D array's rows are the kernel's rows (not one row of all its taps); a Kx1 column is a vertical kernel.
    x = random_image(rng, shape_of(channels), dtype)
    k = rng.uniform(-1, 1, (3, 5)).astype(np.float32)
    assert_close(cbi.filter2d(x, k), cv2.filter2D(x, -1, k, borderType=R101), dtype)
    assert_close(cbi.filter2d(x, k.tolist(), border="replicate"),
                 cv2.filter2D(x, -1, k, borderType=cv2.BORDER_REPLICATE), dtype)
    g = cv2.getGaussianKernel(7, 2)  # 7x1
    assert_close(cbi.filter2d(x, g), cv2.filter2D(x, -1, g, borderType=R101), dtype)
    sharpen = np.array([[0, -1, 0], [-1, 5, -1], [0, -1, 0]])
    assert_close(cbi.filter2d(x, sharpen), cv2.filter2D(x, -1, sharpen.astype(np.float32), borderType=R101), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sepfilter2d_takes_kx_and_ky(rng, dtype):
    x = random_image(rng, shape_of(3), dtype)
    kx, ky = cv2.getGaussianKernel(9, 2), np.array([-1.0, 0.0, 1.0])
    assert_close(cbi.sepfilter2d(x, (kx, ky)), cv2.sepFilter2D(x, -1, kx, ky, borderType=R101), dtype)


def test_sizes_as_cv2_writes_them(rng):
    # cv2's (width, height) pairs: one side where they agree, WxH where the kind takes it.
    x = random_image(rng, (31, 43, 3), np.uint8)
    np.testing.assert_array_equal(cbi.gaussian(x, (5, 5), 0), cbi.gaussian(x, 5, 0))
    np.testing.assert_array_equal(cbi.blur(x, (7, 7)), cbi.blur(x, 7))
    np.testing.assert_array_equal(cbi.erode(x, (7, 3)), cv2.erode(x, np.ones((3, 7), np.uint8)))
    with pytest.raises(cbi.InvalidArgument, match="blur kernel size '5x3'"):
        cbi.blur(x, (5, 3))
    # cv2.erode's kernel of ones is its rectangle; other masks are named by size and shape.
    np.testing.assert_array_equal(cbi.erode(x, np.ones((5, 5), np.uint8)), cv2.erode(x, np.ones((5, 5), np.uint8)))
    np.testing.assert_array_equal(cbi.dilate(x, np.ones((3, 7), np.uint8), "rect", 2),
                                  cv2.dilate(x, np.ones((3, 7), np.uint8), iterations=2))
    with pytest.raises(cbi.InvalidArgument, match="structuring element array must be all ones"):
        cbi.erode(x, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 5)))


def test_a_ragged_kernel_is_refused(rng):
    x = random_image(rng, (20, 30), np.uint8)
    with pytest.raises(cbi.InvalidArgument, match="filter2d row 2 has 1 taps"):
        cbi.filter2d(x, [[1, 2], [3]])
    with pytest.raises(cbi.InvalidArgument, match="color"):
        cbi.color(random_image(rng, (20, 30, 3), np.uint8), [[1, 0, 0], [0, 1], [0, 0, 1]])


@pytest.mark.parametrize("border,cv_border", [("reflect", cv2.BORDER_REFLECT), ("replicate", cv2.BORDER_REPLICATE),
                                              ("constant", cv2.BORDER_CONSTANT), ("reflect101", R101)])
def test_borders(rng, border, cv_border):
    x = random_image(rng, (31, 43, 3), np.uint8)
    assert_close(cbi.blur(x, 7, border=border), cv2.blur(x, (7, 7), borderType=cv_border), np.uint8)


def test_order_rgb(rng):
    bgr = random_image(rng, (25, 35, 3), np.uint8)
    rgb = np.ascontiguousarray(bgr[..., ::-1])
    np.testing.assert_array_equal(cbi.color(rgb, "gray", order="rgb"), cbi.color(bgr, "gray"))
    np.testing.assert_array_equal(cbi.color(rgb, "sepia", order="rgb"), cbi.color(bgr, "sepia")[..., ::-1])
    # Stencils do not care about the order: no copies, the same result.
    np.testing.assert_array_equal(cbi.blur(rgb, 3, order="rgb"), cbi.blur(rgb, 3))


def test_batch_nhwc(rng):
    x = random_image(rng, (3, 24, 32, 3), np.uint8)
    y = cbi.gaussian(x, 5)
    assert y.shape == x.shape
    for i in range(3):
        np.testing.assert_array_equal(y[i], cbi.gaussian(x[i], 5))


def test_schedules_agree(rng):
    x = random_image(rng, (40, 50, 3), np.uint8)
    want = cbi.blur(x, 5)
    for s in ["naive", "column:32", "zigzag:16", "tile:32x8"]:
        np.testing.assert_array_equal(cbi.blur(x, 5, schedule=s), want, err_msg=s)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", CHANNELS)
def test_morphology_with_opencvs_default_border(rng, dtype, channels):
    x = random_image(rng, shape_of(channels), dtype)
    ellipse = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (7, 5))
    np.testing.assert_array_equal(cbi.erode(x, 5), cv2.erode(x, np.ones((5, 5), np.uint8)))
    np.testing.assert_array_equal(cbi.dilate(x, "7x5", "ellipse", 2), cv2.dilate(x, ellipse, iterations=2))
    np.testing.assert_array_equal(cbi.open(x, 3, "cross"),
                                  cv2.morphologyEx(x, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_CROSS, (3, 3))))
    np.testing.assert_array_equal(cbi.tophat(x, 9, border="replicate"),
                                  cv2.morphologyEx(x, cv2.MORPH_TOPHAT, np.ones((9, 9), np.uint8),
                                                   borderType=cv2.BORDER_REPLICATE))
