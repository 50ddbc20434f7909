#pragma once
// Device selection: which device a run takes (the CPU or a CUDA device),
// parsed from text ("auto", "cpu", "cuda:N", "cuda:all") and resolved
// against this build and machine, and what the build can do (CUDA,
// nvJPEG). Defined in pipeline/backend.cpp.
#include <string>
#include <string_view>
#include <vector>

namespace cbi {

struct DeviceSpec {
    enum class Kind { automatic, cpu, cuda } kind = Kind::automatic;
    int index = 0;  // CUDA device ordinal
    bool named = false;  // cuda:N gave the ordinal (cuda and auto did not)
};
// "auto", "cpu", "cuda" or "cuda:N"; throws std::invalid_argument.
DeviceSpec parse_device(std::string_view text);

struct ResolvedDevice {
    bool cuda = false;
    int index = 0;
    std::string notice;  // why `auto` chose the CPU; empty otherwise
};
// Throws cbi::Error when CUDA is asked for and this build or machine has none.
// A spec that names no ordinal (cuda, auto) takes device host_rank mod the
// number of devices: the GPU of an MPI rank among the ranks on its host.
ResolvedDevice resolve_device(const DeviceSpec& spec, int host_rank = 0);
// Batch mode's devices: "cuda:all" (every usable CUDA device: one spec with
// index kAllDevices), a list "cuda:0,2" (an ordinal may repeat: cuda:0,0
// gives one GPU two sets of processors), else the one device parse_device
// reads. Throws std::invalid_argument when malformed.
inline constexpr int kAllDevices = -1;
std::vector<DeviceSpec> parse_devices(std::string_view text);
// Throws cbi::Error as resolve_device.
std::vector<ResolvedDevice> resolve_devices(const std::vector<DeviceSpec>& specs, int host_rank = 0);

bool built_with_cuda();
// Starts `device` (CUDA: its context, a few hundred ms) so that a later run
// does not wait for it; another thread may read and decode meanwhile. No-op
// on the CPU. Throws cbi::Error as the run would.
void warm_up(const ResolvedDevice& device);
// Whether JPEG can be decoded and encoded on CUDA devices (nvJPEG).
bool built_with_nvjpeg();
// Whether nvJPEG is still starting on some device (on a thread of its own,
// about 1 s from the first use): a process that returns from main now
// waits for it at exit.
bool gpu_codec_starting();

}  // namespace cbi
