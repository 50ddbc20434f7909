#pragma once
// One image file through the pipeline, the way cbi-filter runs one image:
//   read -> check (header, limits, truncation) -> device choice (`auto`:
//   choose_device; the device starts while the file decodes) -> decode (CPU,
//   or with Codec::gpu a JPEG on the device) -> GraphExecutor -> encode ->
//   atomic write, with the input's metadata.
// For folders and lists of files, pipeline/batch.hpp runs the same steps per
// file (input_metadata and write_output below are shared with it).
// Library code: it never prints or exits; notices and warnings come back
// through FileOptions::on_message, step timings in the FileReport, errors
// as exceptions.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "pipeline/device.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/graph.hpp"
#include "pipeline/image_io.hpp"
#include "pipeline/processor.hpp"

namespace cbi {

struct FileOptions {
    // The device: `automatic` takes choose_device for this image (the CPU
    // where that is faster than starting CUDA). host_rank as resolve_device.
    DeviceSpec device;
    int host_rank = 0;
    // Where a JPEG is decoded and encoded: Codec::gpu on the device (nvJPEG;
    // what its decoder refuses is decoded on the CPU); otherwise the CPU.
    Codec codec = Codec::automatic;
    // Block size, fusion and the tuning cache of `auto` schedules (the
    // caller keeps it to look at write_error()); `run.device` is ignored:
    // run_file resolves `device`.
    RunOptions run;
    // Refused before decoding (check_image).
    std::uint64_t max_pixels = default_max_pixels;
    std::uint64_t max_bytes = default_max_image_bytes;
    // Encoding of every output; the input's metadata is carried unless write.strip.
    WriteOptions write;
    // One line each, called on the calling thread before run_file returns or
    // throws: notice, why the device is not what was asked for (`auto`
    // without a CUDA device); warning, metadata that could not be read or
    // written (the pixels are written without it), naming the file.
    enum class Message { notice, warning };
    std::function<void(Message, const std::string&)> on_message;
};

// A step of run_file and the seconds it took; the steps follow one another
// from run_file's start to its return.
struct FileStep {
    const char* name;  // "read+check", then "GPU codec+run", "write" or "decode", "device wait", "run", "encode+write"
    double seconds;
};

struct FileReport {
    ResolvedDevice device;  // the device the graph ran on
    std::vector<FileStep> steps;
    std::vector<std::filesystem::path> outputs;  // written, in the graph's output order
};

// Runs `graph` on the image file `input` and writes its outputs: the first
// to `output`, the others beside it (output_path). Nothing is written unless
// every output can be (the pipeline takes the input's format, and each
// output's format can store its result); an output is never the input.
// Throws: std::invalid_argument (an output is the input), cbi::Error naming
// the file (unreadable, over the limits, corrupt or truncated, a pipeline
// that cannot take it, a failed write), cbi::Unsupported (Codec::gpu without
// nvJPEG or a CUDA device, or what a schedule cannot run), cv::Exception and
// std::bad_alloc as OpenCV and allocation throw them. A failed write leaves
// no partial file (write_image_atomic).
FileReport run_file(const std::filesystem::path& input, const std::filesystem::path& output, const Graph& graph,
                    const FileOptions& options = {});

// Where output `index` of `graph` goes when the first goes to `first`: the
// first to `first`, the others beside it as STEM.NODE.EXT.
std::filesystem::path output_path(const std::filesystem::path& first, const Graph& graph, std::size_t index);

// Steps shared by run_file and the batch runner.

// The metadata of an input to carry to its outputs: none with write.strip;
// when it cannot be read, none and `warning` set (one line naming `subject`).
ImageMetadata input_metadata(std::span<const std::uint8_t> bytes, const std::string& subject, const WriteOptions& write,
                             std::string& warning);

// Writes a processed image atomically: the device's encoding when it made
// one (write_encoded_atomic), else the image encoded here
// (write_image_atomic). Returns the metadata warning, as they do.
std::string write_output(const std::filesystem::path& out, Processor::FileResult result, const WriteOptions& write,
                         const ImageMetadata& metadata);

}  // namespace cbi
