#pragma once
// JPEG decoding and encoding on a CUDA device with nvJPEG (builds with
// CBI_HAVE_NVJPEG only: CMake's CBI_WITH_NVJPEG). A JPEG decodes straight
// into device memory, turned as its EXIF orientation says (as the CPU path
// turns it); what nvJPEG cannot decode (CMYK, 12-bit, arithmetic coding, a
// corrupt or truncated stream) is left to the caller, which decodes it on the
// CPU: that path then gives a corrupt file its usual one-line error.
// One codec serves one thread at a time (it owns nvJPEG's decode and encode
// state); a batch gives each processor its own.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "filters/image_view.hpp"

namespace cbi {

// What the GPU decoder will produce for a stream: 8-bit samples, 1 (gray)
// or 3 (BGR) channels, width x height after the EXIF orientation.
struct GpuJpegInfo {
    int width = 0, height = 0, channels = 0;
    const char* decoder = "";  // "hardware", "gpu" (GPU Huffman) or "hybrid" (CPU Huffman)
};

class GpuJpegCodec {
public:
    // Whether the codecs of `device` can be made without waiting: the first
    // call starts nvJPEG there on a thread of its own (~0.3 s after the CUDA
    // context, once per process and device), so a batch can decode and
    // encode its first images on the CPU meanwhile. The hardware decoder
    // starts after that (~0.7 s more): decoder_started.
    static bool started(int device);
    static bool decoder_started(int device);
    // Whether nvJPEG is still starting on some device. A process that ends
    // meanwhile waits for it at exit (ending under it would tear CUDA down
    // under nvJPEG's start), unless it ends with _exit.
    static bool starting();
    // Takes nvJPEG's handles on `device` (waiting for them to start) and
    // makes this codec's states. Throws cbi::Error when nvJPEG cannot start
    // there.
    explicit GpuJpegCodec(int device);
    ~GpuJpegCodec();
    GpuJpegCodec(const GpuJpegCodec&) = delete;
    GpuJpegCodec& operator=(const GpuJpegCodec&) = delete;

    // Parses the stream's headers: nullopt when no nvJPEG decoder takes it
    // or, unless `wait`, the hardware decoder has not started yet (the
    // caller decodes on the CPU). Without `hardware`, only nvJPEG's CUDA
    // decoders, without waiting for the hardware decoder's start.
    std::optional<GpuJpegInfo> parse(std::span<const std::uint8_t> jpeg, bool wait = true, bool hardware = true);
    // Decodes the stream last parsed into `dst` (device memory of
    // info.width x info.height x info.channels, 8u) on `stream`. False when
    // nvJPEG fails on the data (the caller decodes on the CPU); throws
    // cbi::Error for CUDA errors. The bytes must stay alive until `stream`
    // has finished.
    bool decode(std::span<const std::uint8_t> jpeg, const ImageView& dst, cudaStream_t stream);

    // Encodes `src` (device memory, 8u, 1 or 3 channels, BGR) at `quality`
    // (1-100), colour with `chroma` subsampling (4:2:0 is what OpenCV
    // writes by default); waits for `stream`. Throws cbi::Error.
    enum class Chroma { s420, s422, s444 };
    std::vector<std::uint8_t> encode(const ImageView& src, int quality, cudaStream_t stream,
                                     Chroma chroma = Chroma::s420);

    // Whether this GPU has hardware JPEG decoders nvJPEG uses (waits until
    // they have started).
    bool hardware_decoder() const;
    // The hardware decoder's batches that calls of decode on this codec led
    // (a thread whose image waits decodes the next batch of what waits), and
    // the images in them.
    std::pair<std::size_t, std::size_t> hardware_batches() const;

private:
    struct State;
    std::unique_ptr<State> s_;
};

}  // namespace cbi
