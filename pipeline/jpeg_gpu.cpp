// nvJPEG behind GpuJpegCodec. Decoding picks, per stream, the first decoder
// that takes it: the hardware decoder (batched API, one image a call) for
// baseline streams without an EXIF turn, then nvJPEG's GPU-Huffman decoder,
// then its CPU-Huffman one (progressive streams); the turn is applied by
// the decoder itself (decode parameters).
#include "pipeline/jpeg_gpu.hpp"

#include <nvjpeg.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
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

// What the codecs of one device share: nvJPEG's handles (each takes
// ~0.3 s to create) and the hardware decoder's states (~0.4 s each), made
// once per process and device; a codec borrows a hardware state for one
// decode call. Made in two steps, so that encoding can start while the
// hardware decoder is still being made: the default handle (encoder,
// parser, the GPU's other decoders), then the hardware handle and its first
// state.
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
                hw = h;
                try {
                    give_back(borrow(NVJPEG_OUTPUT_BGRI).index, false);
                } catch (const Error&) {  // no state: the other decoders serve
                    nvjpegDestroy(hw);
                    hw = nullptr;
                }
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

    // A hardware decoder state, batched-initialised for `format`: a free one,
    // or a new one while there are fewer than kHwStates, else the next one
    // given back. Returns its index for give_back.
    struct Borrowed {
        std::size_t index;
        nvjpegJpegState_t state;
    };
    Borrowed borrow(nvjpegOutputFormat_t format) {
        std::unique_lock lock(mutex_);
        for (;;) {
            for (std::size_t i = 0; i < hw_states_.size(); ++i)
                if (!hw_states_[i].busy) return take(i, format, lock);
            if (hw_states_.size() + creating_ < kHwStates) break;
            freed_.wait(lock);
        }
        ++creating_;
        lock.unlock();
        nvjpegJpegState_t state = nullptr;
        const nvjpegStatus_t st = nvjpegJpegStateCreate(hw, &state);
        lock.lock();
        --creating_;
        check(st, "nvjpegJpegStateCreate (hardware)");
        hw_states_.push_back({state, NVJPEG_OUTPUT_UNCHANGED, false});
        return take(hw_states_.size() - 1, format, lock);
    }
    // failed: the state must be initialised again before its next use.
    void give_back(std::size_t i, bool failed) {
        {
            std::lock_guard lock(mutex_);
            hw_states_[i].busy = false;
            if (failed) hw_states_[i].format = NVJPEG_OUTPUT_UNCHANGED;
        }
        freed_.notify_one();
    }

    nvjpegHandle_t handle = nullptr;
    nvjpegHandle_t hw = nullptr;  // read once hardware_started

private:
    int device_;
    bool hardware_started_ = false;
    // Two keep the hardware decoders busy from several threads (measured
    // on an H100: one state decodes ~550 2048x2048 images/s).
    static constexpr std::size_t kHwStates = 2;
    struct HwState {
        nvjpegJpegState_t state;
        nvjpegOutputFormat_t format;
        bool busy;
    };
    Borrowed take(std::size_t i, nvjpegOutputFormat_t format, std::unique_lock<std::mutex>&) {
        HwState& s = hw_states_[i];
        if (s.format != format) {
            check(nvjpegDecodeBatchedInitialize(hw, s.state, 1, 1, format), "nvjpegDecodeBatchedInitialize");
            s.format = format;
        }
        s.busy = true;
        return {i, s.state};
    }
    std::mutex mutex_;
    std::condition_variable freed_;
    std::vector<HwState> hw_states_;
    std::size_t creating_ = 0;
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

    ~State() {
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

std::optional<GpuJpegInfo> GpuJpegCodec::parse(std::span<const std::uint8_t> jpeg, bool wait) {
    State& s = *s_;
    // Until the hardware decoder has started: the CPU decodes (auto), or wait for it.
    if (!s.context->hardware_started(wait)) return std::nullopt;
    if (s.context->hw && !s.hw_stream)
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
    nvjpegHandle_t hw = s.context->hw;
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
        DeviceContext& c = *s.context;
        const DeviceContext::Borrowed b = c.borrow(s.format);
        const unsigned char* data = jpeg.data();
        const std::size_t length = jpeg.size();
        st = nvjpegDecodeBatched(c.hw, b.state, &data, &length, &out, stream);
        // The state's buffers serve the next decode: free it once this one is
        // done. A blocking wait (a few ms), not wait_for_stream: a suspended
        // task holding a state could need a worker thread to resume while
        // every worker waits in borrow() for a state, a deadlock.
        try {
            CBI_CUDA_CHECK(cudaStreamSynchronize(stream), "cudaStreamSynchronize after nvjpegDecodeBatched");
        } catch (...) {
            c.give_back(b.index, true);
            throw;
        }
        c.give_back(b.index, st != NVJPEG_STATUS_SUCCESS);  // a failed state is initialised again
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
