// nvJPEG behind GpuJpegCodec. Decoding picks, per stream, the first decoder
// that takes it: the hardware decoder for baseline streams without an EXIF
// turn (batched with the images other threads decode at the same time),
// then nvJPEG's GPU-Huffman decoder, then its CPU-Huffman one (progressive
// streams); the turn is applied by the decoder itself (decode parameters).
#include "pipeline/jpeg_gpu.hpp"

#include <nvjpeg.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "filters/cuda/check.hpp"
#include "filters/error.hpp"
#include "pipeline/cuda_runtime.hpp"

namespace cbi {
namespace {

const char* status_name(nvjpegStatus_t s) {
    switch (s) {
        case NVJPEG_STATUS_SUCCESS: return "success";
        case NVJPEG_STATUS_NOT_INITIALIZED: return "not initialized";
        case NVJPEG_STATUS_INVALID_PARAMETER: return "invalid parameter";
        case NVJPEG_STATUS_BAD_JPEG: return "bad JPEG";
        case NVJPEG_STATUS_JPEG_NOT_SUPPORTED: return "JPEG not supported";
        case NVJPEG_STATUS_ALLOCATOR_FAILURE: return "allocation failed";
        case NVJPEG_STATUS_EXECUTION_FAILED: return "execution failed";
        case NVJPEG_STATUS_ARCH_MISMATCH: return "not supported on this GPU";
        case NVJPEG_STATUS_INTERNAL_ERROR: return "internal error";
        case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED: return "implementation not supported";
        case NVJPEG_STATUS_INCOMPLETE_BITSTREAM: return "incomplete bitstream";
    }
    return "unknown status";
}

// Calls that must work whatever the data: a failure is an error.
void check(nvjpegStatus_t s, const char* what) {
    if (s == NVJPEG_STATUS_SUCCESS) return;
    // A CUDA error underneath (a lost device) is reported as CUDA's.
    if (s == NVJPEG_STATUS_EXECUTION_FAILED) CBI_CUDA_CHECK(cudaGetLastError(), what);
    if (s == NVJPEG_STATUS_ALLOCATOR_FAILURE) throw Error("", std::string(what) + ": out of device memory");
    throw Error("", std::string(what) + " failed: nvJPEG " + status_name(s));
}

// Whether a decoder refused the data (the CPU decoder then tries it).
bool refused(nvjpegStatus_t s) {
    return s == NVJPEG_STATUS_BAD_JPEG || s == NVJPEG_STATUS_JPEG_NOT_SUPPORTED ||
           s == NVJPEG_STATUS_INCOMPLETE_BITSTREAM || s == NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED;
}

constexpr unsigned kFlags = NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION;

bool swaps_sides(nvjpegExifOrientation_t o) {
    return o == NVJPEG_ORIENTATION_TRANSPOSE || o == NVJPEG_ORIENTATION_ROTATE_90 ||
           o == NVJPEG_ORIENTATION_TRANSVERSE || o == NVJPEG_ORIENTATION_ROTATE_270;
}

// One decoupled decoder with its own state and buffers.
struct Decoder {
    nvjpegJpegDecoder_t decoder = nullptr;
    nvjpegJpegState_t state = nullptr;
    nvjpegBufferPinned_t pinned = nullptr;
    nvjpegBufferDevice_t device = nullptr;
    const char* name = "";

    Decoder(nvjpegHandle_t handle, nvjpegBackend_t backend, const char* n) : name(n) {
        check(nvjpegDecoderCreate(handle, backend, &decoder), "nvjpegDecoderCreate");
        check(nvjpegDecoderStateCreate(handle, decoder, &state), "nvjpegDecoderStateCreate");
        check(nvjpegBufferPinnedCreate(handle, nullptr, &pinned), "nvjpegBufferPinnedCreate");
        check(nvjpegBufferDeviceCreate(handle, nullptr, &device), "nvjpegBufferDeviceCreate");
        check(nvjpegStateAttachPinnedBuffer(state, pinned), "nvjpegStateAttachPinnedBuffer");
        check(nvjpegStateAttachDeviceBuffer(state, device), "nvjpegStateAttachDeviceBuffer");
    }
    ~Decoder() {
        if (state) nvjpegJpegStateDestroy(state);
        if (pinned) nvjpegBufferPinnedDestroy(pinned);
        if (device) nvjpegBufferDeviceDestroy(device);
        if (decoder) nvjpegDecoderDestroy(decoder);
    }
    Decoder(const Decoder&) = delete;
    Decoder& operator=(const Decoder&) = delete;
};

// One image for the hardware decoder (DeviceContext::decode_hardware).
struct HwRequest {
    const unsigned char* data = nullptr;
    std::size_t length = 0;
    nvjpegImage_t out{};
    unsigned width = 0, height = 0;
    nvjpegOutputFormat_t format = NVJPEG_OUTPUT_BGRI;
    cudaEvent_t ready = nullptr;  // recorded on the caller's stream: its buffer may be written from there on
    bool alone = false;           // a batch with it failed: it goes in a batch of its own
    bool done = false;
    std::size_t led = 0, led_images = 0;  // the batches the caller led while it waited, and their images
    nvjpegStatus_t status = NVJPEG_STATUS_SUCCESS;
    cudaError_t cuda = cudaSuccess;
};

// What the codecs of one device share: nvJPEG's handles (each takes
// ~0.3 s to create) and the hardware decoder's states, made once per
// process and device. The hardware decoder takes the images that threads
// ask for at the same time as one batch: its engines work on a batch's
// images in parallel (docs/performance.md#hardware-jpeg-batches). Made in
// two steps, so that encoding can start while the hardware decoder is
// still being made: the default handle (encoder, parser, the GPU's other
// decoders), then the hardware handle and its states.
class DeviceContext {
public:
    explicit DeviceContext(int device) : device_(device) {
        use_device(device);
        // Chroma upsampled by interpolation, as libjpeg does ("fancy
        // upsampling"), not by replication: closer to the CPU decoder.
        check(nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, kFlags, &handle), "nvjpegCreateEx");
    }
    // The second step, on the thread that made the context. It throws
    // nothing: a process that ends first (a batch of a few images) tears
    // CUDA down under it, and an exception escaping this detached thread
    // would abort the process.
    void start_hardware() noexcept {
        try {
            use_device(device_);
            nvjpegHandle_t h = nullptr;
            // A GPU without hardware decoders refuses this handle: not an error.
            if (nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, kFlags, &h) == NVJPEG_STATUS_SUCCESS) {
                for (std::size_t i = 0; i < kHwStates; ++i) {
                    nvjpegJpegState_t state = nullptr;
                    if (nvjpegJpegStateCreate(h, &state) != NVJPEG_STATUS_SUCCESS) break;
                    hw_states_.push_back({state});
                }
                if (hw_states_.empty())  // the other decoders serve
                    nvjpegDestroy(h);
                else
                    hw = h;
            }
        } catch (...) {  // the other decoders serve
        }
        {
            std::lock_guard lock(mutex_);
            hardware_started_ = true;
        }
        freed_.notify_all();
    }
    // Whether start_hardware has ended; with wait, waits for it.
    bool hardware_started(bool wait) {
        std::unique_lock lock(mutex_);
        if (wait) freed_.wait(lock, [&] { return hardware_started_; });
        return hardware_started_;
    }
    ~DeviceContext() {
        for (HwState& s : hw_states_) nvjpegJpegStateDestroy(s.state);
        if (hw) nvjpegDestroy(hw);
        if (handle) nvjpegDestroy(handle);
    }
    DeviceContext(const DeviceContext&) = delete;
    DeviceContext& operator=(const DeviceContext&) = delete;

    // The context of `device`, made on a thread of its own from the first
    // call on (the default handle ~0.3 s after the CUDA context; then the
    // hardware handle and state, ~0.7 s more: hardware_started): with wait,
    // blocks until the default handle is made (rethrowing its error); else
    // nullptr while it is being made. Never destroyed: at exit, static
    // destructors run after CUDA may have torn the device's context down;
    // the process's end frees it all.
    static DeviceContext* of(int device, bool wait) {
        std::shared_future<DeviceContext*> f;
        {
            std::lock_guard lock(mutex());
            auto& contexts = starts();
            auto it = contexts.find(device);
            if (it == contexts.end()) {
                // Registered after CUDA's own teardown, so run before it.
                static const int registered = std::atexit(wait_for_starts);
                (void)registered;
                auto made = std::make_shared<std::promise<DeviceContext*>>();
                it = contexts.emplace(device, made->get_future().share()).first;
                std::thread([device, made] {
                    DeviceContext* c = nullptr;
                    try {
                        c = new DeviceContext(device);
                    } catch (...) {
                        made->set_exception(std::current_exception());
                        return;
                    }
                    made->set_value(c);
                    c->start_hardware();
                }).detach();
            }
            f = it->second;
        }
        if (!wait && f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return nullptr;
        return f.get();
    }

    // Whether a start is still under way (its default handle or its
    // hardware decoder); with wait, waits for each to end first (false).
    static bool under_way(bool wait) {
        std::vector<std::shared_future<DeviceContext*>> all;
        {
            std::lock_guard lock(mutex());
            for (const auto& [device, f] : starts()) all.push_back(f);
        }
        for (const auto& f : all) {
            if (wait) f.wait();
            if (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return true;
            try {
                if (!f.get()->hardware_started(wait)) return true;
            } catch (...) {  // that start failed: nothing under way
            }
        }
        return false;
    }
    // At exit: waits for the starts still under way. A process that ends
    // first (a batch of a few images) would otherwise tear CUDA down under
    // nvJPEG's start, which then hangs or aborts the process.
    static void wait_for_starts() { under_way(true); }
    static std::mutex& mutex() {
        static auto* m = new std::mutex;  // never destroyed: used at exit
        return *m;
    }
    static std::map<int, std::shared_future<DeviceContext*>>& starts() {
        static auto* m = new std::map<int, std::shared_future<DeviceContext*>>;
        return *m;
    }

    // Decodes r on the hardware decoder, in one batch with the requests
    // other threads have made meanwhile: a thread whose request waits leads
    // the next batch of what waits (on its own stream) as soon as a state is
    // free and no batch decodes, or kFullBatch wait; else waits for a batch
    // to finish its request. Blocks (a few ms) rather than suspending the
    // task: a suspended task holding a state could need a worker thread to
    // resume while every worker waits here, a deadlock. The caller reads
    // r.status and r.cuda.
    void decode_hardware(HwRequest& r, cudaStream_t stream) {
        std::unique_lock lock(mutex_);
        queue_.push_back(&r);
        if (queue_.size() == kFullBatch) freed_.notify_all();
        while (!r.done) {
            auto free = std::find_if(hw_states_.begin(), hw_states_.end(), [](const HwState& s) { return !s.busy; });
            const bool decoding =
                std::any_of(hw_states_.begin(), hw_states_.end(), [](const HwState& s) { return s.busy; });
            if (free == hw_states_.end() || queue_.empty() || (decoding && queue_.size() < kFullBatch)) {
                freed_.wait(lock);
                continue;
            }
            HwState& state = *free;
            std::vector<HwRequest*> batch = take_batch();
            ++r.led;
            r.led_images += batch.size();
            state.busy = true;
            lock.unlock();
            cudaError_t cuda = cudaSuccess;
            const nvjpegStatus_t status = run_batch(state, batch, stream, cuda);
            lock.lock();
            state.busy = false;
            if (status != NVJPEG_STATUS_SUCCESS && cuda == cudaSuccess && batch.size() > 1) {
                // One image may have failed them all: each again on its own.
                for (HwRequest* q : batch) q->alone = true;
                queue_.insert(queue_.begin(), batch.begin(), batch.end());
            } else {
                for (HwRequest* q : batch) {
                    q->status = status;
                    q->cuda = cuda;
                    q->done = true;
                }
            }
            freed_.notify_all();
        }
    }

    nvjpegHandle_t handle = nullptr;
    nvjpegHandle_t hw = nullptr;  // read once hardware_started

private:
    int device_;
    bool hardware_started_ = false;
    // Two let one batch's set-up overlap another's decoding.
    static constexpr std::size_t kHwStates = 2;
    // While a batch decodes, the next starts only with this many waiting:
    // a free state taking each request as it came made batches of 2 or 3
    // images, and the engines decode a batch's images in parallel
    // (docs/performance.md#hardware-jpeg-batches).
    static constexpr std::size_t kFullBatch = 4;
    // A batch's images and pixels at most: the state's buffers hold the
    // largest batch it has decoded (16 2048x2048 images: 2.3 times the
    // rate of one at a time).
    static constexpr std::size_t kMaxBatch = 16;
    static constexpr std::uint64_t kMaxBatchPixels = std::uint64_t{64} << 20;
    struct HwState {
        nvjpegJpegState_t state;
        bool busy = false;
        // What nvjpegDecodeBatchedInitialize was last told (UNCHANGED: not
        // yet, or it failed) and what the buffers were allocated for:
        // without nvjpegDecodeBatchedPreAllocate the hardware decoder
        // fails to allocate on some hosts.
        nvjpegOutputFormat_t format = NVJPEG_OUTPUT_UNCHANGED;
        std::size_t batch = 0, allocated_batch = 0;
        unsigned allocated_width = 0, allocated_height = 0;
    };

    // The first waiting request and those of its format behind it, within
    // the batch limits; a request marked alone goes alone. Under mutex_.
    std::vector<HwRequest*> take_batch() {
        std::vector<HwRequest*> batch{queue_.front()};
        queue_.pop_front();
        if (batch[0]->alone) return batch;
        unsigned w = batch[0]->width, h = batch[0]->height;
        for (auto it = queue_.begin(); it != queue_.end() && batch.size() < kMaxBatch;) {
            HwRequest* q = *it;
            const unsigned nw = std::max(w, q->width), nh = std::max(h, q->height);
            if (q->alone || q->format != batch[0]->format ||
                std::uint64_t{nw} * nh * (batch.size() + 1) > kMaxBatchPixels) {
                ++it;
                continue;
            }
            w = nw;
            h = nh;
            batch.push_back(q);
            it = queue_.erase(it);
        }
        return batch;
    }

    // Decodes `batch` with `s` on `stream` and waits for it; cuda: a CUDA
    // error underneath.
    nvjpegStatus_t run_batch(HwState& s, const std::vector<HwRequest*>& batch, cudaStream_t stream, cudaError_t& cuda) {
        std::vector<const unsigned char*> data;
        std::vector<std::size_t> lengths;
        std::vector<nvjpegImage_t> out;
        unsigned w = 0, h = 0;
        for (HwRequest* q : batch) {
            data.push_back(q->data);
            lengths.push_back(q->length);
            out.push_back(q->out);
            w = std::max(w, q->width);
            h = std::max(h, q->height);
            if ((cuda = cudaStreamWaitEvent(stream, q->ready, 0)) != cudaSuccess) return NVJPEG_STATUS_EXECUTION_FAILED;
        }
        const nvjpegOutputFormat_t format = batch[0]->format;
        nvjpegStatus_t st = NVJPEG_STATUS_SUCCESS;
        if (batch.size() > s.allocated_batch || w > s.allocated_width || h > s.allocated_height) {
            std::size_t n = std::max(batch.size(), s.allocated_batch);
            unsigned aw = std::max(w, s.allocated_width), ah = std::max(h, s.allocated_height);
            if (std::uint64_t{aw} * ah * n > kMaxBatchPixels) {  // no larger than this batch needs
                n = batch.size();
                aw = w;
                ah = h;
            }
            // 4:4:4 needs the most of any subsampling.
            st = nvjpegDecodeBatchedPreAllocate(hw, s.state, static_cast<int>(n), static_cast<int>(aw),
                                                static_cast<int>(ah), NVJPEG_CSS_444, format);
            if (st == NVJPEG_STATUS_SUCCESS) {
                s.allocated_batch = n;
                s.allocated_width = aw;
                s.allocated_height = ah;
            } else {
                s.allocated_batch = s.allocated_width = s.allocated_height = 0;
            }
        }
        if (st == NVJPEG_STATUS_SUCCESS && (s.format != format || s.batch != batch.size())) {
            st = nvjpegDecodeBatchedInitialize(hw, s.state, static_cast<int>(batch.size()), 1, format);
            s.format = st == NVJPEG_STATUS_SUCCESS ? format : NVJPEG_OUTPUT_UNCHANGED;
            s.batch = batch.size();
        }
        if (st == NVJPEG_STATUS_SUCCESS)
            st = nvjpegDecodeBatched(hw, s.state, data.data(), lengths.data(), out.data(), stream);
        cuda = cudaStreamSynchronize(stream);
        if (st != NVJPEG_STATUS_SUCCESS) s.format = NVJPEG_OUTPUT_UNCHANGED;  // initialised again next time
        return st;
    }

    std::mutex mutex_;
    std::condition_variable freed_;
    std::vector<HwState> hw_states_;  // made before hardware_started_, then fixed
    std::deque<HwRequest*> queue_;
};

}  // namespace

struct GpuJpegCodec::State {
    int device = 0;
    DeviceContext* context = nullptr;
    nvjpegHandle_t handle = nullptr;  // the context's
    bool use_hardware = false;
    nvjpegJpegStream_t stream = nullptr;  // the last parsed
    nvjpegDecodeParams_t params = nullptr;
    std::unique_ptr<Decoder> gpu, hybrid;
    nvjpegJpegStream_t hw_stream = nullptr;  // for the hardware handle's checks
    nvjpegEncoderState_t enc = nullptr;
    nvjpegEncoderParams_t enc_params = nullptr;
    nvjpegChromaSubsampling_t enc_css = NVJPEG_CSS_UNKNOWN;
    int enc_quality = 0;
    // What parse() found.
    Decoder* chosen = nullptr;
    bool use_hw = false;
    nvjpegOutputFormat_t format = NVJPEG_OUTPUT_BGRI;
    cudaEvent_t ready = nullptr;  // for the hardware decoder: where this codec's stream stands
    std::size_t hw_batches = 0, hw_images = 0;  // led by this codec's decode calls

    ~State() {
        if (ready) cudaEventDestroy(ready);
        if (enc_params) nvjpegEncoderParamsDestroy(enc_params);
        if (enc) nvjpegEncoderStateDestroy(enc);
        if (hw_stream) nvjpegJpegStreamDestroy(hw_stream);
        gpu.reset();
        hybrid.reset();
        if (params) nvjpegDecodeParamsDestroy(params);
        if (stream) nvjpegJpegStreamDestroy(stream);
    }
};

GpuJpegCodec::GpuJpegCodec(int device) : s_(std::make_unique<State>()) {
    s_->device = device;
    s_->context = DeviceContext::of(device, true);
    use_device(device);
    s_->handle = s_->context->handle;
    check(nvjpegJpegStreamCreate(s_->handle, &s_->stream), "nvjpegJpegStreamCreate");
    check(nvjpegDecodeParamsCreate(s_->handle, &s_->params), "nvjpegDecodeParamsCreate");
}

GpuJpegCodec::~GpuJpegCodec() = default;

bool GpuJpegCodec::hardware_decoder() const {
    return s_->context->hardware_started(true) && s_->context->hw;
}

std::pair<std::size_t, std::size_t> GpuJpegCodec::hardware_batches() const {
    return {s_->hw_batches, s_->hw_images};
}

bool GpuJpegCodec::started(int device) {
    return DeviceContext::of(device, false) != nullptr;
}

bool GpuJpegCodec::starting() {
    return DeviceContext::under_way(false);
}

bool GpuJpegCodec::decoder_started(int device) {
    DeviceContext* c = DeviceContext::of(device, false);
    return c && c->hardware_started(false);
}

std::optional<GpuJpegInfo> GpuJpegCodec::parse(std::span<const std::uint8_t> jpeg, bool wait, bool hardware) {
    State& s = *s_;
    // Until the hardware decoder has started: the CPU decodes (auto), or wait for it.
    if (hardware && !s.context->hardware_started(wait)) return std::nullopt;
    if (hardware && s.context->hw && !s.hw_stream)
        check(nvjpegJpegStreamCreate(s.context->hw, &s.hw_stream), "nvjpegJpegStreamCreate (hardware)");
    s.chosen = nullptr;
    s.use_hw = false;
    if (nvjpegJpegStreamParse(s.handle, jpeg.data(), jpeg.size(), 0, 0, s.stream) != NVJPEG_STATUS_SUCCESS)
        return std::nullopt;
    unsigned width = 0, height = 0, components = 0, precision = 0;
    nvjpegExifOrientation_t orientation = NVJPEG_ORIENTATION_UNKNOWN;
    if (nvjpegJpegStreamGetFrameDimensions(s.stream, &width, &height) != NVJPEG_STATUS_SUCCESS ||
        nvjpegJpegStreamGetComponentsNum(s.stream, &components) != NVJPEG_STATUS_SUCCESS ||
        nvjpegJpegStreamGetSamplePrecision(s.stream, &precision) != NVJPEG_STATUS_SUCCESS ||
        nvjpegJpegStreamGetExifOrientation(s.stream, &orientation) != NVJPEG_STATUS_SUCCESS)
        return std::nullopt;
    // CMYK/YCCK (4 components) and 12-bit samples: OpenCV's decoder converts them.
    if ((components != 1 && components != 3) || precision != 8 || width == 0 || height == 0) return std::nullopt;
    if (orientation == NVJPEG_ORIENTATION_UNKNOWN) orientation = NVJPEG_ORIENTATION_NORMAL;
    s.format = components == 1 ? NVJPEG_OUTPUT_Y : NVJPEG_OUTPUT_BGRI;
    check(nvjpegDecodeParamsSetOutputFormat(s.params, s.format), "nvjpegDecodeParamsSetOutputFormat");
    check(nvjpegDecodeParamsSetExifOrientation(s.params, orientation), "nvjpegDecodeParamsSetExifOrientation");

    GpuJpegInfo info;
    info.width = static_cast<int>(swaps_sides(orientation) ? height : width);
    info.height = static_cast<int>(swaps_sides(orientation) ? width : height);
    info.channels = components == 1 ? 1 : 3;
    int unsupported = 1;
    nvjpegHandle_t hw = hardware ? s.context->hw : nullptr;
    if (hw && orientation == NVJPEG_ORIENTATION_NORMAL &&
        nvjpegJpegStreamParseHeader(hw, jpeg.data(), jpeg.size(), s.hw_stream) == NVJPEG_STATUS_SUCCESS &&
        nvjpegDecodeBatchedSupported(hw, s.hw_stream, &unsupported) == NVJPEG_STATUS_SUCCESS && unsupported == 0) {
        s.use_hw = true;
        info.decoder = "hardware";
        return info;
    }
    // The decoupled decoders' states take ~45 ms each to make: only for the
    // streams the hardware decoder does not take.
    if (!s.gpu) s.gpu = std::make_unique<Decoder>(s.handle, NVJPEG_BACKEND_GPU_HYBRID, "gpu");
    if (!s.hybrid) s.hybrid = std::make_unique<Decoder>(s.handle, NVJPEG_BACKEND_HYBRID, "hybrid");
    for (Decoder* d : {s.gpu.get(), s.hybrid.get()}) {
        unsupported = 1;
        if (nvjpegDecoderJpegSupported(d->decoder, s.stream, s.params, &unsupported) == NVJPEG_STATUS_SUCCESS &&
            unsupported == 0) {
            s.chosen = d;
            info.decoder = d->name;
            return info;
        }
    }
    return std::nullopt;
}

bool GpuJpegCodec::decode(std::span<const std::uint8_t> jpeg, const ImageView& dst, cudaStream_t stream) {
    State& s = *s_;
    use_device(s.device);
    nvjpegImage_t out{};
    out.channel[0] = reinterpret_cast<unsigned char*>(dst.data);
    out.pitch[0] = dst.stride;
    nvjpegStatus_t st;
    if (s.use_hw) {
        if (!s.ready) CBI_CUDA_CHECK(cudaEventCreateWithFlags(&s.ready, cudaEventDisableTiming), "cudaEventCreate");
        CBI_CUDA_CHECK(cudaEventRecord(s.ready, stream), "cudaEventRecord");
        HwRequest r;
        r.data = jpeg.data();
        r.length = jpeg.size();
        r.out = out;
        r.width = static_cast<unsigned>(dst.width);
        r.height = static_cast<unsigned>(dst.height);
        r.format = s.format;
        r.ready = s.ready;
        s.context->decode_hardware(r, stream);
        s.hw_batches += r.led;
        s.hw_images += r.led_images;
        CBI_CUDA_CHECK(r.cuda, "nvjpegDecodeBatched");
        // Some hosts' hardware decoder fails to allocate where the others
        // would not: the CPU decodes the image.
        if (r.status == NVJPEG_STATUS_ALLOCATOR_FAILURE) return false;
        st = r.status;
    } else if (s.chosen) {
        Decoder& d = *s.chosen;
        st = nvjpegDecodeJpegHost(s.handle, d.decoder, d.state, s.params, s.stream);
        if (st == NVJPEG_STATUS_SUCCESS)
            st = nvjpegDecodeJpegTransferToDevice(s.handle, d.decoder, d.state, s.stream, stream);
        if (st == NVJPEG_STATUS_SUCCESS) st = nvjpegDecodeJpegDevice(s.handle, d.decoder, d.state, &out, stream);
    } else {
        return false;
    }
    if (st == NVJPEG_STATUS_SUCCESS) return true;
    if (refused(st)) return false;
    check(st, "nvJPEG decode");
    return false;
}

std::vector<std::uint8_t> GpuJpegCodec::encode(const ImageView& src, int quality, cudaStream_t stream, Chroma chroma) {
    State& s = *s_;
    use_device(s.device);
    if (src.depth != Depth::u8 || (src.channels != 1 && src.channels != 3))
        throw Error("", "the GPU JPEG encoder takes 8-bit images of 1 or 3 channels");
    if (!s.enc) {
        check(nvjpegEncoderStateCreate(s.handle, &s.enc, stream), "nvjpegEncoderStateCreate");
        check(nvjpegEncoderParamsCreate(s.handle, &s.enc_params, stream), "nvjpegEncoderParamsCreate");
    }
    if (s.enc_quality != quality) {
        check(nvjpegEncoderParamsSetQuality(s.enc_params, quality, stream), "nvjpegEncoderParamsSetQuality");
        s.enc_quality = quality;
    }
    const nvjpegChromaSubsampling_t css = src.channels == 1        ? NVJPEG_CSS_GRAY
                                          : chroma == Chroma::s444 ? NVJPEG_CSS_444
                                          : chroma == Chroma::s422 ? NVJPEG_CSS_422
                                                                   : NVJPEG_CSS_420;
    if (s.enc_css != css) {
        check(nvjpegEncoderParamsSetSamplingFactors(s.enc_params, css, stream),
              "nvjpegEncoderParamsSetSamplingFactors");
        s.enc_css = css;
    }
    nvjpegImage_t in{};
    in.channel[0] = reinterpret_cast<unsigned char*>(src.data);
    in.pitch[0] = src.stride;
    if (src.channels == 3)
        check(nvjpegEncodeImage(s.handle, s.enc, s.enc_params, &in, NVJPEG_INPUT_BGRI, src.width, src.height, stream),
              "nvjpegEncodeImage");
    else
        check(nvjpegEncodeYUV(s.handle, s.enc, s.enc_params, &in, NVJPEG_CSS_GRAY, src.width, src.height, stream),
              "nvjpegEncodeYUV");
    // Waited for here, where the task can be suspended: the retrieval below
    // would otherwise wait for the encode inside nvJPEG.
    wait_for_stream(stream, "cudaStreamSynchronize after nvjpegEncodeImage");
    std::size_t length = 0;
    check(nvjpegEncodeRetrieveBitstream(s.handle, s.enc, nullptr, &length, stream), "nvjpegEncodeRetrieveBitstream");
    std::vector<std::uint8_t> bytes(length);
    check(nvjpegEncodeRetrieveBitstream(s.handle, s.enc, bytes.data(), &length, stream),
          "nvjpegEncodeRetrieveBitstream");
    wait_for_stream(stream, "cudaStreamSynchronize after nvjpegEncodeRetrieveBitstream");
    bytes.resize(length);
    return bytes;
}

}  // namespace cbi
