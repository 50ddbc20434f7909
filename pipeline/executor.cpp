#include "pipeline/executor.hpp"

#include <charconv>
#include <stdexcept>

#include "filters/cpu_backend.hpp"
#include "pipeline/error.hpp"
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

DeviceSpec parse_device(std::string_view text) {
    if (text == "auto") return {DeviceSpec::Kind::automatic, 0};
    if (text == "cpu") return {DeviceSpec::Kind::cpu, 0};
    if (text == "cuda") return {DeviceSpec::Kind::cuda, 0};
    if (text.starts_with("cuda:")) {
        const auto digits = text.substr(5);
        int index = -1;
        auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
        if (!digits.empty() && ec == std::errc{} && ptr == digits.data() + digits.size() && index >= 0)
            return {DeviceSpec::Kind::cuda, index};
    }
    throw std::invalid_argument("device '" + std::string(text) + "' must be auto, cpu, cuda or cuda:N");
}

ResolvedDevice resolve_device(const DeviceSpec& spec) {
    if (spec.kind == DeviceSpec::Kind::cpu) return {false, 0, ""};
#if CBI_HAVE_CUDA
    std::string why;
    const int count = cuda_device_count(why);
    if (spec.kind == DeviceSpec::Kind::cuda) {
        if (count == 0) throw Error("--device cuda", "no CUDA device is usable: " + why);
        if (spec.index >= count)
            throw Error("--device cuda:" + std::to_string(spec.index),
                        "no such device; this machine has " + std::to_string(count));
        return {true, spec.index, ""};
    }
    if (count > 0) return {true, 0, ""};
    return {false, 0, "no CUDA device (" + why + "), running on the CPU"};
#else
    if (spec.kind == DeviceSpec::Kind::cuda)
        throw Error("--device cuda", "this build of cbi has no CUDA backend (configured with CBI_WITH_CUDA=OFF or without nvcc)");
    return {false, 0, "this build has no CUDA backend, running on the CPU"};
#endif
}

int check_chain(std::span<const Node> nodes, const ImageView& input) {
    check_supported(input, "input");
    if (input.pixels() > max_schedulable_pixels)
        throw Error("input", describe(input) + " has more than 2^32-1 pixels, the most a schedule can index");
    int channels = input.channels;
    for (const Node& node : nodes) channels = output_channels(node.filter, channels);
    return channels;
}

Image run_chain(std::span<const Node> nodes, const ImageView& input, [[maybe_unused]] const RunOptions& options) {
    check_chain(nodes, input);
#if CBI_HAVE_CUDA
    if (options.device.cuda) return run_chain_cuda(nodes, input, options.device.index, options.block);
#endif
    Image current(input.width, input.height, input.channels, input.depth);
    copy_pixels(input, current.view());
    for (const Node& node : nodes) {
        Image next(input.width, input.height, output_channels(node.filter, current.view().channels), input.depth);
        run_node_cpu(node, current.view(), next.view());
        current = std::move(next);
    }
    return current;
}

}  // namespace cbi
