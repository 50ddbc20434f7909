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

class Backend {
public:
    virtual ~Backend() = default;

    // The device part of tuning keys: the GPU's model, or "cpu, N threads".
    virtual std::string device_name() const = 0;
    virtual TuningMethod tuning() const = 0;
    // Whether the executor fuses nodes here (RunOptions::fuse), and whether
    // a stencil pair `node` fits one kernel for an input of `src_channels`
    // and an intermediate image of `channels` samples per pixel.
    virtual bool fuses() const = 0;
    virtual bool chain_fits(const FilterRun& node, Depth depth, int src_channels, int channels) const = 0;
    // The strip height a stencil or a stencil pair (strip_height;
    // `channels`: the output's, a pair's intermediate image's) or a blend
    // with its stencils (blend_strip_height), on the default table's
    // schedule, runs fastest at here for a width x height image; nullopt:
    // the schedule's.
    virtual std::optional<int> strip_height(const FilterRun& node, Depth depth, int src_channels, int channels,
                                            int width, int height) const = 0;
    virtual std::optional<int> blend_strip_height(const BlendRun& node, Depth depth, int channels, int width,
                                                  int height) const = 0;
    // Whether a blend and the stencils it reads fit one kernel for an input
    // of `channels` (fused blends run through run_fused_blend).
    virtual bool blend_fits(const BlendRun& node, Depth depth, int channels) const = 0;

    // Frees what an earlier allocate made, allocates for `plan`; returns how
    // many allocations it made. release(): frees everything.
    virtual std::size_t allocate(const BufferPlan& plan) = 0;
    virtual void release() = 0;
    // Start of intermediate buffer `index` (contiguous rows).
    virtual std::byte* buffer(int index) const = 0;

    // Takes a run's input; returns the view nodes read it through.
    virtual ImageView upload(const ImageView& input) = 0;
    virtual void run_node(const FilterRun& node, const ImageView& src, const ImageView& dst) = 0;
    virtual void run_blend(const BlendFilter& blend, const ScheduleSpec& schedule, const ImageView& a,
                           const ImageView& b, const ImageView& dst) = 0;
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

    // JPEG on the device (the CUDA backend in builds with nvJPEG; the others
    // decode nothing). jpeg_codec_ready: whether the device's codec has
    // started (unless `wait`, the first call starts it in the background);
    // jpeg_decoder_ready: whether its decoder has too (it starts later).
    // parse_jpeg: the input format a JPEG decodes to (a
    // view without data), or nullopt when the device's decoder does not take
    // it or, unless `wait`, has not started yet. decode_input,
    // after allocate for that format: decodes the JPEG last parsed into the
    // input buffer and returns the view nodes read it through, or nullopt
    // when the decoder refused the data; the bytes must live until finish.
    // encode_jpeg: a result encoded as JPEG (8-bit, 1 or 3 channels), after
    // everything started before it.
    virtual bool decodes_jpeg() const { return false; }
    virtual bool jpeg_codec_ready(bool /*wait*/) { return false; }
    virtual bool jpeg_decoder_ready() { return false; }
    virtual std::optional<ImageView> parse_jpeg(std::span<const std::uint8_t> /*jpeg*/, bool /*wait*/) {
        return std::nullopt;
    }
    virtual std::optional<ImageView> decode_input(std::span<const std::uint8_t> /*jpeg*/) { return std::nullopt; }
    virtual std::vector<std::uint8_t> encode_jpeg(const ImageView& result, int quality);

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
