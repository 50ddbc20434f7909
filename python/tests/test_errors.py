"""Typed errors, each a subclass of cbi.Error and the builtin it claims."""
import numpy as np
import pytest

import cbi


def test_hierarchy():
    assert issubclass(cbi.Error, RuntimeError)
    assert issubclass(cbi.InvalidArgument, cbi.Error) and issubclass(cbi.InvalidArgument, ValueError)
    assert issubclass(cbi.PipelineSyntaxError, cbi.InvalidArgument)
    assert issubclass(cbi.Unsupported, cbi.Error)
    assert issubclass(cbi.OutOfMemory, cbi.Error) and issubclass(cbi.OutOfMemory, MemoryError)
    assert issubclass(cbi.DeviceLost, cbi.Error)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int8, np.bool_])
def test_dtype_is_type_error(dtype):
    with pytest.raises(TypeError, match="uint8, uint16 or float32"):
        cbi.blur(np.zeros((8, 8), dtype), 3)


def test_big_endian_is_type_error():
    with pytest.raises(TypeError):
        cbi.blur(np.zeros((8, 8), ">u2"), 3)


def test_two_channels():
    with pytest.raises(cbi.InvalidArgument, match="1, 3 or 4"):
        cbi.blur(np.zeros((8, 8, 2), np.uint8), 3)


def test_five_dims_and_empty():
    with pytest.raises(ValueError):
        cbi.blur(np.zeros((1, 2, 8, 8, 3), np.uint8), 3)
    with pytest.raises(ValueError, match="empty"):
        cbi.blur(np.zeros((0, 8, 3), np.uint8), 3)


def test_non_contiguous_channels_names_the_fix():
    x = np.zeros((8, 8, 4), np.uint8)[..., :3]
    with pytest.raises(cbi.InvalidArgument, match="ascontiguousarray"):
        cbi.blur(x, 3)
    planar = np.zeros((3, 8, 8), np.uint8).transpose(1, 2, 0)
    with pytest.raises(ValueError, match="ascontiguousarray"):
        cbi.blur(planar, 3)


def test_column_step_and_negative_stride():
    x = np.zeros((8, 16, 3), np.uint8)
    with pytest.raises(ValueError):
        cbi.blur(x[:, ::2], 3)
    with pytest.raises(ValueError):
        cbi.blur(x[::-1], 3)


def test_size_one_dims_with_odd_strides_are_fine():
    x = np.zeros((1, 8, 3), np.uint8)
    y = np.lib.stride_tricks.as_strided(x, shape=(1, 8, 3), strides=(12345, 3, 1))
    assert cbi.blur(y, 3).shape == (1, 8, 3)


def test_bad_kernel_size():
    with pytest.raises(cbi.InvalidArgument) as e:
        cbi.blur(np.zeros((8, 8), np.uint8), 4)
    assert isinstance(e.value, ValueError)


def test_syntax_error_has_stage_and_column():
    with pytest.raises(cbi.PipelineSyntaxError) as e:
        cbi.Pipeline("color:gray | gaussian:4 | sobel:mag")
    assert e.value.stage == 2 and e.value.column == 14 and e.value.token == "gaussian:4"
    with pytest.raises(cbi.PipelineSyntaxError):
        cbi.Pipeline("blur:3 || blur:3")


def test_unsupported_schedule_names_alternatives():
    with pytest.raises(cbi.Unsupported) as e:
        cbi.Pipeline("color:gray@smem:32x8")
    assert not isinstance(e.value, ValueError)


def test_read_only_out():
    x = np.zeros((8, 8), np.uint8)
    out = np.zeros((8, 8), np.uint8)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        cbi.blur(x, 3, out=out)


def test_out_wrong_shape_dtype_kind():
    x = np.zeros((8, 8, 3), np.uint8)
    with pytest.raises(ValueError):
        cbi.blur(x, 3, out=np.zeros((8, 9, 3), np.uint8))
    with pytest.raises(TypeError):
        cbi.blur(x, 3, out=np.zeros((8, 8, 3), np.uint16))
    with pytest.raises(ValueError, match="overlaps"):
        cbi.blur(x, 3, out=x)


def test_argument_gaps_and_names():
    x = np.zeros((8, 8), np.uint8)
    with pytest.raises(cbi.InvalidArgument, match="sigma given without ksize"):
        cbi.gaussian(x, sigma=1.0)
    with pytest.raises(TypeError, match="unexpected keyword"):
        cbi.gaussian(x, 3, sigmaa=1.0)
    with pytest.raises(TypeError, match="multiple values"):
        cbi.gaussian(x, 3, ksize=5)
    with pytest.raises(TypeError, match="at most"):
        cbi.blur(x, 3, 4)
    with pytest.raises(cbi.InvalidArgument):
        cbi.blur(x, "3|blur:5")


def test_not_an_array():
    with pytest.raises(TypeError):
        cbi.blur([[1, 2], [3, 4]], 3)


def test_no_cuda_in_this_build_or_machine():
    x = np.zeros((8, 8), np.uint8)
    if cbi.built_with_cuda() and cbi._core.cuda_device_count() > 0:
        pytest.skip("a CUDA device is present")
    with pytest.raises(cbi.Error):
        cbi.blur(x, 3, device="cuda")


def test_checks_after_a_format_is_cached():
    p = cbi.Pipeline("blur:3")
    p(np.zeros((8, 8, 3), np.uint8))
    with pytest.raises(ValueError, match="empty"):
        p(np.zeros((0, 8, 3), np.uint8))
    with pytest.raises(cbi.InvalidArgument, match="1, 3 or 4"):
        p(np.zeros((8, 8, 2), np.uint8))
    with pytest.raises(TypeError):
        p(np.zeros((8, 8, 3), np.uint8), out=np.zeros((8, 8, 3), np.uint16))
    with pytest.raises(ValueError, match="read-only"):
        out = np.zeros((8, 8, 3), np.uint8)
        out.flags.writeable = False
        p(np.zeros((8, 8, 3), np.uint8), out=out)
    for w in range(1, 80):  # HxW images of any width share one checked format
        assert p(np.ones((4, w), np.uint8)).shape == (4, w)
    assert len(p._formats) <= 2
