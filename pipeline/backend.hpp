#pragma once
// What the graph executor asks of a device: buffers for a plan, running a
// node or a blend, moving the input in and the outputs out, and timing runs
// for tuning. The executor's node loop, tuning and buffer planning are
// written once over this interface; the CPU backend (TBB) runs each node
// before returning, the CUDA backend (backend_cuda.cpp) enqueues everything
// on one stream and finish() waits for it. The kernels themselves are the
// filters layer's (filters/cpu/backend.hpp, filters/cuda/backend.hpp).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "filters/filter.hpp"
#include "filters/image_view.hpp"
#include "pipeline/image.hpp"

struct CUstream_st;  // cudaStream_t (pipeline/executor.hpp)

namespace cbi {

struct ResolvedDevice;

// What a plan needs allocated: intermediate buffers of the input's width,
// height and depth (capacities in channels), plus the input and one image
// per graph output where the backend stages them.
struct BufferPlan {
    int width = 0, height = 0, channels = 0;  // of the input
    Depth depth = Depth::u8;
    std::span<const int> buffer_channels;
    std::span<const int> output_channels;
};

// How `auto` times candidates on this backend (fastest_candidate's runs and
// warmup_decides), and whether on a band of rows from the middle of the image
// (the CPU: a candidate's run then costs a fraction of the node's) or on the
// whole image.
struct TuningMethod {
    int runs = 3;
    bool warmup_decides = true;
    bool band_of_rows = true;
};

// The format a node's kernel runs on: a width x height input of `depth`
// with `src_channels`; `channels` is the samples per pixel of a stencil
// pair's intermediate image, else of the node's output.
struct KernelFormat {
    Depth depth = Depth::u8;
    int src_channels = 0, channels = 0;
    int width = 0, height = 0;
};

// What Backend::kernel_shape answers: whether one kernel takes the node as
// fused, and its strip height (nullopt: the schedule's).
struct KernelShape {
    bool fits = true;
    std::optional<int> strip_height;
};

// JPEG decoded into a backend's input buffer and encoded from its results,
// on the device. codec_ready: whether the device's codec has started
// (unless `wait`, the first call starts it in the background);
// decoder_ready: whether its decoder has too (it starts later). parse: the
// input format a JPEG decodes to (a view without data), or nullopt when the
// decoder does not take it or, unless `wait`, has not started yet; without
// `hardware`, not the hardware decoder (Processor::process_jpeg).
// decode_input, after the backend's allocate for that format: decodes the
// JPEG last parsed into the input buffer and returns the view nodes read it
// through, or nullopt when the decoder refused the data; the bytes must live
// until the backend's finish. encode: a result encoded as JPEG (8-bit, 1 or
// 3 channels), after everything started before it.
class DeviceJpeg {
public:
    virtual bool codec_ready(bool wait) = 0;
    virtual bool decoder_ready() = 0;
    virtual std::optional<ImageView> parse(std::span<const std::uint8_t> jpeg, bool wait, bool hardware = true) = 0;
    virtual std::optional<ImageView> decode_input(std::span<const std::uint8_t> jpeg) = 0;
    virtual std::vector<std::uint8_t> encode(const ImageView& result, int quality) = 0;
    // The hardware decoder's batches this codec's thread led, and their images.
    virtual std::pair<std::size_t, std::size_t> hardware_batches() const = 0;

protected:
    ~DeviceJpeg() = default;
};

class Backend {
public:
    virtual ~Backend() = default;

    // The device part of tuning keys: the GPU's model, or "cpu, N threads".
    virtual std::string device_name() const = 0;
    virtual TuningMethod tuning() const = 0;
    // Whether the executor fuses nodes here (RunOptions::fuse).
    virtual bool fuses() const = 0;
    // The kernel a stencil node (with the nodes fused into it) or a blend
    // with the stencils it reads becomes here for `format`: whether one
    // kernel takes it (the executor fuses only then) and the strip height it
    // runs fastest at on the default table's schedule. A node of any kind
    // with `then` set: whether its kernel applies that per-sample node as it
    // stores; a BlendRun without stencils (a nor b): a plain blend's.
    virtual KernelShape kernel_shape(const FilterRun& node, const KernelFormat& format) const = 0;
    virtual KernelShape kernel_shape(const BlendRun& node, const KernelFormat& format) const = 0;

    // Frees what an earlier allocate made, allocates for `plan`; returns how
    // many allocations it made. release(): frees everything.
    virtual std::size_t allocate(const BufferPlan& plan) = 0;
    virtual void release() = 0;
    // Start of intermediate buffer `index` (contiguous rows).
    virtual std::byte* buffer(int index) const = 0;

    // Takes a run's input; returns the view nodes read it through.
    virtual ImageView upload(const ImageView& input) = 0;
    virtual void run_node(const FilterRun& node, const ImageView& src, const ImageView& dst) = 0;
    // `then`: a per-sample filter applied as the blend stores (FilterRun::then).
    virtual void run_blend(const BlendFilter& blend, const ScheduleSpec& schedule, const ImageView& a,
                           const ImageView& b, const ImageView& dst, const std::optional<Filter>& then) = 0;
    // src: the input of the blend's stencils.
    virtual void run_fused_blend(const BlendRun& node, const ImageView& src, const ImageView& dst) = 0;
    // A host view that holds graph output `index`, computed into `result`,
    // once finish() returns.
    virtual ImageView download(const ImageView& result, std::size_t index) = 0;
    // Waits for everything started since the last finish.
    virtual void finish() = 0;

    // The caller's own memory as a run's input, without a copy: host memory
    // on the CPU, device memory on this device on CUDA (GraphExecutor::enqueue).
    virtual ImageView use_input(const ImageView& input) { return upload(input); }
    // A result copied into the caller's host view (GraphExecutor::run_into),
    // complete once finish() returns.
    virtual void download_into(const ImageView& result, const ImageView& host) { copy_pixels(result, host); }
    // A copy between two images in this backend's memory (an output that is
    // the graph's input), in order with the nodes.
    virtual void copy_image(const ImageView& src, const ImageView& dst) { copy_pixels(src, dst); }
    // Work from begin_external on goes to the caller's `stream` (CUDA;
    // nullptr: the legacy default stream), after the backend's earlier work
    // on any stream; end_external marks the buffers busy until that work is
    // done (the next run's stream waits for it) and returns to the
    // backend's own stream, the caller's current device restored.
    virtual void begin_external(CUstream_st* /*stream*/) {}
    virtual void end_external() {}

    // The device's JPEG codec (the CUDA backend in builds with nvJPEG), or
    // nullptr: the others decode nothing.
    virtual DeviceJpeg* jpeg() { return nullptr; }

    // Times the work started between the two calls; stop waits for it.
    virtual void start_timer() = 0;
    virtual double stop_timer_ms() = 0;
};

// The backend for `device` (CUDA threads per block: `block`). Touches no
// device until allocate. Throws cbi::Error for CUDA in a build without it.
std::unique_ptr<Backend> make_backend(const ResolvedDevice& device, int block);

// In CUDA builds only (backend_cuda.cpp).
std::unique_ptr<Backend> make_cuda_backend(int device, int block);

// A contiguous view of `width` x `height` x `channels` at `data`.
inline ImageView contiguous_view(std::byte* data, int width, int height, int channels, Depth depth) {
    ImageView v{data, width, height, channels, depth, 0};
    v.stride = v.row_bytes();
    return v;
}

}  // namespace cbi
