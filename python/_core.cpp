// cbi._core: the pipeline layer for Python (pybind11), as thin as the CLI.
//
// What lives here: taking arrays (the buffer protocol, DLPack capsules, a
// CUDA array interface tuple the Python side reads) as ImageViews without a
// copy, a pool of GraphExecutors per pipeline and format, running them with
// the GIL released (GraphExecutor::run_into on host data, ::enqueue on the
// caller's CUDA stream for device data), keeping device inputs and outputs
// alive until their work is done, batch mode, and C++ exceptions as typed
// Python ones. What does not: which library an array comes from, which
// stream it is on, allocating outputs (python/cbi/__init__.py).
//
// Builds with pybind11 2.10 (Debian 12) and 3.x; no pybind11/numpy.h (it
// breaks with NumPy 2 before pybind11 2.12), no py::native_enum, no
// py::set_error.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "filters/filter.hpp"
#include "pipeline/batch.hpp"
#include "pipeline/error.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/graph.hpp"
#include "pipeline/image.hpp"

#if CBI_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace py = pybind11;

namespace {

// ---------------------------------------------------------------------------
// Filter kinds: the library's list (filters/kinds/all.hpp), one eager
// function each on the Python side.
py::list filter_kinds() {
    py::list out;
    for (const cbi::FilterKindInfo& k : cbi::filter_kinds()) {
        py::dict d;
        d["name"] = std::string(k.name);
        d["form"] = std::string(k.form);
        d["params"] = std::string(k.params);
        d["help"] = std::string(k.help);
        d["opencv"] = std::string(k.opencv);
        d["category"] = std::string(cbi::category_name(k.category));
        out.append(d);
    }
    return out;
}

// ---------------------------------------------------------------------------
// Exceptions: classes made here (several bases each), raised by one translator.
PyObject* g_error = nullptr;          // cbi.Error(RuntimeError)
PyObject* g_invalid = nullptr;        // cbi.InvalidArgument(Error, ValueError)
PyObject* g_syntax = nullptr;         // cbi.PipelineSyntaxError(InvalidArgument)
PyObject* g_unsupported = nullptr;    // cbi.Unsupported(Error)
PyObject* g_out_of_memory = nullptr;  // cbi.OutOfMemory(Error, MemoryError)
PyObject* g_device_lost = nullptr;    // cbi.DeviceLost(Error)

PyObject* make_exception(py::module_& m, const char* name, std::initializer_list<PyObject*> bases, const char* doc) {
    py::tuple b(bases.size());
    std::size_t i = 0;
    for (PyObject* base : bases) b[i++] = py::reinterpret_borrow<py::object>(base);
    const std::string qualified = std::string("cbi.") + name;
    PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, b.ptr(), nullptr);
    if (!type) throw py::error_already_set();
    m.attr(name) = py::reinterpret_borrow<py::object>(type);
    return type;
}

// "stage 2 'gaussian:4' (column 13): ..." (parse_pipeline's messages).
void raise_invalid(const std::string& message) {
    static const std::regex where(R"(stage (\d+) '(.*?)' \(column (\d+)\): )");
    std::smatch m;
    if (std::regex_search(message, m, where)) {
        py::object type = py::reinterpret_borrow<py::object>(g_syntax);
        py::object e = type(message);
        e.attr("stage") = std::stoi(m[1].str());
        e.attr("token") = m[2].str();
        e.attr("column") = std::stoi(m[3].str());
        PyErr_SetObject(g_syntax, e.ptr());
        return;
    }
    PyErr_SetString(g_invalid, message.c_str());
}

bool is_out_of_memory(const std::string& message) {
    return message.find("cudaErrorMemoryAllocation") != std::string::npos ||
           message.find("out of memory") != std::string::npos;
}

void translate(std::exception_ptr p) {
    try {
        if (p) std::rethrow_exception(p);
    } catch (const cbi::DeviceLost& e) {
        PyErr_SetString(g_device_lost, e.what());
    } catch (const cbi::Unsupported& e) {
        PyErr_SetString(g_unsupported, e.what());
    } catch (const cbi::Error& e) {
        PyErr_SetString(is_out_of_memory(e.what()) ? g_out_of_memory : g_error, e.what());
    } catch (const std::bad_alloc&) {
        PyErr_SetString(g_out_of_memory, "out of host memory");
    } catch (const std::invalid_argument& e) {
        raise_invalid(e.what());
    } catch (const std::logic_error& e) {
        PyErr_SetString(g_error, e.what());
    }
    // Others (py::error_already_set, pybind11's own): pybind11's translators.
}

// ---------------------------------------------------------------------------
// Arrays. DLPack's legacy ABI (dmlc.github.io/dlpack, v0.6+; every producer
// exports it, and NumPy 1.24 accepts only it).
struct DLDevice {
    std::int32_t device_type;
    std::int32_t device_id;
};
struct DLDataType {
    std::uint8_t code;
    std::uint8_t bits;
    std::uint16_t lanes;
};
struct DLTensor {
    void* data;
    DLDevice device;
    std::int32_t ndim;
    DLDataType dtype;
    std::int64_t* shape;
    std::int64_t* strides;
    std::uint64_t byte_offset;
};
struct DLManagedTensor {
    DLTensor dl_tensor;
    void* manager_ctx;
    void (*deleter)(DLManagedTensor*);
};
constexpr int kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13;
constexpr std::uint8_t kDLUInt = 1, kDLFloat = 2;

// Releases a PEP 3118 buffer (with the GIL held: arrays die in run(), after
// its GIL-free part).
struct BufferRelease {
    void operator()(Py_buffer* view) const {
        PyBuffer_Release(view);
        delete view;
    }
};

// An array as cbi reads it: up to 4 dimensions, strides in bytes.
struct Array {
    std::byte* data = nullptr;
    int ndim = 0;
    std::int64_t shape[4] = {};
    std::int64_t strides[4] = {};
    std::optional<cbi::Depth> depth;
    std::string dtype;  // for messages: "uint8", "float64", ...
    bool cuda = false;
    int device = 0;
    bool readonly = false;
    py::object keep;  // owns what `data` points into (a DLPack capsule of ours, a CAI tuple)
    // A buffer-protocol view, held for the call only: host data runs
    // synchronously, and no Python object is made for it.
    std::unique_ptr<Py_buffer, BufferRelease> buffer;
};

std::string dtype_of(char kind, int bits) {
    return std::string(kind == 'u'   ? "uint"
                       : kind == 'i' ? "int"
                       : kind == 'f' ? "float"
                       : kind == 'c' ? "complex"
                                     : "?") +
           std::to_string(bits);
}
std::optional<cbi::Depth> depth_of(char kind, int bits) {
    if (kind == 'u' && bits == 8) return cbi::Depth::u8;
    if (kind == 'u' && bits == 16) return cbi::Depth::u16;
    if (kind == 'f' && bits == 32) return cbi::Depth::f32;
    return std::nullopt;
}

// PEP 3118: a Py_buffer held until the array's last user lets go.
Array from_buffer(const py::handle& obj, bool writable) {
    auto* view = new Py_buffer();
    const int flags = PyBUF_RECORDS_RO | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj.ptr(), view, flags) != 0) {
        delete view;
        if (writable && PyObject_CheckBuffer(obj.ptr())) {
            PyErr_Clear();
            throw std::invalid_argument("out= is read-only; pass a writable array");
        }
        throw py::error_already_set();
    }
    Array a;
    a.buffer.reset(view);
    a.data = static_cast<std::byte*>(view->buf);
    a.readonly = view->readonly != 0;
    a.ndim = view->ndim;
    if (a.ndim < 2 || a.ndim > 4)
        throw std::invalid_argument("an image has 2 (HxW), 3 (HxWxC) or 4 (NxHxWxC) dimensions, not " +
                                    std::to_string(a.ndim));
    for (int i = 0; i < a.ndim; ++i) {
        a.shape[i] = view->shape[i];
        a.strides[i] = view->strides[i];
    }
    const char* f = view->format ? view->format : "B";
    // NumPy's native uint8, uint16 and float32, the usual formats, without the general parse below.
    if (f[0] != '\0' && f[1] == '\0' && (f[0] == 'B' || f[0] == 'H' || f[0] == 'f')) {
        const bool u8 = f[0] == 'B' && view->itemsize == 1, u16 = f[0] == 'H' && view->itemsize == 2,
                   f32 = f[0] == 'f' && view->itemsize == 4;
        if (u8 || u16 || f32) {
            a.depth = u8 ? cbi::Depth::u8 : u16 ? cbi::Depth::u16 : cbi::Depth::f32;
            a.dtype = u8 ? "uint8" : u16 ? "uint16" : "float32";
            return a;
        }
    }
    std::string fmt = f;
    char order = '@';
    if (!fmt.empty() && std::strchr("@=<>!", fmt[0])) {
        order = fmt[0];
        fmt.erase(0, 1);
    }
    const bool big = order == '>' || order == '!';
    char kind = '?';
    int bits = static_cast<int>(view->itemsize) * 8;
    if (fmt == "B")
        kind = 'u';
    else if (fmt == "H")
        kind = 'u';
    else if (fmt == "I" || fmt == "L" || fmt == "Q")
        kind = 'u';
    else if (fmt == "b" || fmt == "h" || fmt == "i" || fmt == "l" || fmt == "q")
        kind = 'i';
    else if (fmt == "f" || fmt == "d" || fmt == "e")
        kind = 'f';
    else if (fmt == "?")
        kind = 'b';
    a.dtype = kind == 'b'   ? "bool"
              : kind == '?' ? "format '" + std::string(view->format ? view->format : "") + "'"
                            : dtype_of(kind, bits);
    if (big && bits > 8) {
        a.dtype = ">" + a.dtype;
        return a;  // depth stays empty: a TypeError naming the byte order
    }
    a.depth = depth_of(kind, bits);
    return a;
}

// A DLPack capsule ("dltensor"), consumed: renamed "used_dltensor" and its
// tensor released (its deleter called) when the array's last user lets go.
Array from_dlpack(const py::handle& capsule) {
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
    if (!managed) {
        PyErr_Clear();
        throw py::type_error("expected a DLPack capsule named 'dltensor' (an unused __dlpack__() result)");
    }
    if (PyCapsule_SetName(capsule.ptr(), "used_dltensor") != 0) throw py::error_already_set();
    Array a;
    a.keep = py::capsule(managed, [](void* p) {
        auto* m = static_cast<DLManagedTensor*>(p);
        if (m->deleter) m->deleter(m);
    });
    const DLTensor& t = managed->dl_tensor;
    const int type = t.device.device_type;
    if (type != kDLCPU && type != kDLCUDA && type != kDLCUDAHost && type != kDLCUDAManaged)
        throw cbi::Unsupported("array",
                               "DLPack device type " + std::to_string(type) + " (cbi takes CPU and CUDA memory)");
    a.cuda = type == kDLCUDA || type == kDLCUDAManaged;
    a.device = t.device.device_id;
    a.ndim = t.ndim;
    if (a.ndim < 2 || a.ndim > 4)
        throw std::invalid_argument("an image has 2 (HxW), 3 (HxWxC) or 4 (NxHxWxC) dimensions, not " +
                                    std::to_string(a.ndim));
    const int bytes = t.dtype.bits / 8;
    const char kind = t.dtype.code == kDLUInt ? 'u' : t.dtype.code == kDLFloat ? 'f' : t.dtype.code == 0 ? 'i' : '?';
    a.dtype = t.dtype.code == 6 ? "bool" : dtype_of(kind, t.dtype.bits);
    if (t.dtype.lanes == 1) a.depth = depth_of(kind, t.dtype.bits);
    std::int64_t contiguous = bytes;
    for (int i = a.ndim - 1; i >= 0; --i) {
        a.shape[i] = t.shape[i];
        a.strides[i] = t.strides ? t.strides[i] * bytes : contiguous;
        contiguous *= t.shape[i];
    }
    a.data = static_cast<std::byte*>(t.data) + t.byte_offset;
    return a;
}

// ("cai", ptr, shape, strides or None, typestr, device, readonly): the CUDA
// array interface as the Python side read it.
Array from_cai(const py::tuple& t) {
    Array a;
    a.cuda = true;
    a.data = reinterpret_cast<std::byte*>(t[1].cast<std::uintptr_t>());
    const auto shape = t[2].cast<std::vector<std::int64_t>>();
    const std::string typestr = t[4].cast<std::string>();
    a.device = t[5].cast<int>();
    a.readonly = t[6].cast<bool>();
    a.keep = py::reinterpret_borrow<py::object>(t);
    a.ndim = static_cast<int>(shape.size());
    if (a.ndim < 2 || a.ndim > 4)
        throw std::invalid_argument("an image has 2 (HxW), 3 (HxWxC) or 4 (NxHxWxC) dimensions, not " +
                                    std::to_string(a.ndim));
    if (typestr.size() < 3) throw py::type_error("bad __cuda_array_interface__ typestr '" + typestr + "'");
    const int bits = std::stoi(typestr.substr(2)) * 8;
    a.dtype = dtype_of(typestr[1], bits);
    if (typestr[0] == '>' && bits > 8)
        a.dtype = ">" + a.dtype;
    else
        a.depth = depth_of(typestr[1], bits);
    std::int64_t contiguous = bits / 8;
    std::vector<std::int64_t> strides;
    if (!t[3].is_none()) strides = t[3].cast<std::vector<std::int64_t>>();
    for (int i = a.ndim - 1; i >= 0; --i) {
        a.shape[i] = shape[i];
        a.strides[i] = strides.empty() ? contiguous : strides[i];
        contiguous *= shape[i];
    }
    return a;
}

Array to_array(const py::handle& obj, bool writable) {
    if (PyCapsule_CheckExact(obj.ptr())) return from_dlpack(obj);
    if (py::isinstance<py::tuple>(obj)) {
        auto t = py::reinterpret_borrow<py::tuple>(obj);
        if (t.size() == 7 && py::isinstance<py::str>(t[0]) && t[0].cast<std::string>() == "cai") return from_cai(t);
    }
    if (!PyObject_CheckBuffer(obj.ptr()))
        throw py::type_error(std::string("cbi takes NumPy, CuPy or torch arrays (the buffer protocol, __dlpack__ or "
                                         "__cuda_array_interface__), not ") +
                             Py_TYPE(obj.ptr())->tp_name);
    return from_buffer(obj, writable);
}

// The images of an array: N views (N = 1 for HxW and HxWxC), or a typed
// error that names the fix.
struct Images {
    std::vector<cbi::ImageView> views;
    int channels = 1;
};

Images images_of(const Array& a, const char* what) {
    if (!a.depth)
        throw py::type_error(
            std::string(what) + " has dtype " + a.dtype +
            "; cbi takes uint8, uint16 or float32 (convert with .astype(np.float32) or np.uint8/np.uint16"
            ", native byte order)");
    const cbi::Depth depth = *a.depth;
    const std::int64_t item = static_cast<std::int64_t>(cbi::depth_bytes(depth));
    std::int64_t n = 1, h, w, c = 1, sn = 0, sy, sx, sc = item;
    if (a.ndim == 2) {
        h = a.shape[0], w = a.shape[1], sy = a.strides[0], sx = a.strides[1];
    } else if (a.ndim == 3) {
        h = a.shape[0], w = a.shape[1], c = a.shape[2], sy = a.strides[0], sx = a.strides[1], sc = a.strides[2];
    } else {
        n = a.shape[0], h = a.shape[1], w = a.shape[2], c = a.shape[3];
        sn = a.strides[0], sy = a.strides[1], sx = a.strides[2], sc = a.strides[3];
    }
    const auto shape = [&] {  // for messages only
        std::string s = "(";
        for (int i = 0; i < a.ndim; ++i) s += (i ? ", " : "") + std::to_string(a.shape[i]);
        return s + (a.ndim == 1 ? ",)" : ")");
    };
    if (c != 1 && c != 3 && c != 4)
        throw std::invalid_argument(std::string(what) + " of shape " + shape() + " has " + std::to_string(c) +
                                    " channels; cbi takes 1, 3 or 4 (HxW, HxWxC or NxHxWxC, channels last: for CHW "
                                    "data pass x.transpose(1, 2, 0) as a copy, or one plane at a time)");
    if (n < 1 || h < 1 || w < 1) throw std::invalid_argument(std::string(what) + " of shape " + shape() + " is empty");
    if (h > INT32_MAX || w > INT32_MAX)
        throw std::invalid_argument(std::string(what) + " of shape " + shape() + " is too large");
    // Strides of size-1 dimensions say nothing (NumPy may give any value).
    if (c > 1 && sc != item)
        throw std::invalid_argument(std::string(what) + " of shape " + shape() +
                                    " has non-contiguous channels (channel stride " + std::to_string(sc) +
                                    " bytes); cbi takes interleaved pixels: pass np.ascontiguousarray(x) (torch: "
                                    "x.contiguous(), CuPy: cupy.ascontiguousarray(x))");
    if (w > 1 && sx != c * item)
        throw std::invalid_argument(std::string(what) + " of shape " + shape() + " has a pixel stride of " +
                                    std::to_string(sx) + " bytes, not " + std::to_string(c * item) +
                                    " (a column step or channel slice); rows may be strided but pixels must be packed: "
                                    "pass np.ascontiguousarray(x) (torch: x.contiguous())");
    const std::int64_t row_bytes = w * c * item;
    if (h > 1 && (sy < row_bytes || sy % item != 0))
        throw std::invalid_argument(std::string(what) + " of shape " + shape() + " has a row stride of " +
                                    std::to_string(sy) +
                                    " bytes (negative, overlapping or not a multiple of the sample size); pass "
                                    "np.ascontiguousarray(x) (torch: x.contiguous())");
    if (h == 1) sy = row_bytes;
    if (n > 1 && sn < sy * (h - 1) + row_bytes)
        throw std::invalid_argument(std::string(what) + " of shape " + shape() +
                                    " has overlapping or negative image strides; pass np.ascontiguousarray(x)");
    if (reinterpret_cast<std::uintptr_t>(a.data) % item != 0)
        throw std::invalid_argument(std::string(what) + " is not aligned to its sample size; pass a copy");
    Images out;
    out.channels = static_cast<int>(c);
    out.views.reserve(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
        out.views.push_back({a.data + i * sn, static_cast<int>(w), static_cast<int>(h), static_cast<int>(c), depth,
                             static_cast<std::size_t>(sy)});
    return out;
}

// ---------------------------------------------------------------------------
// Testing hooks (cbi._core._testing): what the last run on this thread read
// and wrote, and the executor allocations over all pipelines.
struct LastRun {
    std::uintptr_t input = 0;
    std::vector<std::uintptr_t> outputs;
};
thread_local LastRun t_last;
std::atomic<std::size_t> g_allocations{0};
std::atomic<std::size_t> g_executors{0};

// ---------------------------------------------------------------------------
// CUDA: device guard, stream waits, and keeping device arrays alive until
// the work that uses them is done.
#if CBI_HAVE_CUDA
void check(cudaError_t status, const char* what) {
    if (status != cudaSuccess) throw cbi::Error(std::string("CUDA ") + what, cudaGetErrorName(status));
}
struct DeviceGuard {
    int previous = -1;
    explicit DeviceGuard(int device) {
        check(cudaGetDevice(&previous), "cudaGetDevice");
        if (previous != device) check(cudaSetDevice(device), "cudaSetDevice");
    }
    ~DeviceGuard() {
        int now = -1;
        if (cudaGetDevice(&now) == cudaSuccess && now != previous) cudaSetDevice(previous);
    }
};
struct Pending {
    cudaEvent_t done;
    int device;
    py::object keep;
};
// Guarded by the GIL. Never destroyed: at process exit the interpreter is
// gone before static destructors run (cbi/__init__.py drains it at exit).
std::deque<Pending>& g_pending = *new std::deque<Pending>;

// Events of finished runs, per device, reused by the next runs: making and
// destroying one per call is a driver call each (the GIL is held).
std::map<int, std::vector<cudaEvent_t>>& g_free_events = *new std::map<int, std::vector<cudaEvent_t>>;
constexpr std::size_t kMaxFreeEvents = 64;

// An event on `device` (the current one).
cudaEvent_t take_event(int device) {
    std::vector<cudaEvent_t>& free = g_free_events[device];
    if (!free.empty()) {
        const cudaEvent_t e = free.back();
        free.pop_back();
        return e;
    }
    cudaEvent_t e;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    return e;
}
void give_event(cudaEvent_t e, int device) {
    std::vector<cudaEvent_t>& free = g_free_events[device];
    if (free.size() < kMaxFreeEvents)
        free.push_back(e);
    else
        cudaEventDestroy(e);
}

// Drops what finished work held (the GIL is held). `all`: looks at every
// run; otherwise from the oldest up to the first still running, so that a
// call costs no query per run in flight (later runs are let go by a later
// call, or by synchronize()).
void prune_pending(bool all = false) {
    for (auto it = g_pending.begin(); it != g_pending.end();) {
        if (cudaEventQuery(it->done) == cudaSuccess) {
            give_event(it->done, it->device);
            it = g_pending.erase(it);
        } else {
            if (!all) break;
            ++it;
        }
    }
}
#endif

void synchronize() {
#if CBI_HAVE_CUDA
    std::vector<cudaEvent_t> events;
    for (const Pending& p : g_pending) events.push_back(p.done);
    {
        py::gil_scoped_release release;
        for (cudaEvent_t e : events) cudaEventSynchronize(e);
    }
    prune_pending(true);
#endif
}

std::size_t pending_count() {
#if CBI_HAVE_CUDA
    prune_pending(true);
    return g_pending.size();
#else
    return 0;
#endif
}

// Makes `consumer` wait for the work enqueued so far on `producer` (both
// CUDA stream handles, 0 the legacy default stream) on `device`.
void wait_stream(std::uintptr_t consumer, std::uintptr_t producer, int device) {
#if CBI_HAVE_CUDA
    if (consumer == producer) return;
    DeviceGuard guard(device);
    cudaEvent_t e;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    cudaError_t status = cudaEventRecord(e, reinterpret_cast<cudaStream_t>(producer));
    if (status == cudaSuccess) status = cudaStreamWaitEvent(reinterpret_cast<cudaStream_t>(consumer), e, 0);
    cudaEventDestroy(e);
    check(status, "cudaStreamWaitEvent for the input's stream");
#else
    (void)consumer, (void)producer, (void)device;
    throw cbi::Unsupported("stream", "this build of cbi has no CUDA backend");
#endif
}

// ---------------------------------------------------------------------------
// A compiled pipeline: the graph and a pool of executors per (device, format).
struct FormatKey {
    bool cuda;
    int device, width, height, channels;
    cbi::Depth depth;
    auto operator<=>(const FormatKey&) const = default;
};

class ExecutorPool {
public:
    static constexpr std::size_t kMaxFormats = 16;  // LRU: formats kept, each with its idle executors
    static constexpr std::size_t kMaxIdle = 8;      // idle executors per format (threads on one pipeline)

    std::unique_ptr<cbi::GraphExecutor> acquire(const FormatKey& key, const cbi::Graph& graph,
                                                const std::shared_ptr<cbi::TuningCache>& tuning) {
        {
            std::lock_guard lock(mutex_);
            touch(key);
            auto& idle = idle_[key];
            if (!idle.empty()) {
                auto e = std::move(idle.back());
                idle.pop_back();
                return e;
            }
        }
        cbi::RunOptions options;
        options.device = cbi::ResolvedDevice{key.cuda, key.device, ""};
        options.tuning = tuning;
        ++g_executors;
        return std::make_unique<cbi::GraphExecutor>(graph, options);
    }
    void release(const FormatKey& key, std::unique_ptr<cbi::GraphExecutor> e) {
        std::unique_ptr<cbi::GraphExecutor> dropped;  // freed outside the lock
        std::lock_guard lock(mutex_);
        auto it = idle_.find(key);
        if (it == idle_.end() || it->second.size() >= kMaxIdle) {
            dropped = std::move(e);
            return;
        }
        it->second.push_back(std::move(e));
    }
    void clear() {
        std::map<FormatKey, std::vector<std::unique_ptr<cbi::GraphExecutor>>> dropped;
        std::lock_guard lock(mutex_);
        dropped.swap(idle_);
        lru_.clear();
    }
    std::size_t idle_count() {
        std::lock_guard lock(mutex_);
        std::size_t n = 0;
        for (auto& [k, v] : idle_) n += v.size();
        return n;
    }

private:
    void touch(const FormatKey& key) {
        if (!lru_.empty() && lru_.front() == key) return;  // the usual case: the same format again
        const auto it = std::find(lru_.begin(), lru_.end(), key);
        if (it != lru_.end())
            lru_.splice(lru_.begin(), lru_, it);  // no list node made or freed
        else
            lru_.push_front(key);
        while (lru_.size() > kMaxFormats) {
            idle_.erase(lru_.back());
            lru_.pop_back();
        }
    }
    std::mutex mutex_;
    std::map<FormatKey, std::vector<std::unique_ptr<cbi::GraphExecutor>>> idle_;
    std::list<FormatKey> lru_;
};

std::mutex g_pools_mutex;
std::vector<std::weak_ptr<ExecutorPool>> g_pools;

void clear_pools() {
    std::vector<std::shared_ptr<ExecutorPool>> live;
    {
        std::lock_guard lock(g_pools_mutex);
        for (auto& w : g_pools)
            if (auto p = w.lock()) live.push_back(std::move(p));
        g_pools.clear();
        for (auto& p : live) g_pools.push_back(p);
    }
    py::gil_scoped_release release;
    for (auto& p : live) p->clear();
}

std::optional<cbi::ScheduleChoice> schedule_arg(const std::optional<std::string>& s) {
    if (!s) return std::nullopt;
    return cbi::parse_schedule_choice(*s);
}

// The radius of a node's footprint: the pixels it reads beyond the output
// pixel on each side.
int radius(const cbi::NodeOp& op) {
    const auto* f = std::get_if<cbi::Filter>(&op);
    if (!f) return 0;  // the input, blends: pointwise
    const cbi::Footprint fp = cbi::footprint_of(*f);
    return std::max(fp.width, fp.height) / 2;
}

class Pipeline {
public:
    Pipeline(cbi::Graph graph) : graph_(std::move(graph)) {
        graph_.check_complete();
        std::lock_guard lock(g_pools_mutex);
        std::erase_if(g_pools, [](const std::weak_ptr<ExecutorPool>& w) { return w.expired(); });
        g_pools.push_back(pool_);
    }

    static Pipeline from_text(const std::string& text, const std::optional<std::string>& border,
                              const std::optional<std::string>& schedule) {
        const auto first = text.find_first_not_of(" \t\r\n");
        if (first != std::string::npos && text[first] == '{') {
            cbi::Graph g = cbi::graph_from_json(text);
            if (border) g.set_default_border(cbi::parse_border(*border));
            if (schedule) g.set_default_schedule(*schedule_arg(schedule));
            return Pipeline(std::move(g));
        }
        return Pipeline(cbi::parse_pipeline(text, schedule_arg(schedule).value_or(cbi::DefaultSchedule{}),
                                            border ? std::optional(cbi::parse_border(*border)) : std::nullopt));
    }
    static Pipeline from_file(const std::string& path, const std::optional<std::string>& border,
                              const std::optional<std::string>& schedule) {
        cbi::Graph g = cbi::load_pipeline_file(path);
        if (border) g.set_default_border(cbi::parse_border(*border));
        if (schedule) g.set_default_schedule(*schedule_arg(schedule));
        return Pipeline(std::move(g));
    }

    // Pipeline text for a chain, JSON for any other graph.
    std::string text() const {
        const auto& nodes = graph_.nodes();
        const bool chain = graph_.outputs().size() == 1 && graph_.outputs()[0] == static_cast<int>(nodes.size()) - 1 &&
                           std::all_of(nodes.begin() + 1, nodes.end(), [&](const cbi::GraphNode& n) {
                               return std::holds_alternative<cbi::Filter>(n.op) && !n.options.border;
                           });
        bool linear = chain && nodes.size() > 1;
        for (std::size_t i = 1; linear && i < nodes.size(); ++i) linear = nodes[i].inputs[0] == static_cast<int>(i) - 1;
        const bool plain_defaults =
            std::holds_alternative<cbi::DefaultSchedule>(graph_.default_schedule()) && !graph_.default_border();
        if (!linear || !plain_defaults) return cbi::graph_to_json(graph_);
        std::string s;
        for (std::size_t i = 1; i < nodes.size(); ++i) {
            if (i > 1) s += " | ";
            s += nodes[i].op_string();
            if (nodes[i].options.schedule) s += "@" + cbi::to_string(*nodes[i].options.schedule);
        }
        return s;
    }
    std::string json() const { return cbi::graph_to_json(graph_); }

    int halo() const {
        const auto& nodes = graph_.nodes();
        std::vector<int> reach(nodes.size(), 0);
        int most = 0;
        for (std::size_t i = 1; i < nodes.size(); ++i) {
            if (const auto* f = std::get_if<cbi::Filter>(&nodes[i].op); f && cbi::whole_image(*f))
                throw cbi::Unsupported("halo", nodes[i].op_string() +
                                                   " depends on the whole image: tiles of it would not give the "
                                                   "whole image's result; call the pipeline on the whole image");
            int in = 0;
            for (cbi::NodeId j : nodes[i].inputs) in = std::max(in, reach[j]);
            reach[i] = in + radius(nodes[i].op);
        }
        for (cbi::NodeId o : graph_.outputs()) most = std::max(most, reach[o]);
        return most;
    }

    std::vector<int> output_channels(int channels) const {
        const std::vector<int> all = cbi::node_channels(graph_, channels);
        std::vector<int> out;
        for (cbi::NodeId o : graph_.outputs()) out.push_back(all[o]);
        return out;
    }
    // output_channels, worked out once per channel count (1, 3, 4); the GIL
    // guards the cache.
    const std::vector<int>& cached_output_channels(int channels) {
        if (channels < 0 || channels >= static_cast<int>(out_channels_.size())) throw std::logic_error("channels");
        std::optional<std::vector<int>>& c = out_channels_[static_cast<std::size_t>(channels)];
        if (!c) c = output_channels(channels);
        return *c;
    }
    std::vector<std::string> output_names() const {
        std::vector<std::string> names;
        for (cbi::NodeId o : graph_.outputs()) names.push_back(graph_.nodes()[o].name);
        return names;
    }
    // Whether the result may depend on the channel order: a pointwise node
    // (a colour matrix) does; stencils and blends work per channel.
    bool order_sensitive() const {
        for (const auto& n : graph_.nodes())
            if (const auto* f = std::get_if<cbi::Filter>(&n.op); f && !cbi::is_stencil(*f)) return true;
        return false;
    }

    std::string plan(int height, int width, int channels, const std::string& depth, const std::string& device) const {
        cbi::RunOptions options;
        options.device = cbi::resolve_device(cbi::parse_device(device));
        cbi::GraphExecutor e(graph_, options);
        e.plan(width, height, channels, parse_depth(depth));
        return e.describe();
    }

    static cbi::Depth parse_depth(const std::string& d) {
        if (d == "uint8") return cbi::Depth::u8;
        if (d == "uint16") return cbi::Depth::u16;
        if (d == "float32") return cbi::Depth::f32;
        throw py::type_error("dtype " + d + "; cbi takes uint8, uint16 or float32");
    }

    // Runs on `input` into `outputs` (both: buffer-protocol objects, DLPack
    // capsules or CAI tuples). Host data runs on `device` ("" or "cpu": the
    // CPU; "cuda[:N]": that GPU, synchronously); device data on its own
    // device, enqueued on `stream` (a cudaStream_t as an int, 0 the legacy
    // default stream) without waiting; `keep` (and the arrays) live until
    // that work is done.
    void run(const py::handle& input, const py::list& outputs, const std::string& device, std::uintptr_t stream,
             const py::object& keep) {
        Array in = to_array(input, false);
        std::vector<Array> outs;
        outs.reserve(outputs.size());
        for (const py::handle& o : outputs) outs.push_back(to_array(o, true));
        const Images src = images_of(in, "the input");
        const std::vector<int>& channels = cached_output_channels(src.channels);
        std::vector<Images> dst;
        dst.reserve(outs.size());
        for (std::size_t i = 0; i < outs.size(); ++i) {
            const std::string what = i < 10 ? std::string{'o', 'u', 't', '[', static_cast<char>('0' + i), ']'}
                                            : "out[" + std::to_string(i) + "]";  // for messages
            if (outs[i].readonly) throw std::invalid_argument(what + " is read-only; pass a writable array");
            if (outs[i].cuda != in.cuda || (in.cuda && outs[i].device != in.device))
                throw std::invalid_argument(
                    what + " is on " + (outs[i].cuda ? "cuda:" + std::to_string(outs[i].device) : "the CPU") +
                    ", the input on " + (in.cuda ? "cuda:" + std::to_string(in.device) : "the CPU") +
                    "; allocate it on the input's device");
            if (outs[i].depth != in.depth)
                throw py::type_error(what + " has dtype " + outs[i].dtype + ", the input " + in.dtype +
                                     "; they must match");
            dst.push_back(images_of(outs[i], what.c_str()));
            const Images& d = dst.back();
            const cbi::ImageView& s0 = src.views[0];
            const cbi::ImageView& d0 = d.views[0];
            if (d.views.size() != src.views.size() || d0.width != s0.width || d0.height != s0.height ||
                d.channels != channels[i])
                throw std::invalid_argument(
                    what + " is " + std::to_string(d.views.size()) + " image(s) of " + cbi::describe(d0) +
                    "; the pipeline writes " + std::to_string(src.views.size()) + " of " +
                    cbi::describe(cbi::ImageView{nullptr, s0.width, s0.height, channels[i], s0.depth, 0}));
        }
        if (outs.size() != channels.size())
            throw std::invalid_argument("the pipeline has " + std::to_string(channels.size()) + " outputs, " +
                                        std::to_string(outs.size()) + " given");

        FormatKey key{false, 0, src.views[0].width, src.views[0].height, src.channels, src.views[0].depth};
        if (in.cuda) {
            if (!device.empty() && device != "cuda" && device != "cuda:" + std::to_string(in.device))
                throw std::invalid_argument(
                    "the input is on cuda:" + std::to_string(in.device) + ", device='" + device +
                    "' was asked for; move the data (or leave device= out: data on a GPU runs there)");
            if (!cbi::built_with_cuda())
                throw cbi::Unsupported("device data", "this build of cbi has no CUDA backend (CBI_WITH_CUDA)");
            key.cuda = true;
            key.device = in.device;
        } else if (!device.empty() && device != "cpu") {
            const cbi::ResolvedDevice d = cbi::resolve_device(cbi::parse_device(device));
            key.cuda = d.cuda;
            key.device = d.index;
        }

        t_last.input = reinterpret_cast<std::uintptr_t>(src.views[0].data);
        t_last.outputs.clear();
        for (const Images& d : dst) t_last.outputs.push_back(reinterpret_cast<std::uintptr_t>(d.views[0].data));

        std::vector<cbi::ImageView> views(dst.size());
        {
            py::gil_scoped_release release;
#if CBI_HAVE_CUDA
            // The caller's current device is the same on return (cuda:1 data runs on 1).
            std::optional<DeviceGuard> guard;
            if (key.cuda) guard.emplace(key.device);
#endif
            std::unique_ptr<cbi::GraphExecutor> e = pool_->acquire(key, graph_, tuning_);
            const std::size_t before = e->allocations();
            try {
                for (std::size_t n = 0; n < src.views.size(); ++n) {
                    for (std::size_t i = 0; i < dst.size(); ++i) views[i] = dst[i].views[n];
                    if (in.cuda)
                        e->enqueue(src.views[n], views, reinterpret_cast<CUstream_st*>(stream));
                    else
                        e->run_into(src.views[n], views);
                }
            } catch (...) {
                g_allocations += e->allocations() - before;
#if CBI_HAVE_CUDA
                // Images enqueued before the failure may still read the
                // arrays, which are not kept alive past this call.
                if (in.cuda) cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(stream));
#endif
                // A failed executor is not reused (its state is unknown).
                throw;
            }
            g_allocations += e->allocations() - before;
            pool_->release(key, std::move(e));
        }
#if CBI_HAVE_CUDA
        prune_pending();
        if (in.cuda) {
            DeviceGuard guard(in.device);
            const cudaEvent_t done = take_event(in.device);
            const cudaError_t status = cudaEventRecord(done, reinterpret_cast<cudaStream_t>(stream));
            if (status != cudaSuccess) {
                cudaEventDestroy(done);
                check(status, "cudaEventRecord after the pipeline");
            }
            py::tuple held(outs.size() + 2);
            held[0] = in.keep;
            for (std::size_t i = 0; i < outs.size(); ++i) held[i + 1] = outs[i].keep;
            held[outs.size() + 1] = keep;
            g_pending.push_back({done, in.device, std::move(held)});
        }
#else
        (void)stream, (void)keep;
#endif
    }

    py::dict run_folder(const std::string& input_dir, const std::string& output_dir, const std::string& pattern,
                        bool recursive, const std::string& format, int jobs, int in_flight, bool skip_existing,
                        const std::string& device, const std::string& codec, int quality, int png_compression,
                        bool strip, std::uint64_t max_pixels, bool in_place, const py::object& progress) {
        cbi::FolderOptions folder;
        folder.input_dir = input_dir;
        folder.output_dir = output_dir;
        folder.recursive = recursive;
        folder.pattern = pattern;
        folder.format = cbi::parse_output_format(format);
        folder.in_place = in_place;
        if (codec != "auto" && codec != "cpu" && codec != "gpu")
            throw std::invalid_argument("codec '" + codec + "' must be auto, cpu or gpu");
        cbi::BatchOptions batch;
        batch.jobs = jobs;
        batch.in_flight = in_flight;
        batch.skip_existing = skip_existing;
        batch.max_pixels = max_pixels;
        batch.write.quality = quality;
        batch.write.png_compression = png_compression;
        batch.write.strip = strip;
        cbi::check_write_options(batch.write);
        batch.jpeg = codec == "cpu"   ? cbi::BatchOptions::JpegCodec::cpu
                     : codec == "gpu" ? cbi::BatchOptions::JpegCodec::device
                                      : cbi::BatchOptions::JpegCodec::automatic;
        cbi::BatchPlan plan = cbi::plan_folder(folder);
        if (!plan.conflicts.empty()) throw std::invalid_argument(plan.conflicts.front());
        const std::vector<cbi::DeviceSpec> specs = cbi::parse_devices(device);
        cbi::RunOptions options;
        options.device = cbi::resolve_devices(specs).front();  // the device of a single spec
        options.tuning = tuning_;
        const std::vector<cbi::BatchDevice> devices =
            cbi::batch_devices(graph_, options, specs, 0, cbi::jpeg_on_device(plan, batch.jpeg));
        if (codec == "gpu" && (!cbi::built_with_nvjpeg() || !devices.front().name.starts_with("cuda")))
            throw cbi::Unsupported("codec='gpu'",
                                   "needs a build with nvJPEG and a CUDA device; use codec='auto' or 'cpu'");

        std::atomic<bool> cancel{false};
        batch.cancel = &cancel;
        std::optional<py::error_already_set> callback_error;
        if (!progress.is_none()) {
            batch.on_progress = [&](const cbi::BatchProgress& p) {
                if (cancel) return;
                py::gil_scoped_acquire gil;
                try {
                    py::dict d;
                    d["done"] = p.done;
                    d["total"] = p.total;
                    d["failed"] = p.failed;
                    d["skipped"] = p.skipped;
                    d["cancelled"] = p.cancelled;
                    d["elapsed_s"] = p.elapsed_s;
                    d["input"] = p.item ? p.item->input.string() : std::string();
                    progress(d);
                } catch (py::error_already_set& e) {
                    if (!callback_error) callback_error.emplace(std::move(e));
                    cancel = true;
                }
            };
        }
        // The batch runs on a thread of its own; this one waits with the GIL
        // released and looks for signals (Ctrl-C) every 50 ms: one cancels
        // the batch cleanly (no new image read, those in flight end as
        // cancelled, no temporaries left) and is raised once it has ended.
        std::optional<cbi::BatchSummary> summary;
        std::exception_ptr failure;
        std::mutex m;
        std::condition_variable cv;
        bool finished = false;
        bool interrupted = false;
        std::optional<py::error_already_set> signal_error;
        {
            py::gil_scoped_release release;
            std::thread worker([&] {
                try {
                    summary = cbi::run_batch(plan, devices, batch);
                } catch (...) {
                    failure = std::current_exception();
                }
                std::lock_guard lock(m);
                finished = true;
                cv.notify_all();
            });
            std::unique_lock lock(m);
            while (!finished) {
                cv.wait_for(lock, std::chrono::milliseconds(50));
                if (finished || interrupted) continue;
                lock.unlock();
                {
                    py::gil_scoped_acquire gil;
                    if (PyErr_CheckSignals() != 0) {
                        signal_error.emplace();  // fetches the raised error
                        interrupted = true;
                        cancel = true;
                    }
                }
                lock.lock();
            }
            lock.unlock();
            worker.join();
        }
        if (failure) std::rethrow_exception(failure);
        py::dict out = summary_dict(*summary);
        if (signal_error) {
            signal_error->restore();
            py::error_already_set e;
            try {
                e.value().attr("summary") = out;
            } catch (...) {}
            throw e;
        }
        if (callback_error) {
            callback_error->restore();
            throw py::error_already_set();
        }
        return out;
    }

    static py::dict summary_dict(const cbi::BatchSummary& s) {
        static const char* names[] = {"processed", "failed", "skipped", "cancelled", "elsewhere"};
        py::list items;
        for (const cbi::BatchItem& i : s.items) {
            py::dict d;
            d["input"] = i.input.string();
            d["output"] = i.output.string();
            d["status"] = names[static_cast<int>(i.status)];
            d["error"] = i.error;
            d["warning"] = i.warning;
            d["read_s"] = i.read_s;
            d["process_s"] = i.process_s;
            d["write_s"] = i.write_s;
            items.append(d);
        }
        py::dict d;
        d["items"] = items;
        d["processed"] = s.processed;
        d["failed"] = s.failed;
        d["skipped"] = s.skipped;
        d["cancelled"] = s.cancelled;
        d["wall_s"] = s.wall_s;
        d["images_per_s"] = s.images_per_s();
        d["jobs"] = s.jobs;
        d["in_flight"] = s.in_flight;
        py::list devices;
        for (const cbi::DeviceStats& dev : s.devices) {
            py::dict x;
            x["name"] = dev.name;
            x["images"] = dev.images;
            x["busy_s"] = dev.busy_s;
            // Where a GPU processor's time went (--stats' device line): seconds summed over images.
            x["decode_s"] = dev.path.decode_s;
            x["filter_s"] = dev.path.filter_s;
            x["result_s"] = dev.path.result_s;
            x["hardware_batches"] = dev.path.hw_batches;
            x["hardware_images"] = dev.path.hw_images;
            x["lost"] = dev.lost;
            devices.append(x);
        }
        d["devices"] = devices;
        return d;
    }

    void clear() {
        pool_->clear();
    }
    std::size_t idle_executors() {
        return pool_->idle_count();
    }

private:
    cbi::Graph graph_;
    std::array<std::optional<std::vector<int>>, 5> out_channels_;
    std::shared_ptr<ExecutorPool> pool_ = std::make_shared<ExecutorPool>();
    std::shared_ptr<cbi::TuningCache> tuning_ = std::make_shared<cbi::TuningCache>();
};

// cbi.set_num_threads: the CPU runs' threads, as cbi-filter --threads (one
// process-wide TBB limit; 0 lifts it). Never destroyed: TBB may be gone at exit.
std::unique_ptr<tbb::global_control>& g_thread_limit = *new std::unique_ptr<tbb::global_control>;

void set_num_threads(int threads) {
    if (threads < 0)
        throw std::invalid_argument("threads must be 0 (all cores) or more, not " + std::to_string(threads));
    g_thread_limit.reset();
    if (threads > 0)
        g_thread_limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                               static_cast<std::size_t>(threads));
}
int get_num_threads() {
    return static_cast<int>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
}

int cuda_device_count() {
#if CBI_HAVE_CUDA
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
#else
    return 0;
#endif
}

py::list devices() {
    py::list out;
    out.append("cpu");
    for (int i = 0; i < cuda_device_count(); ++i) out.append("cuda:" + std::to_string(i));
    return out;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = "cbi's C++ core (pybind11); use the cbi package, not this module.";

    g_error = make_exception(
        m, "Error", {PyExc_RuntimeError},
        "A cbi runtime or data error (the CLI's exit 1): unreadable, corrupt, too large, a CUDA failure.");
    g_invalid = make_exception(m, "InvalidArgument", {g_error, PyExc_ValueError},
                               "A malformed request no device could run (the CLI's exit 2): a bad kernel size, "
                               "filter, border or schedule string, or an array cbi cannot take as it is.");
    g_syntax = make_exception(m, "PipelineSyntaxError", {g_invalid},
                              "Malformed pipeline text; .stage (1-based), .column (1-based) and .token say where.");
    g_unsupported = make_exception(m, "Unsupported", {g_error},
                                   "Well formed, but this device, build or schedule cannot run it; the message names "
                                   "the schedules that can.");
    g_out_of_memory = make_exception(m, "OutOfMemory", {g_error, PyExc_MemoryError},
                                     "Host or device memory ran out (recoverable: free memory, or use smaller tiles).");
    g_device_lost = make_exception(m, "DeviceLost", {g_error},
                                   "A CUDA device stopped working for the rest of the process (a sticky CUDA error).");
    py::register_exception_translator(&translate);

    py::class_<Pipeline>(m, "_Pipeline")
        .def_static("from_text", &Pipeline::from_text, py::arg("text"), py::arg("border") = py::none(),
                    py::arg("schedule") = py::none())
        .def_static("from_file", &Pipeline::from_file, py::arg("path"), py::arg("border") = py::none(),
                    py::arg("schedule") = py::none())
        .def_property_readonly("text", &Pipeline::text)
        .def_property_readonly("json", &Pipeline::json)
        .def_property_readonly("halo", &Pipeline::halo)
        .def_property_readonly("output_names", &Pipeline::output_names)
        .def_property_readonly("order_sensitive", &Pipeline::order_sensitive)
        .def("output_channels", &Pipeline::output_channels)
        .def("plan", &Pipeline::plan, py::call_guard<py::gil_scoped_release>())
        .def("run", &Pipeline::run)
        .def("run_folder", &Pipeline::run_folder)
        .def("clear", &Pipeline::clear)
        .def("idle_executors", &Pipeline::idle_executors);

    m.def("filter_kinds", &filter_kinds, "The filter kinds: dicts of name, form, params, help, opencv, category.");
    m.def("clear_cache", &clear_pools, "Frees the idle executors (and their buffers) of every pipeline.");
    m.def("synchronize", &synchronize, "Waits for the device work cbi enqueued and lets go of its arrays.");
    m.def("wait_stream", &wait_stream, py::arg("consumer"), py::arg("producer"), py::arg("device"));
    m.def("built_with_cuda", &cbi::built_with_cuda);
    m.def("set_num_threads", &set_num_threads, py::arg("threads"));
    m.def("get_num_threads", &get_num_threads);
    m.def("built_with_nvjpeg", &cbi::built_with_nvjpeg);
    m.def("cuda_device_count", &cuda_device_count, "CUDA devices this process sees (starts the CUDA runtime).");
    m.def("devices", &devices, "'cpu' and each usable CUDA device ('cuda:N'); starts the CUDA runtime.");
    m.def("warm_up", [](const std::string& device) {
        const cbi::ResolvedDevice d = cbi::resolve_device(cbi::parse_device(device));
        py::gil_scoped_release release;
        cbi::warm_up(d);
    });
    m.def("schedules", [] {
        py::list out;
        for (const cbi::ScheduleEntry& e : cbi::schedule_registry()) {
            py::dict d;
            d["name"] = std::string(e.name);
            d["form"] = std::string(e.form);
            d["description"] = std::string(e.description);
            d["examples"] = std::string(e.examples);
            out.append(d);
        }
        return out;
    });
    m.def(
        "check_filter", [](const std::string& spec) { return cbi::to_string(cbi::parse_filter(spec)); },
        "The canonical form of a filter string; raises InvalidArgument when malformed.");

    py::module_ t = m.def_submodule("_testing", "Hooks for cbi's tests.");
    t.def(
        "last_pointers", [] { return py::make_tuple(t_last.input, t_last.outputs); },
        "(input, [outputs]) data pointers of the last run on this thread.");
    t.def(
        "allocations", [] { return g_allocations.load(); }, "Executor buffer allocations so far, all pipelines.");
    t.def(
        "executors", [] { return g_executors.load(); }, "Executors made so far, all pipelines.");
    t.def("pending", &pending_count, "Device runs whose arrays cbi still holds.");
}
