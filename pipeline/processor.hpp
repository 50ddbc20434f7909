#pragma once
// What the batch runner needs from the filter graph: something that turns
// one image into its result. One Processor is used by one thread at a time;
// a CUDA processor owns its stream and staging buffers, so K processors
// give K images in flight. Implemented by GraphExecutor
// (pipeline/executor.hpp).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "pipeline/image.hpp"

namespace cbi {

// Where a device processor's time went (--stats): decoding JPEGs on the
// device (parsing, waiting for and running the hardware decoder's batch),
// the filters (upload and launches), the result (encode or download, which
// waits for the kernels); the hardware decoder's batches this processor's
// thread led and the images in them.
struct PathTimes {
    double decode_s = 0, filter_s = 0, result_s = 0;
    std::size_t hw_batches = 0, hw_images = 0;
    PathTimes& operator+=(const PathTimes& o) {
        decode_s += o.decode_s;
        filter_s += o.filter_s;
        result_s += o.result_s;
        hw_batches += o.hw_batches;
        hw_images += o.hw_images;
        return *this;
    }
};

class Processor {
public:
    virtual ~Processor() = default;
    // Throws cbi::Error for runtime and data errors, among them
    // cbi::Unsupported for what this device or schedule cannot run (the
    // batch runner records them per file and carries on);
    // std::invalid_argument for usage errors (malformed options).
    virtual Image process(const ImageView& input) = 0;

    // JPEG on the processor's device (CUDA with nvJPEG): whether it decodes
    // JPEG files itself.
    virtual bool decodes_jpeg() const { return false; }
    // Runs on a JPEG file's bytes (checked by check_image), decoded on the
    // device. With jpeg_quality > 0 the output is to be a JPEG: when it can
    // be one (8-bit, 1 or 3 channels) it is encoded there too and returned
    // in `encoded`, else returned in `image`. nullopt when the device's
    // decoder refused the data or, unless `wait`, is still starting (the
    // first call starts it in the background, ~0.6 s): the caller decodes it
    // on the CPU (which reports a corrupt file) and calls process. Without
    // `hardware`, never the GPU's hardware JPEG decoder, nor waits for its
    // start (about 0.7 s more: one image decodes sooner on nvJPEG's CUDA
    // decoder).
    struct FileResult {
        Image image;
        std::vector<std::uint8_t> encoded;
        int channels = 0;  // of the encoded image
    };
    virtual std::optional<FileResult> process_jpeg(std::span<const std::uint8_t> /*jpeg*/, int /*jpeg_quality*/,
                                                   bool /*wait*/, bool /*hardware*/ = true) {
        return std::nullopt;
    }
    // Whether the device's JPEG codec has started (the first call starts it
    // in the background): process_file then encodes on the device; and
    // whether its decoder has (later): process_jpeg then decodes without
    // waiting.
    virtual bool jpeg_codec_ready() { return false; }
    virtual bool jpeg_decoder_ready() { return false; }
    // process, for an image decoded on the CPU; with jpeg_quality > 0 and the
    // device's codec started, the output is encoded on the device as
    // process_jpeg does.
    virtual FileResult process_file(const ImageView& input, int /*jpeg_quality*/) {
        FileResult r;
        r.image = process(input);
        return r;
    }
    // The times of process_jpeg and process_file so far (zero where the
    // processor does not keep them).
    virtual PathTimes path_times() const { return {}; }
};

using ProcessorFactory = std::function<std::unique_ptr<Processor>()>;

}  // namespace cbi
