// The CUDA backend of the executor (CUDA builds only): every node is
// enqueued on one stream with no host synchronisation in between; the input
// and outputs go through pinned staging so the copies are asynchronous DMA;
// finish() synchronises once.
#include <optional>
#include <stdexcept>
#include <vector>

#include "filters/cuda/backend.hpp"
#include "filters/then.hpp"
#include "pipeline/backend.hpp"
#include "pipeline/cuda_runtime.hpp"
#if CBI_HAVE_NVJPEG
#include "pipeline/jpeg_gpu.hpp"
#endif

namespace cbi {
namespace {

class CudaBackend final : public Backend {
public:
    CudaBackend(int device, int block) : device_(device), block_(block) {}
    ~CudaBackend() override {
        // The caller's work may still read the buffers freed below.
        if (busy_) {
            cudaEventSynchronize(busy_);
            cudaEventDestroy(busy_);
        }
    }

    std::string device_name() const override { return cuda_device_name(device_); }
    // The first timed run decides: a kernel's first launch also loads its module.
    TuningMethod tuning() const override { return {5, false, false}; }
    bool fuses() const override { return true; }
    KernelShape kernel_shape(const FilterRun& node, const KernelFormat& f) const override {
        use_device(device_);
        // Window kinds' kernels read stored images, but a median through a colour node.
        const bool fits = !(node.fused_color && category_of(node.filter) == Category::window &&
                            !cuda_window_takes_colour(node, f.channels)) &&
                          (!node.then || cuda_applies_then(node, f.depth)) &&
                          (!node.fused_stencil || cuda_chain_fits(node, f.depth, f.src_channels, f.channels, device_));
        const int h = cuda_strip_height(node, f.depth, f.src_channels, f.channels, f.width, f.height, device_, block_);
        return {fits, h > 0 ? std::optional<int>(h) : std::nullopt};
    }
    KernelShape kernel_shape(const BlendRun& node, const KernelFormat& f) const override {
        // A plain blend (neither side a stencil) with a `then`.
        if (!node.a && !node.b)
            return {.fits = node.then && cuda_blend_applies_then(node.schedule, f.depth, *node.then)};
        use_device(device_);
        const int h = cuda_blend_strip_height(node, f.depth, f.src_channels, f.width, f.height, device_, block_);
        const bool then = !node.then || !looks_up_8bit(*node.then);  // as cuda_applies_then
        return {then && cuda_blend_fits(node, f.depth, f.src_channels), h > 0 ? std::optional<int>(h) : std::nullopt};
    }

    std::size_t allocate(const BufferPlan& plan) override {
        use_device(device_);
        wait_until_idle();
        const std::size_t plane = static_cast<std::size_t>(plan.width) * plan.height * depth_bytes(plan.depth);
        state_.emplace();
        state_->input = DeviceImage(plan.width, plan.height, plan.channels, plan.depth);
        for (int ch : plan.buffer_channels) state_->buffers.emplace_back(plane * ch);
        state_->input_staging = PinnedBuffer(plane * plan.channels);
        for (int ch : plan.output_channels) state_->output_staging.emplace_back(plane * ch);
        return 3 + state_->buffers.size() + state_->output_staging.size();  // + the stream
    }
    void release() override {
        wait_until_idle();
        state_.reset();
    }
    std::byte* buffer(int index) const override { return state_->buffers[index].data(); }

    ImageView upload(const ImageView& input) override {
        // A batch's processor may run on another thread than the one that
        // allocated it: make its device current on this one.
        use_device(device_);
        join(state_->stream.get());
        const ImageView& device = state_->input.view;
        const ImageView staged =
            contiguous_view(state_->input_staging.data(), device.width, device.height, device.channels, device.depth);
        copy_pixels(input, staged);
        cbi::upload(staged, device, stream());
        return device;
    }
    void run_node(const FilterRun& node, const ImageView& src, const ImageView& dst) override {
        void* scratch = nullptr;
        if (const std::size_t bytes = cuda_scratch_bytes(node)) {  // once per allocate: no per-run cudaMalloc
            if (state_->scratch.size() < bytes) state_->scratch = DeviceBuffer(bytes);
            scratch = state_->scratch.data();
        }
        run_node_cuda(node, src, dst, stream(), block_, scratch);
    }
    void run_blend(const BlendFilter& blend, const ScheduleSpec& schedule, const ImageView& a, const ImageView& b,
                   const ImageView& dst, const std::optional<Filter>& then) override {
        run_blend_cuda(blend, schedule, a, b, dst, stream(), block_, then);
    }
    void run_fused_blend(const BlendRun& node, const ImageView& src, const ImageView& dst) override {
        run_blend_fused_cuda(node, src, dst, stream(), block_);
    }
    ImageView download(const ImageView& result, std::size_t index) override {
        const ImageView host = contiguous_view(state_->output_staging[index].data(), result.width, result.height,
                                               result.channels, result.depth);
        cbi::download(result, host, stream());
        return host;
    }
    void finish() override { state_->stream.synchronize("cudaStreamSynchronize after the graph"); }

    // The caller's device memory, read in place (GraphExecutor::enqueue).
    ImageView use_input(const ImageView& input) override {
        use_device(device_);
        return input;
    }
    void download_into(const ImageView& result, const ImageView& host) override {
        cbi::download(result, host, stream());
    }
    void copy_image(const ImageView& src, const ImageView& dst) override {
        CBI_CUDA_CHECK(cudaMemcpy2DAsync(dst.data, dst.stride, src.data, src.stride, src.row_bytes(), src.height,
                                         cudaMemcpyDeviceToDevice, stream()),
                       "cudaMemcpy2DAsync of the input to an output");
    }
    void begin_external(CUstream_st* stream) override {
        CBI_CUDA_CHECK(cudaGetDevice(&caller_device_), "cudaGetDevice");
        use_device(device_);
        external_ = stream;
        external_active_ = true;
        join(stream);
    }
    void end_external() override {
        external_active_ = false;
        const int caller = caller_device_;
        if (!busy_)
            CBI_CUDA_CHECK(cudaEventCreateWithFlags(&busy_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
        CBI_CUDA_CHECK(cudaEventRecord(busy_, external_), "cudaEventRecord after the graph on the caller's stream");
        busy_pending_ = true;
        // Back to the caller's device, even one cbi marked unusable (the
        // caller's business, not this run's).
        if (caller != device_) CBI_CUDA_CHECK(cudaSetDevice(caller), "cudaSetDevice back to the caller's device");
    }

#if CBI_HAVE_NVJPEG
    DeviceJpeg* jpeg() override {
        return &jpeg_;
    }
#endif

    void start_timer() override {
        use_device(device_);
        if (!timer_) timer_.emplace();
        timer_->start(stream());
    }
    double stop_timer_ms() override {
        return timer_->stop_ms(stream());
    }

private:
    cudaStream_t stream() const {
        return external_active_ ? external_ : state_->stream.get();
    }
    // Work about to start on `s` comes after the buffers' last use on a caller's stream.
    void join(cudaStream_t s) {
        if (busy_pending_)
            CBI_CUDA_CHECK(cudaStreamWaitEvent(s, busy_, 0), "cudaStreamWaitEvent for the executor's buffers");
    }
    void wait_until_idle() {
        if (busy_pending_) CBI_CUDA_CHECK(cudaEventSynchronize(busy_), "cudaEventSynchronize before freeing buffers");
        busy_pending_ = false;
    }
    struct State {
        Stream stream;
        DeviceImage input;
        std::vector<DeviceBuffer> buffers;
        PinnedBuffer input_staging;
        std::vector<PinnedBuffer> output_staging;
        DeviceBuffer scratch;  // nodes' scratch (cuda_scratch_bytes), made by the first node that needs it
    };
    int device_, block_;
    std::optional<State> state_;
    std::optional<EventTimer> timer_;
    // GraphExecutor::enqueue: the caller's stream while it runs there, the
    // event after its last work there (busy_pending_ until waited for).
    cudaStream_t external_ = nullptr;
    bool external_active_ = false;
    int caller_device_ = 0;
    cudaEvent_t busy_ = nullptr;
    bool busy_pending_ = false;
#if CBI_HAVE_NVJPEG
    // The device's nvJPEG codec, on this backend's stream and input buffer.
    class Jpeg final : public DeviceJpeg {
    public:
        explicit Jpeg(CudaBackend& backend) : b_(backend) {}
        bool codec_ready(bool wait) override {
            // Starting nvJPEG does not wait for this thread's device context.
            if (!codec_ && !wait && !GpuJpegCodec::started(b_.device_)) return false;
            use_device(b_.device_);
            if (!codec_) codec_.emplace(b_.device_);  // once per backend: its nvJPEG states
            return true;
        }
        bool decoder_ready() override { return codec_ready(false) && GpuJpegCodec::decoder_started(b_.device_); }
        std::optional<ImageView> parse(std::span<const std::uint8_t> jpeg, bool wait, bool hardware) override {
            if (!codec_ready(wait)) return std::nullopt;
            const auto info = codec_->parse(jpeg, wait, hardware);
            if (!info) return std::nullopt;
            return contiguous_view(nullptr, info->width, info->height, info->channels, Depth::u8);
        }
        std::optional<ImageView> decode_input(std::span<const std::uint8_t> jpeg) override {
            use_device(b_.device_);
            b_.join(b_.stream());
            const ImageView& device = b_.state_->input.view;
            if (!codec_->decode(jpeg, device, b_.stream())) return std::nullopt;
            return device;
        }
        std::vector<std::uint8_t> encode(const ImageView& result, int quality) override {
            return codec_->encode(result, quality, b_.stream());
        }
        std::pair<std::size_t, std::size_t> hardware_batches() const override {
            return codec_ ? codec_->hardware_batches() : std::pair<std::size_t, std::size_t>{};
        }

    private:
        CudaBackend& b_;
        std::optional<GpuJpegCodec> codec_;
    };
    Jpeg jpeg_{*this};
#endif
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device, int block) {
    return std::make_unique<CudaBackend>(device, block);
}

}  // namespace cbi
