// The device choices of `auto` (one image, a batch), a batch's devices and
// the JPEG codec check. parse/resolve live in pipeline/backend.cpp.
#include "pipeline/device.hpp"

#include <tbb/global_control.h>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>

#include "pipeline/batch.hpp"
#include "pipeline/defaults.hpp"
#include "pipeline/error.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/graph.hpp"
#include "pipeline/image_io.hpp"

namespace cbi {
namespace {

// The sample depth of an image as its header gives it.
Depth depth_of(const ImageHeader& header) {
    return header.bytes_per_sample == 1 ? Depth::u8 : header.bytes_per_sample == 2 ? Depth::u16 : Depth::f32;
}

// The threads TBB runs on: what the device estimates take.
int active_threads() {
    return static_cast<int>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
}

// Whether `auto` may pick the CPU over CUDA: no device named, no
// Codec::gpu (which asks for the device), a build with CUDA.
bool auto_may_take_cpu(const DeviceSpec& spec, Codec codec) {
    return spec.kind == DeviceSpec::Kind::automatic && codec != Codec::gpu && built_with_cuda();
}

}  // namespace

Codec parse_codec(std::string_view text) {
    if (text == "auto") return Codec::automatic;
    if (text == "cpu") return Codec::cpu;
    if (text == "gpu") return Codec::gpu;
    throw std::invalid_argument("codec '" + std::string(text) + "' must be auto, cpu or gpu");
}

void require_codec(Codec codec, const ResolvedDevice& device) {
    if (codec != Codec::gpu) return;
    if (!built_with_nvjpeg())
        throw Unsupported("--codec gpu", "this build has no nvJPEG (CBI_WITH_NVJPEG); use --codec auto or cpu");
    if (!device.cuda) throw Unsupported("--codec gpu", "needs a CUDA device (--device cuda); use --codec auto or cpu");
}

DeviceSpec choose_device(const DeviceSpec& spec, const Graph& graph, const ImageHeader& header, Codec codec) {
    if (!auto_may_take_cpu(spec, codec)) return spec;
    if (!one_image_runs_on_cpu(graph, header.width, header.height, static_cast<int>(header.channels), depth_of(header),
                               active_threads()))
        return spec;
    return {DeviceSpec::Kind::cpu, 0};
}

DeviceSpec choose_device(const DeviceSpec& spec, const Graph& graph, const std::vector<BatchJob>& jobs, Codec codec) {
    if (!auto_may_take_cpu(spec, codec) || jobs.empty()) return spec;
    constexpr std::size_t kSampled = 8;
    const std::size_t sampled = std::min(kSampled, jobs.size());
    std::optional<ImageHeader> largest;
    for (std::size_t i = 0; i < sampled; ++i) {
        const auto& file = jobs[i * jobs.size() / sampled].input;
        try {
            const ImageHeader h = probe_file(file);
            if (!largest || h.decoded_bytes() > largest->decoded_bytes()) largest = h;
        } catch (const std::exception&) {
            // the batch reports the file
        }
    }
    if (!largest) return spec;
    if (!batch_runs_on_cpu(graph, largest->width, largest->height, static_cast<int>(largest->channels),
                           depth_of(*largest), active_threads(), jobs.size()))
        return spec;
    return {DeviceSpec::Kind::cpu, 0};
}

int gpu_batch_processors(bool jpeg_on_device) {
    return jpeg_on_device && built_with_nvjpeg() ? kGpuJpegBatchProcessors : kGpuBatchProcessors;
}

std::vector<BatchDevice> batch_devices(const Graph& graph, const RunOptions& options,
                                       const std::vector<DeviceSpec>& specs, int host_rank, bool jpeg_on_device) {
    std::vector<ResolvedDevice> resolved{options.device};
    if (specs.size() > 1 || (!specs.empty() && specs.front().index == kAllDevices))
        resolved = resolve_devices(specs, host_rank);
    const int gpu_processors = gpu_batch_processors(jpeg_on_device);
    std::vector<BatchDevice> devices;
    for (const ResolvedDevice& d : resolved) {
        RunOptions per_device = options;
        per_device.device = d;
        devices.push_back({d.cuda ? "cuda:" + std::to_string(d.index) : "cpu",
                           graph_processor_factory(graph, per_device), d.cuda ? gpu_processors : 0});
    }
    return devices;
}

}  // namespace cbi
