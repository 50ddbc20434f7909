#pragma once
// Runs a chain of filter nodes on an image, on the CPU (TBB) or on a CUDA
// device. The graph executor of later issues generalises this.
#include <span>
#include <string>
#include <string_view>

#include "filters/filter.hpp"
#include "pipeline/image.hpp"

namespace cbi {

struct DeviceSpec {
    enum class Kind { automatic, cpu, cuda } kind = Kind::automatic;
    int index = 0;  // CUDA device ordinal
};
// "auto", "cpu", "cuda" or "cuda:N"; throws std::invalid_argument.
DeviceSpec parse_device(std::string_view text);

struct ResolvedDevice {
    bool cuda = false;
    int index = 0;
    std::string notice;  // why `auto` chose the CPU; empty otherwise
};
// Throws cbi::Error when CUDA is asked for and this build or machine has none.
ResolvedDevice resolve_device(const DeviceSpec& spec);

bool built_with_cuda();

struct RunOptions {
    ResolvedDevice device;
    int block = 256;  // CUDA threads per block
};

// Checks that the chain can run on an input of this geometry (channel
// counts, size limits) and returns the output channel count. Throws
// cbi::Error naming the node otherwise.
int check_chain(std::span<const Node> nodes, const ImageView& input);

// Runs the nodes in order; returns the last node's output (a copy of the
// input when the chain is empty).
Image run_chain(std::span<const Node> nodes, const ImageView& input, const RunOptions& options);

}  // namespace cbi
