#pragma once
// Device selection: which device a run takes (the CPU or a CUDA device),
// parsed from text ("auto", "cpu", "cuda:N", "cuda:all") and resolved
// against this build and machine, and what the build can do (CUDA,
// nvJPEG) (defined in pipeline/backend.cpp); the choice `auto` makes for one
// image or a batch, the devices of a batch and the check of a JPEG codec
// choice (pipeline/device.cpp). Shared by cbi-filter, the Python module and
// embedding applications; nothing here prints.
#include <string>
#include <string_view>
#include <vector>

namespace cbi {

class Graph;         // pipeline/graph.hpp
struct ImageHeader;  // pipeline/image_io.hpp
struct BatchJob;     // pipeline/batch.hpp
struct BatchDevice;  // pipeline/batch.hpp
struct RunOptions;   // pipeline/executor.hpp

struct DeviceSpec {
    enum class Kind { automatic, cpu, cuda } kind = Kind::automatic;
    int index = 0;       // CUDA device ordinal
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

// Where JPEG files are decoded and encoded (cbi-filter --codec): automatic
// (one image: the CPU; a batch on a CUDA device with nvJPEG: both at once,
// BatchOptions::JpegCodec::automatic), the CPU, or the GPU (nvJPEG; an error
// where it or a CUDA device is missing). Other formats always use the CPU.
enum class Codec { automatic, cpu, gpu };
// "auto", "cpu" or "gpu"; throws std::invalid_argument.
Codec parse_codec(std::string_view text);
// Codec::gpu where JPEG cannot be decoded on `device` (no nvJPEG in this
// build, or not a CUDA device): throws cbi::Unsupported naming "--codec gpu".
void require_codec(Codec codec, const ResolvedDevice& device);

// What `auto` takes for one image: the CPU where its run is expected to take
// less than starting a CUDA device (one_image_runs_on_cpu,
// pipeline/defaults.hpp; `header` gives the image's size and format, threads
// are TBB's active limit); else `spec` unchanged. Any other spec, a build
// without CUDA and Codec::gpu (which asks for the device) keep `spec`.
DeviceSpec choose_device(const DeviceSpec& spec, const Graph& graph, const ImageHeader& header,
                         Codec codec = Codec::automatic);
// The same for a batch: the CPU where all its images' runs are expected to
// take less than starting a CUDA device (batch_runs_on_cpu), the largest of
// up to 8 images spread over the jobs standing for all (their headers:
// probe_file; a file that cannot be probed is left to the batch to report).
DeviceSpec choose_device(const DeviceSpec& spec, const Graph& graph, const std::vector<BatchJob>& jobs,
                         Codec codec = Codec::automatic);

// The devices a batch feeds (run_batch), each with its own processors
// (GraphExecutors over `graph` with `options`, their device replaced):
// options.device alone, or for a list (several specs, or cuda:all) every
// device resolve_devices gives for it (throws as it does); a GPU's
// processors: gpu_batch_processors(jpeg_on_device).
std::vector<BatchDevice> batch_devices(const Graph& graph, const RunOptions& options,
                                       const std::vector<DeviceSpec>& specs, int host_rank = 0,
                                       bool jpeg_on_device = false);
// The processors of a GPU in a batch whose JPEG inputs do or do not decode
// on the devices (cbi::jpeg_on_device).
int gpu_batch_processors(bool jpeg_on_device);

}  // namespace cbi
