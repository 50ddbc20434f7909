"""cbi: image filters with OpenCV's semantics on NumPy, CuPy and torch arrays.

Data decides the device and the caller's stream decides the order::

    import cbi, numpy as np
    y = cbi.gaussian(img, 5, sigma=1.2)        # NumPy HxW[xC] -> NumPy, on the CPU
    e = cbi.sobel(img, "mag", ksize=3)         # same dtype and size as the input
    g = cbi.color(img, "gray")                 # BGR like OpenCV; order="rgb" for PIL/torchvision data
    cbi.blur(img, 9, out=y)                    # written in place, returns y
    u = cbi.gaussian(t_cuda, 9)                # torch on cuda:1 -> torch on cuda:1, torch's current stream, no sync
    p = cbi.Pipeline("color:gray | gaussian:5 | sobel:mag")
    edges = p(img)                             # compiled once, any size, any thread

Arrays come in without a copy (the buffer protocol, ``__dlpack__``, or the
CUDA array interface v3) and results are allocated by the input's own
library (``np.empty``, ``torch.empty``, ``cupy.empty`` on the input's
device). Shapes HxW, HxWxC (C = 1, 3, 4) and NxHxWxC; dtypes uint8, uint16,
float32; rows may be strided (ROI views), pixels must be packed.

Borders are OpenCV's: ``reflect101`` (the default, OpenCV's
BORDER_REFLECT_101, SciPy/CuPy ``mirror``, torch ``reflect``), ``reflect``
(BORDER_REFLECT, SciPy ``reflect``, torch has none), ``replicate``
(SciPy ``nearest``, torch ``replicate``), ``constant[:V]``, ``wrap``.

``import cbi`` imports neither torch nor CuPy and starts no CUDA.
"""
from __future__ import annotations

import builtins
import contextlib
import functools
import inspect
import numbers
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence

from . import _core
from ._core import (  # noqa: F401  (re-exported)
    DeviceLost,
    Error,
    InvalidArgument,
    OutOfMemory,
    PipelineSyntaxError,
    Unsupported,
)

__version__ = "0.1.0"

__all__ = [
    "Error", "InvalidArgument", "PipelineSyntaxError", "Unsupported", "OutOfMemory", "DeviceLost",
    "Pipeline", "BatchSummary", "BatchItem", "stream", "synchronize", "clear_cache", "filter_kinds",
    "schedules", "devices", "built_with_cuda", "warm_up", "set_num_threads", "get_num_threads",
]

_DTYPES = ("uint8", "uint16", "float32")


# --------------------------------------------------------------------------
# Array kinds: which library an array comes from, how to allocate its like,
# and how to hand it to the core without a copy.

def _module_of(x) -> str:
    return type(x).__module__.split(".", 1)[0]


class _Kind:
    """How cbi treats arrays of one library."""

    name = "buffer"
    # Host memory handed to the core as the array itself (the buffer
    # protocol): no handle to make, no stream to choose.
    passthrough = True

    def format_key(self, x):
        """A hashable stand-in for the dtype under which a pipeline caches
        a checked format, or None to check every call."""
        return None

    def dtype(self, x) -> str:
        import numpy as np  # a plain buffer: read its format through NumPy, without a copy
        return str(np.asarray(x).dtype)

    def shape(self, x):
        import numpy as np
        return tuple(np.asarray(x).shape)

    def is_cuda(self, x) -> bool:
        return False

    def device_index(self, x) -> int:
        return 0

    def empty(self, shape, like):
        import numpy as np
        return np.empty(shape, dtype=self.dtype(like))

    def handle(self, x, stream_ptr):
        return x  # the buffer protocol

    def current_stream(self, device) -> int:
        return 0

    def swap_rb(self, x):
        """A copy with channels 0 and 2 exchanged (RGB <-> BGR)."""
        import numpy as np
        a = np.asarray(x)
        idx = [2, 1, 0, 3][: a.shape[-1]]
        return np.ascontiguousarray(a[..., idx])

    def assign(self, dst, src):
        dst[...] = src


class _NumPy(_Kind):
    name = "numpy"

    def format_key(self, x):
        return x.dtype

    _NAMES = {"B": "uint8", "H": "uint16", "f": "float32"}  # str(dtype) is slow (NumPy 1.x)

    def dtype(self, x):
        d = x.dtype
        name = self._NAMES.get(d.char)
        if name is not None and d.isnative:
            return name
        return str(d) if d.isnative else ">" + str(d)

    def shape(self, x):
        return x.shape

    def empty(self, shape, like):
        return _np_empty(shape, like)


def _np_empty(shape, like):
    return sys.modules["numpy"].empty(shape, dtype=like.dtype)  # a NumPy array exists: NumPy is imported


class _Torch(_Kind):
    name = "torch"
    passthrough = False

    def format_key(self, x):
        return x.dtype

    def dtype(self, x):
        return str(x.dtype).replace("torch.", "")

    def shape(self, x):
        return x.shape  # torch.Size, a tuple

    def is_cuda(self, x):
        return x.is_cuda

    def device_index(self, x):
        return max(x.get_device(), 0)  # -1 on the CPU; no torch.device made

    def empty(self, shape, like):
        return sys.modules["torch"].empty(shape, dtype=like.dtype, device=like.device)  # a tensor exists: torch is imported

    def handle(self, x, stream_ptr):
        if x.requires_grad:
            x = x.detach()
        if x.is_cuda:
            # On the current stream of the tensor's device, __dlpack__ orders
            # nothing (its stream is the consumer's) and returns _to_dlpack's
            # capsule: ask for that directly, without the stream objects
            # __dlpack__ makes on every call.
            device = x.get_device()
            raw = _torch_raw()
            if raw is not None and stream_ptr == raw[0](device):
                return raw[1](x)
            cuda = sys.modules["torch"].cuda
            if device != cuda.current_device():
                # torch exports a tensor only from its own current device (BufferError otherwise).
                with cuda.device(device):
                    return x.__dlpack__(stream=_dlpack_stream(stream_ptr))
            return x.__dlpack__(stream=_dlpack_stream(stream_ptr))
        return x.__dlpack__()

    def current_stream(self, device):
        raw = _torch_raw()
        if raw is not None:
            return raw[0](device)
        return sys.modules["torch"].cuda.current_stream(device).cuda_stream

    def swap_rb(self, x):
        idx = [2, 1, 0, 3][: x.shape[-1]]
        return x[..., idx].contiguous()

    def assign(self, dst, src):
        dst.copy_(src)


class _CuPy(_Kind):
    name = "cupy"
    passthrough = False

    def format_key(self, x):
        return x.dtype

    def dtype(self, x):
        return str(x.dtype)

    def shape(self, x):
        return x.shape

    def is_cuda(self, x):
        return True

    def device_index(self, x):
        return x.device.id

    def empty(self, shape, like):
        import cupy
        with like.device:
            return cupy.empty(shape, dtype=like.dtype)

    def handle(self, x, stream_ptr):
        return x.__dlpack__(stream=_dlpack_stream(stream_ptr))

    def current_stream(self, device):
        import cupy
        with cupy.cuda.Device(device):
            return cupy.cuda.get_current_stream().ptr

    def swap_rb(self, x):
        import cupy
        idx = [2, 1, 0, 3][: x.shape[-1]]
        with x.device:
            return cupy.ascontiguousarray(x[..., idx])


class _CudaArrayInterface(_Kind):
    """Any other device array: through __cuda_array_interface__ (v2/v3)."""

    name = "cuda_array_interface"
    passthrough = False

    def dtype(self, x):
        t = x.__cuda_array_interface__["typestr"]
        kinds = {"u": "uint", "i": "int", "f": "float", "b": "bool"}
        return kinds.get(t[1], t[1]) + str(int(t[2:]) * 8)

    def shape(self, x):
        return tuple(x.__cuda_array_interface__["shape"])

    def is_cuda(self, x):
        return True

    def device_index(self, x):
        dev = getattr(x, "device", None)
        return int(getattr(dev, "id", getattr(dev, "index", 0)) or 0)

    def empty(self, shape, like):
        raise TypeError(f"cbi cannot allocate an output like a {type(like).__name__}: pass out=")

    def handle(self, x, stream_ptr):
        cai = x.__cuda_array_interface__
        if cai.get("version", 0) >= 3 and cai.get("stream") is not None:
            producer = cai["stream"]
            producer = 0 if producer == 1 else producer
            _core.wait_stream(stream_ptr, producer, self.device_index(x))
        ptr, readonly = cai["data"]
        strides = cai.get("strides")
        return ("cai", ptr, tuple(cai["shape"]), None if strides is None else tuple(strides), cai["typestr"],
                self.device_index(x), bool(readonly))


_KINDS = {"numpy": _NumPy(), "torch": _Torch(), "cupy": _CuPy()}
_BUFFER = _Kind()
_CAI = _CudaArrayInterface()
_KIND_OF_TYPE: dict = {}  # type -> kind, for the types of _KINDS' modules (a type's module does not change)

_torch_raw_calls: list = []


def _torch_raw():
    """(current raw stream of a device, _to_dlpack) from
    torch._C, or None where this torch lacks them (then the public, slower
    calls)."""
    if not _torch_raw_calls:
        C = getattr(sys.modules["torch"], "_C", None)
        names = ("_cuda_getCurrentRawStream", "_to_dlpack")
        calls = tuple(getattr(C, n, None) for n in names)
        _torch_raw_calls.append(None if None in calls else calls)
    return _torch_raw_calls[0]


def _kind_of(x) -> _Kind:
    t = type(x)
    k = _KIND_OF_TYPE.get(t)
    if k is not None:
        return k
    k = _KINDS.get(_module_of(x))
    if k is not None:
        if len(_KIND_OF_TYPE) < 64:
            _KIND_OF_TYPE[t] = k
        return k
    if hasattr(x, "__cuda_array_interface__"):
        return _CAI
    try:
        memoryview(x)
    except TypeError:
        raise TypeError(f"cbi takes NumPy, CuPy or torch arrays (or any object with the buffer protocol or "
                        f"__cuda_array_interface__), not {type(x).__module__}.{type(x).__name__}") from None
    return _BUFFER


def _dlpack_stream(ptr: int) -> int:
    # DLPack: 1 is the legacy default stream; 0 is not allowed for CUDA.
    return 1 if ptr == 0 else ptr


# --------------------------------------------------------------------------
# Streams.

_local = threading.local()


def _stream_ptr(s) -> int:
    """A CUDA stream handle from an int, torch.cuda.Stream, cupy Stream,
    cbi.Stream or an object with __cuda_stream__."""
    if s is None:
        return 0
    if isinstance(s, bool):
        raise TypeError("stream= takes a CUDA stream, not a bool")
    if isinstance(s, int):
        return s
    if hasattr(s, "__cuda_stream__"):
        return int(s.__cuda_stream__()[1])
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(s, attr, None)
        if isinstance(v, int):
            return v
    raise TypeError(f"stream= takes an int handle, a torch.cuda.Stream, a cupy.cuda.Stream or an object with "
                    f"__cuda_stream__, not {type(s).__name__}")


@contextlib.contextmanager
def stream(s):
    """Runs cbi's device work inside the block on stream ``s`` (a torch or
    CuPy stream, an int handle or anything with ``__cuda_stream__``),
    instead of the input library's current stream. Nests; thread-local."""
    stack = getattr(_local, "streams", None)
    if stack is None:
        stack = _local.streams = []
    stack.append((s, _stream_ptr(s)))
    try:
        yield s
    finally:
        stack.pop()


def synchronize() -> None:
    """Waits for all device work cbi enqueued and lets go of the arrays it
    kept alive for it."""
    _core.synchronize()


def _choose_stream(kind: _Kind, x, explicit) -> int:
    if explicit is not None:
        return _stream_ptr(explicit)
    stack = getattr(_local, "streams", None)
    if stack:
        return stack[-1][1]
    return kind.current_stream(kind.device_index(x))


# --------------------------------------------------------------------------
# Pipelines.

def _output_shape(shape, channels):
    """HxW in, HxW out for 1 channel; HxWxC (C > 1) to 1 channel gives HxW, as
    cv2.cvtColor(..., COLOR_BGR2GRAY) does; NxHxWxC keeps its 4 dimensions."""
    if len(shape) == 2 or (len(shape) == 3 and channels == 1 and shape[2] != 1):
        return (shape[0], shape[1]) if channels == 1 else (shape[0], shape[1], channels)
    return tuple(shape[:-1]) + (channels,)


def _check_format(kind: _Kind, x):
    dtype = kind.dtype(x)
    if dtype not in _DTYPES:
        fix = "x.astype(np.float32)" if dtype.startswith("float") else "x.astype(np.uint16) or x.astype(np.uint8)"
        raise TypeError(f"cbi takes uint8, uint16 or float32 images, not {dtype}: convert with {fix} "
                        f"(native byte order)")
    shape = tuple(kind.shape(x))
    if len(shape) not in (2, 3, 4):
        raise InvalidArgument(f"an image has 2 (HxW), 3 (HxWxC) or 4 (NxHxWxC) dimensions, not {len(shape)} "
                              f"(shape {shape})")
    channels = 1 if len(shape) == 2 else shape[-1]
    if channels not in (1, 3, 4):
        raise InvalidArgument(f"an image of shape {shape} has {channels} channels; cbi takes 1, 3 or 4, channels last "
                              f"(CHW data: x.transpose(1, 2, 0) as a copy, or one plane at a time)")
    if 0 in shape:
        raise InvalidArgument(f"an image of shape {shape} is empty")
    return shape, channels


class Pipeline:
    """A pipeline compiled once: ``cbi.Pipeline("color:gray | gaussian:5 | sobel:mag")``.

    ``text`` is pipeline text (stages ``FILTER[@SCHEDULE]`` separated by
    ``|``, as ``cbi-filter --pipeline``) or a JSON graph (as
    ``--pipeline-file``); ``border`` and ``schedule`` are the defaults of
    nodes that name none. Callable on images of any size and format, from
    many threads at once (a bounded pool of executors per format). A graph
    with several outputs returns a tuple in its output order.
    """

    def __init__(self, text: str, *, border: Optional[str] = None, schedule: Optional[str] = None,
                 device: Optional[str] = None):
        if isinstance(text, _core._Pipeline):
            self._p = text
        else:
            if not isinstance(text, str):
                raise TypeError(f"Pipeline takes pipeline text or JSON, not {type(text).__name__}")
            self._p = _core._Pipeline.from_text(text, border, schedule)
        self.device = device
        self._channels = {}  # input channels -> output channels, per output
        # (kind, dtype, dimensions, channels) -> (channels, output
        # channels): formats already checked, so a call repeats no checks.
        self._formats = {}
        self._order_sensitive = self._p.order_sensitive

    @classmethod
    def from_json(cls, path, *, border: Optional[str] = None, schedule: Optional[str] = None,
                  device: Optional[str] = None) -> "Pipeline":
        """A pipeline from a JSON file (or JSON text), as ``cbi-filter --pipeline-file``."""
        text = str(path)
        if text.lstrip().startswith("{"):
            return cls(text, border=border, schedule=schedule, device=device)
        return cls(_core._Pipeline.from_file(text, border, schedule), device=device)

    def __str__(self) -> str:
        return self._p.text

    def __repr__(self) -> str:
        return f"cbi.Pipeline({self._p.text!r})"

    @property
    def json(self) -> str:
        """The graph as JSON (``--pipeline-file`` form)."""
        return self._p.json

    @property
    def halo(self) -> int:
        """Pixels beyond a tile that its outputs depend on (the sum of the
        stencils' radii along the longest path): tiles overlapped by this
        much give the whole-image result (``dask.array.map_overlap(p,
        depth=p.halo, boundary="none")``). Raises cbi.Unsupported when a
        node depends on the whole image (``threshold`` with ``otsu``)."""
        return self._p.halo

    @property
    def outputs(self) -> List[str]:
        """The names of the graph's outputs, in the order a call returns them."""
        return list(self._p.output_names)

    def plan(self, shape, dtype="uint8", device: str = "cpu") -> str:
        """The resolved graph for an input of ``shape`` (HxW or HxWxC) and
        ``dtype`` on ``device``: schedules, fusions, buffers
        (``cbi-filter --print-pipeline``). Allocates nothing."""
        shape = tuple(shape)
        if len(shape) not in (2, 3):
            raise InvalidArgument(f"plan takes an HxW or HxWxC shape, not {shape}")
        channels = 1 if len(shape) == 2 else shape[2]
        return self._p.plan(shape[0], shape[1], channels, _dtype_name(dtype), device)

    def __call__(self, x, *, out=None, order: str = "bgr", device: Optional[str] = None, stream=None,
                 as_dict: bool = False):
        """Runs on ``x``; returns the output (a tuple for several outputs,
        a dict by name with ``as_dict``), allocated by ``x``'s library on
        its device, or writes into ``out`` and returns it.

        ``order``: ``"bgr"`` (OpenCV's, the default) or ``"rgb"`` (PIL,
        torchvision): only colour matrices care. ``device``: for host data,
        ``"cpu"`` (default) or ``"cuda[:N]"`` (synchronous); device data
        runs on its own device. ``stream``: for device data, the CUDA stream
        to run on (default: ``with cbi.stream(s)``, else the input library's
        current stream); the call returns without waiting.
        """
        outs = _run(self, x, out, order, device if device is not None else self.device, stream)
        if as_dict:
            return dict(zip(self._p.output_names, outs))
        if out is not None:
            return out
        return outs[0] if len(outs) == 1 else tuple(outs)

    def run_folder(self, input_dir, output_dir=None, *, pattern: str = "", recursive: bool = False,
                   format: str = "same", jobs: int = 0, in_flight: int = 0, skip_existing: bool = False,
                   device: str = "auto", codec: str = "auto", quality: int = 0, png_compression: int = -1,
                   strip: bool = False, max_pixels: int = 1 << 28, in_place: bool = False,
                   progress=None) -> "BatchSummary":
        """Batch mode (``cbi-filter --input-dir IN --output-dir OUT``): every
        image in ``input_dir`` (``pattern`` a glob, ``recursive``) through
        the pipeline into ``output_dir`` (``format``: same, png, jpg, tiff),
        with read, filter and write overlapped. Outputs are written
        atomically; ``skip_existing`` keeps outputs already there. ``device``:
        auto, cpu, cuda, cuda:N, cuda:0,1 or cuda:all; ``codec``: auto, cpu
        or gpu (JPEG on the GPU). ``progress``: True prints a line per file
        to stderr, a callable gets a dict per file (raising in it cancels).

        Per-file failures are results (``summary.failed``,
        ``summary.raise_for_failures()``). Ctrl-C cancels cleanly (no new
        image, no temporaries left) and raises KeyboardInterrupt with the
        summary as its ``.summary``.
        """
        if progress is True:
            def progress(p):
                print(f"cbi: {p['done']}/{p['total']} {p['input']}", file=sys.stderr)
        elif progress is False:
            progress = None
        d = self._p.run_folder(str(input_dir), "" if output_dir is None else str(output_dir), pattern, recursive,
                               format, jobs, in_flight, skip_existing, device, codec, quality, png_compression,
                               strip, max_pixels, in_place, progress)
        return BatchSummary._from(d)

    def clear_cache(self) -> None:
        """Frees this pipeline's idle executors and their buffers."""
        self._p.clear()


def _dtype_name(dtype) -> str:
    if isinstance(dtype, str):
        return dtype.replace("torch.", "")
    name = getattr(dtype, "name", None) or getattr(dtype, "__name__", None)
    if isinstance(name, str):
        return name
    return str(dtype).replace("torch.", "")


def _as_list(out, count):
    if isinstance(out, (tuple, list)):
        outs = list(out)
    else:
        outs = [out]
    if len(outs) != count:
        raise InvalidArgument(f"the pipeline has {count} output{'s' if count != 1 else ''}; out= gives {len(outs)}")
    return outs


def _format_of(pipe: Pipeline, kind: _Kind, x, shape):
    """(channels, output channels) of x, checked once per format (_run
    looks in pipe._formats first)."""
    key = kind.format_key(x)
    _, channels = _check_format(kind, x)
    out_channels = pipe._channels.get(channels)
    if out_channels is None:
        out_channels = pipe._channels[channels] = pipe._p.output_channels(channels)
    fmt = (channels, out_channels)
    if key is not None and len(pipe._formats) < 64:
        pipe._formats[(kind, key, len(shape), shape[-1] if len(shape) > 2 else 0)] = fmt
    return fmt


def _run(pipe: Pipeline, x, out, order, device, stream_arg):
    if order != "bgr" and order != "rgb":
        raise InvalidArgument(f"order={order!r}: 'bgr' (OpenCV's) or 'rgb' (PIL, torchvision)")
    kind = _KIND_OF_TYPE.get(type(x)) or _kind_of(x)
    shape = kind.shape(x)
    # The last extent is the channel count from 3 dimensions on; HxW images share one entry.
    fmt = pipe._formats.get((kind, kind.format_key(x), len(shape), shape[-1] if len(shape) > 2 else 0))
    if fmt is None:
        fmt = _format_of(pipe, kind, x, shape)
    elif 0 in shape:
        raise InvalidArgument(f"an image of shape {tuple(shape)} is empty")
    channels, out_channels = fmt
    p = pipe._p
    if out is None:
        outs = [kind.empty(_output_shape(shape, c), x) for c in out_channels]
    elif type(out) is type(x) and len(out_channels) == 1:
        outs = [out]  # the same kind; the core checks dtype, format and device
    else:
        outs = _as_list(out, len(out_channels))
        for o in outs:
            ok = _kind_of(o)
            if ok is not kind and not (kind in (_BUFFER, _KINDS["numpy"]) and ok in (_BUFFER, _KINDS["numpy"])):
                raise TypeError(f"out= is a {ok.name} array, the input a {kind.name} array; pass the same kind")
            if ok.dtype(o) != kind.dtype(x):
                raise TypeError(f"out= has dtype {ok.dtype(o)}, the input {kind.dtype(x)}; they must match")
    # Channel order: only colour matrices care; RGB data is swapped to
    # OpenCV's BGR around the call (copies, by the array's own library).
    swap = order == "rgb" and channels >= 3 and pipe._order_sensitive
    if swap:
        src = kind.swap_rb(x)
        targets = [kind.empty(kind.shape(o), o) if c >= 3 else o for o, c in zip(outs, out_channels)]
    else:
        src, targets = x, outs

    if kind.passthrough:  # host arrays, synchronous: the arrays are their own handles
        if stream_arg is not None:
            raise InvalidArgument("stream= is for device data; host data runs synchronously")
        p.run(src, targets, device or "", 0, None)
    else:
        cuda = kind.is_cuda(x)
        stream_ptr = 0
        if cuda:
            stream_ptr = _choose_stream(kind, x, stream_arg)
        elif stream_arg is not None:
            raise InvalidArgument("stream= is for device data; host data runs synchronously")
        handles_in = kind.handle(src, stream_ptr)
        handles_out = [_kind_of(t).handle(t, stream_ptr) for t in targets]
        dev = device or ""
        if cuda and dev == "cpu":
            raise InvalidArgument(f"the input is on cuda:{kind.device_index(x)}; device='cpu' would need a copy: "
                                  f"move it first (x.cpu() / cupy.asnumpy(x))")
        p.run(handles_in, handles_out, dev, stream_ptr, (x, src, outs, targets) if cuda else None)
    if swap:
        for o, t, c in zip(outs, targets, out_channels):
            if c >= 3:
                kind.assign(o, kind.swap_rb(t))
    return outs


# --------------------------------------------------------------------------
# Batch results.

@dataclass
class BatchItem:
    """One file of a batch: ``status`` is processed, failed, skipped,
    cancelled or elsewhere; ``error`` names the file and the reason."""
    input: str
    output: str
    status: str
    error: str = ""
    warning: str = ""
    read_s: float = 0.0
    process_s: float = 0.0
    write_s: float = 0.0


@dataclass
class BatchSummary:
    """What ``Pipeline.run_folder`` did."""
    items: List[BatchItem] = field(default_factory=list)
    processed: int = 0
    failed: int = 0
    skipped: int = 0
    cancelled: int = 0
    wall_s: float = 0.0
    images_per_s: float = 0.0
    jobs: int = 0
    in_flight: int = 0
    devices: List[dict] = field(default_factory=list)

    @classmethod
    def _from(cls, d: dict) -> "BatchSummary":
        items = [BatchItem(**i) for i in d["items"]]
        return cls(items=items, **{k: v for k, v in d.items() if k != "items"})

    @property
    def errors(self) -> List[tuple]:
        """(input, error) of every failed file."""
        return [(i.input, i.error) for i in self.items if i.status == "failed"]

    def raise_for_failures(self) -> None:
        """Raises cbi.Error listing the failed files, if any."""
        if self.failed:
            raise Error(f"{self.failed} file(s) failed: " + "; ".join(e for _, e in self.errors))


# --------------------------------------------------------------------------
# Module functions.

def clear_cache() -> None:
    """Frees every pipeline's idle executors (and their buffers) and the
    pipelines the eager functions compiled."""
    _compiled.cache_clear()
    for f in _EAGER.values():
        f.cache_clear()
    _core.clear_cache()


def filter_kinds() -> List[dict]:
    """The filter kinds (name, form, params, help, opencv, category), as
    ``cbi-filter --list-filters``; one eager function per kind."""
    return [dict(k) for k in _core.filter_kinds()]


def schedules() -> List[dict]:
    """The schedule registry: name, form, description, examples."""
    return [dict(s) for s in _core.schedules()]


def devices() -> List[str]:
    """'cpu' and each usable CUDA device ('cuda:N'). Starts the CUDA runtime."""
    return list(_core.devices())


def built_with_cuda() -> bool:
    """Whether this build has the CUDA backend."""
    return _core.built_with_cuda()


def set_num_threads(threads: int) -> None:
    """Runs cbi's CPU work on at most ``threads`` threads (as ``cbi-filter
    --threads`` and ``cv2.setNumThreads``); 0 lifts the limit (all cores).
    Process-wide; results do not depend on it."""
    _core.set_num_threads(int(threads))


def get_num_threads() -> int:
    """The most threads cbi's CPU work runs on now."""
    return _core.get_num_threads()


def warm_up(device: str = "cuda") -> None:
    """Starts ``device`` (its CUDA context, a few hundred ms) now, off the
    hot path."""
    _core.warm_up(device)


# --------------------------------------------------------------------------
# Eager functions, one per filter kind, generated from the kind list.

@functools.lru_cache(maxsize=128)
def _compiled(text: str, border: Optional[str], schedule: Optional[str]) -> Pipeline:
    return Pipeline(text, border=border, schedule=schedule)


def _arg_text(kind: str, name: str, v) -> str:
    if isinstance(v, bool):
        raise InvalidArgument(f"{kind}: {name}={v!r} is not a number or name")
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        return repr(float(v))
    if isinstance(v, str):
        text = v
    elif name in ("ksize", "size") and isinstance(v, Sequence) and len(v) == 2 and \
            all(isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in v):
        # cv2's (width, height): one side where they agree, else the WxH the kind's form takes or refuses.
        w, h = int(v[0]), int(v[1])
        text = str(w) if w == h else f"{w}x{h}"
    elif name == "size" and (hasattr(v, "tolist") or isinstance(v, Sequence)) and _is_rows(v):
        # cv2.erode's kernel: a rectangle of ones is that size (a cross or an ellipse is named by its shape).
        rows = v.tolist() if hasattr(v, "tolist") else [list(r) for r in v]
        h, w = len(rows), len(rows[0]) if rows else 0
        if not h or not w or any(len(r) != w or any(e != 1 for e in r) for r in rows):
            raise InvalidArgument(f"{kind}: a structuring element array must be all ones (a rectangle); pass the "
                                  f"size and shape for the others ({kind}(x, 5, 'ellipse'), {kind}(x, '7x5', 'cross'))")
        text = str(w) if w == h else f"{w}x{h}"
    elif isinstance(v, Sequence) or hasattr(v, "tolist"):
        # A matrix as the pipeline form writes it: rows separated by ';', numbers by ',' (a 2-D array, as
        # cv2.filter2D's kernel, a Kx1 one K rows; a pair of taps, as sepFilter2D's kx and ky, each row
        # flattened, so a Kx1 column there is one row; a colour matrix), a 1-D sequence one row.
        values = v.tolist() if hasattr(v, "tolist") else v
        if not isinstance(values, (list, tuple)):
            return _arg_text(kind, name, values)

        def flat(row):
            row = row.tolist() if hasattr(row, "tolist") else row
            if isinstance(row, (list, tuple)):
                return [f for item in row for f in flat(item)]
            return [row]

        nested = any(isinstance(r, (list, tuple)) or hasattr(r, "tolist") for r in values)
        rows = [flat(r) for r in values] if nested else [list(values)]
        text = ";".join(",".join(_arg_text(kind, name, f) for f in row) for row in rows)
    else:
        raise InvalidArgument(f"{kind}: {name}={v!r} is not a number, name or matrix")
    if any(c in text for c in ":|@{}") or not text:
        raise InvalidArgument(f"{kind}: {name}={v!r} is not a valid argument")
    return text


def _is_rows(v) -> bool:
    """Whether v is 2-D: rows of numbers (a NumPy array of 2 dimensions, or a sequence of sequences)."""
    ndim = getattr(v, "ndim", None)
    if ndim is not None:
        return ndim == 2
    return len(v) > 0 and all(isinstance(r, Sequence) and not isinstance(r, str) for r in v)


def _make_eager(info: dict):
    name = info["name"]
    params = info["params"].split()

    memo: dict = {}  # (args, kwargs, border, schedule) -> compiled pipeline: the text is built once

    def eager(x, *args, border: Optional[str] = None, schedule: Optional[str] = None, out=None,
              order: str = "bgr", device: Optional[str] = None, stream=None, **kwargs):
        # The types are in the key: 3 and 3.0 (or True) hash alike but
        # make different text.
        if kwargs or border is not None or schedule is not None:
            key = (args, tuple(map(type, args)), tuple(kwargs.items()), border, schedule)
        else:
            key = (args, tuple(map(type, args)))
        try:
            pipe = memo.get(key)
        except TypeError:  # an unhashable argument (a matrix as a list)
            key = pipe = None
        if pipe is None:
            pipe = _eager_pipeline(args, kwargs, border, schedule)
            if key is not None:
                if len(memo) >= 256:
                    memo.clear()
                memo[key] = pipe
        outs = _run(pipe, x, out, order, device if device is not None else pipe.device, stream)
        if out is not None:
            return out
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _eager_pipeline(args, kwargs, border, schedule):
        if len(args) > len(params):
            raise TypeError(f"{name}() takes at most {len(params)} filter argument(s) ({', '.join(params)}), "
                            f"{len(args)} given")
        values: List[Any] = list(args) + [None] * (len(params) - len(args))
        for k, v in kwargs.items():
            if k not in params:
                raise TypeError(f"{name}() got an unexpected keyword argument {k!r} (its arguments: "
                                f"{', '.join(params) or 'none'})")
            i = params.index(k)
            if i < len(args):
                raise TypeError(f"{name}() got multiple values for argument {k!r}")
            values[i] = v
        while values and values[-1] is None:
            values.pop()
        for i, v in enumerate(values):
            if v is None:
                later = next(params[j] for j in range(i + 1, len(values)) if values[j] is not None)
                raise InvalidArgument(f"{name}: {later} given without {params[i]} (the form is {info['form']})")
        text = name + "".join(":" + _arg_text(name, params[i], v) for i, v in enumerate(values))
        return _compiled(text, border, schedule)

    eager.cache_clear = memo.clear

    eager.__name__ = eager.__qualname__ = name
    eager.__module__ = __name__
    sig_params = [inspect.Parameter("x", inspect.Parameter.POSITIONAL_ONLY)]
    sig_params += [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None) for p in params]
    for kw, default in (("border", None), ("schedule", None), ("out", None), ("order", "bgr"), ("device", None),
                        ("stream", None)):
        sig_params.append(inspect.Parameter(kw, inspect.Parameter.KEYWORD_ONLY, default=default))
    eager.__signature__ = inspect.Signature(sig_params)
    eager.__doc__ = (
        f"{info['help']}.\n\n"
        f"Pipeline form ``{info['form']}`` (arguments {', '.join(params) or 'none'}, in that order; trailing ones "
        f"may be left out). OpenCV: ``{info['opencv']}``.\n\n"
        f"``x``: HxW, HxWxC (C 1, 3, 4) or NxHxWxC; uint8, uint16 or float32; NumPy, CuPy or torch (the result is "
        f"the same kind, on the same device). ``border``: default OpenCV's for the function; reflect101 (OpenCV's BORDER_REFLECT_101, "
        f"SciPy 'mirror'), reflect (BORDER_REFLECT, SciPy 'reflect'), replicate, constant[:V], wrap. "
        f"``schedule``: a registered schedule, 'auto' or None (the default table). ``out``: written in place and "
        f"returned. ``order``: 'bgr' (OpenCV) or 'rgb' (PIL, torchvision). ``device``: for host data, 'cpu' or "
        f"'cuda[:N]'. ``stream``: for device data, the CUDA stream (default: the input library's current one).")
    return eager


def _install_eager():
    module = sys.modules[__name__]
    names = []
    for info in _core.filter_kinds():
        name = info["name"]
        if not name.isidentifier() or (hasattr(module, name) and name not in _EAGER):
            continue  # never shadows a module attribute
        f = _make_eager(dict(info))
        _EAGER[name] = f
        setattr(module, name, f)
        names.append(name)
    # cbi.open is there, but `from cbi import *` must not shadow the builtin open.
    __all__.extend(n for n in names if n not in __all__ and not hasattr(builtins, n))


_EAGER: dict = {}
_install_eager()

# Device arrays cbi still holds for work in flight are let go while the
# interpreter is alive.
import atexit  # noqa: E402

atexit.register(_core.synchronize)
