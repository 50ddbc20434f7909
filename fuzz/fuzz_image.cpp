// Fuzz target: cbi's image-reading path (pipeline/image_io.hpp): the header
// probe, the pixel limit checked before decoding, the truncation checks and
// OpenCV's decoders behind them. The limit is small (kMaxPixels) and the
// fuzzer runs with -rss_limit_mb/-malloc_limit_mb, and the replay with a
// peak-memory check: a header that makes a decoder allocate far more than
// the limit allows (a decompression bomb) is a finding even when it is
// refused in the end. The same bytes go through read_metadata (exiv2), and
// what it keeps is written into tiny JPEG/PNG/TIFF/WebP encodings, which
// must still hold the same image: metadata may fail only with cbi::Error
// from read_metadata and a warning from encode_image.
#include <stdexcept>
#include <string>

#include <opencv2/core.hpp>

#include "fuzz/fuzz_common.hpp"
#include "pipeline/error.hpp"
#include "pipeline/image_io.hpp"

namespace {
constexpr std::uint64_t kMaxPixels = 128 * 128;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size > 64 * 1024) return -1;
    const std::span<const std::uint8_t> bytes(data, size);
    try {
        const cbi::ImageHeader h = cbi::probe_image(bytes, "fuzz");
        FUZZ_CHECK(h.format != nullptr && *h.format != '\0', "probe_image names the format");
    } catch (const cbi::Error&) {}
    try {
        const cv::Mat m = cbi::decode_image(bytes, "fuzz", kMaxPixels);
        FUZZ_CHECK(!m.empty(), "decode_image returned an empty image");
        FUZZ_CHECK(m.total() <= kMaxPixels,
                   "decoded " + std::to_string(m.cols) + "x" + std::to_string(m.rows) + ", over the pixel limit");
        FUZZ_CHECK(m.depth() == CV_8U || m.depth() == CV_16U || m.depth() == CV_32F, "depth 8u, 16u or 32f");
        FUZZ_CHECK(m.channels() == 1 || m.channels() == 3 || m.channels() == 4, "1, 3 or 4 channels");
    } catch (const cbi::Error&) {}
    try {
        const cbi::ImageMetadata meta = cbi::read_metadata(bytes, "fuzz");
        if (!meta.empty()) {
            static const cv::Mat tiny(3, 2, CV_8UC3, cv::Scalar(1, 2, 3));
            for (const char* name : {"x.jpg", "x.png", "x.tif", "x.webp"}) {
                const cbi::EncodedImage e = cbi::encode_image(name, tiny, {}, meta);
                cv::Mat back;
                try {
                    back = cbi::decode_image(e.bytes, name, kMaxPixels);
                } catch (const cbi::Error& err) {
                    FUZZ_CHECK(false, std::string(name) + " with metadata does not decode: " + err.what());
                }
                // JPEG and 8-bit TIFF are turned as a kept orientation says
                // (one from an input whose pixels were not turned).
                const bool turnable = name == std::string("x.jpg") || name == std::string("x.tif");
                const bool same = back.cols == 2 && back.rows == 3,
                           turned = turnable && back.cols == 3 && back.rows == 2;
                FUZZ_CHECK((same || turned) && back.channels() == 3,
                           std::string(name) + " with metadata decodes as " + std::to_string(back.cols) + "x" +
                               std::to_string(back.rows) + "x" + std::to_string(back.channels()) +
                               ", not as the 2x3x3 image");
            }
        }
    } catch (const cbi::Error&) {}
    return 0;
}
