// Device selection and the CPU backend.
#include "pipeline/backend.hpp"

#include <tbb/task_arena.h>

#include <charconv>
#include <chrono>
#include <stdexcept>
#include <vector>

#include "filters/cpu/backend.hpp"
#include "pipeline/error.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/image.hpp"
#if CBI_HAVE_NVJPEG
#include "pipeline/jpeg_gpu.hpp"
#endif
#if CBI_HAVE_CUDA
#include "pipeline/cuda_runtime.hpp"
#endif

namespace cbi {

bool built_with_cuda() {
#if CBI_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

void warm_up(const ResolvedDevice& device) {
#if CBI_HAVE_CUDA
    if (device.cuda) {
        use_device(device.index);
        CBI_CUDA_CHECK(cudaFree(nullptr), "cudaFree(nullptr) to start the device");
    }
#else
    (void)device;
#endif
}

bool built_with_nvjpeg() {
#if CBI_HAVE_NVJPEG
    return true;
#else
    return false;
#endif
}

bool gpu_codec_starting() {
#if CBI_HAVE_NVJPEG
    return GpuJpegCodec::starting();
#else
    return false;
#endif
}

DeviceSpec parse_device(std::string_view text) {
    if (text == "auto") return {DeviceSpec::Kind::automatic, 0};
    if (text == "cpu") return {DeviceSpec::Kind::cpu, 0};
    if (text == "cuda") return {DeviceSpec::Kind::cuda, 0};
    if (text.starts_with("cuda:")) {
        const auto digits = text.substr(5);
        int index = -1;
        auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
        if (!digits.empty() && ec == std::errc{} && ptr == digits.data() + digits.size() && index >= 0)
            return {DeviceSpec::Kind::cuda, index, true};
    }
    throw std::invalid_argument("device '" + std::string(text) + "' must be auto, cpu, cuda or cuda:N");
}

ResolvedDevice resolve_device(const DeviceSpec& spec, int host_rank) {
    if (spec.kind == DeviceSpec::Kind::cpu) return {false, 0, ""};
#if CBI_HAVE_CUDA
    std::string why;
    const int count = cuda_device_count(why);
    if (spec.kind == DeviceSpec::Kind::cuda) {
        if (count == 0) throw Error("--device cuda", "no CUDA device is usable: " + why);
        if (spec.index >= count)
            throw Error("--device cuda:" + std::to_string(spec.index),
                        "no such device; this machine has " + std::to_string(count));
        return {true, spec.named ? spec.index : host_rank % count, ""};
    }
    if (count > 0) return {true, host_rank % count, ""};
    return {false, 0, "no CUDA device (" + why + "), running on the CPU"};
#else
    (void)host_rank;
    if (spec.kind == DeviceSpec::Kind::cuda)
        throw Error("--device cuda",
                    "this build of cbi has no CUDA backend (configured with CBI_WITH_CUDA=OFF or without nvcc)");
    return {false, 0, "this build has no CUDA backend, running on the CPU"};
#endif
}

std::vector<DeviceSpec> parse_devices(std::string_view text) {
    if (text == "cuda:all") return {{DeviceSpec::Kind::cuda, kAllDevices, true}};
    if (!text.starts_with("cuda:") || text.find(',') == std::string_view::npos) return {parse_device(text)};
    std::vector<DeviceSpec> specs;
    for (std::string_view rest = text.substr(5);;) {
        const auto comma = rest.find(',');
        const std::string_view ordinal = rest.substr(0, comma);
        if (ordinal.empty() || ordinal.find(':') != std::string_view::npos)
            throw std::invalid_argument("device list '" + std::string(text) + "' must be cuda:N,N,... or cuda:all");
        specs.push_back(parse_device("cuda:" + std::string(ordinal)));
        if (comma == std::string_view::npos) break;
        rest = rest.substr(comma + 1);
    }
    return specs;
}

std::vector<ResolvedDevice> resolve_devices(const std::vector<DeviceSpec>& specs, int host_rank) {
    std::vector<ResolvedDevice> list;
    for (const DeviceSpec& spec : specs) {
        if (spec.index != kAllDevices) {
            list.push_back(resolve_device(spec, host_rank));
            continue;
        }
        list.push_back(resolve_device({DeviceSpec::Kind::cuda, 0, true}));  // throws without a CUDA device
#if CBI_HAVE_CUDA
        std::string why;
        for (int d = 1; d < cuda_device_count(why); ++d) list.push_back({true, d, ""});
#endif
    }
    return list;
}

namespace {

// Runs each node to completion before returning, on the host buffers; the
// input and outputs are the caller's and the buffers' own memory.
class CpuBackend final : public Backend {
public:
    std::string device_name() const override {
        return "cpu, " + std::to_string(tbb::this_task_arena::max_concurrency()) + " threads";
    }
    // A slow warm-up drops a candidate at once (its runs are long).
    TuningMethod tuning() const override { return {3, true, true}; }
    // Fused colour nodes and stencil pairs run through line buffers
    // (cpu/pair_lines.hpp): any depth, channels and border but wrap.
    bool fuses() const override { return true; }
    // Every chain runs through line buffers; a window kind reads through a
    // colour node where its op converts the rows it loads.
    KernelShape kernel_shape(const FilterRun& node, const KernelFormat&) const override {
        if (node.fused_color && category_of(node.filter) == Category::window)
            return {window_takes_colour_cpu(node), std::nullopt};
        return {};
    }
    // Every node applies a `then` here (cpu/then.hpp); a blend fuses with one
    // stencil of its other operand (the stencil's tasks blend what they store),
    // not with two.
    KernelShape kernel_shape(const BlendRun& node, const KernelFormat&) const override {
        return {!(node.a && node.b), std::nullopt};
    }

    std::size_t allocate(const BufferPlan& plan) override {
        buffers_.clear();
        for (int ch : plan.buffer_channels) buffers_.emplace_back(plan.width, plan.height, ch, plan.depth);
        return plan.buffer_channels.size();
    }
    void release() override { buffers_.clear(); }
    std::byte* buffer(int index) const override { return buffers_[index].view().data; }

    ImageView upload(const ImageView& input) override { return input; }
    void run_node(const FilterRun& node, const ImageView& src, const ImageView& dst) override {
        run_node_cpu(node, src, dst);
    }
    void run_blend(const BlendFilter& blend, const ScheduleSpec& schedule, const ImageView& a, const ImageView& b,
                   const ImageView& dst, const std::optional<Filter>& then) override {
        run_blend_cpu(blend, schedule, a, b, dst, then);
    }
    void run_fused_blend(const BlendRun& run, const ImageView& src, const ImageView& dst) override {
        run_blend_of_stencil_cpu(run, src, dst);
    }
    ImageView download(const ImageView& result, std::size_t) override { return result; }
    void finish() override {}

    void start_timer() override { start_ = std::chrono::steady_clock::now(); }
    double stop_timer_ms() override {
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
    }

private:
    std::vector<Image> buffers_;
    std::chrono::steady_clock::time_point start_;
};

}  // namespace

std::unique_ptr<Backend> make_backend(const ResolvedDevice& device, int block) {
    if (!device.cuda) return std::make_unique<CpuBackend>();
#if CBI_HAVE_CUDA
    return make_cuda_backend(device.index, block);
#else
    (void)block;
    throw Error("--device cuda", "this build of cbi has no CUDA backend");
#endif
}

}  // namespace cbi
