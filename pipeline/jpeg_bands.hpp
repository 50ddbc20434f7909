#pragma once
// A large JPEG encoded on all cores: libjpeg-turbo (through OpenCV) encodes
// bands of rows in parallel, and the bands are joined into one baseline
// stream by restart markers. A restart marker resets exactly what a band's
// own encoding starts from (the DC predictions, byte alignment), so the
// result is the stream libjpeg writes for the whole image with that restart
// interval (cv::IMWRITE_JPEG_RST_INTERVAL), byte for byte, and decodes to
// the same pixels as OpenCV's one-core encoding. Band heights are fixed, so
// the bytes do not depend on the number of threads.
#include <cstdint>
#include <optional>
#include <vector>

#include <opencv2/core.hpp>

namespace cbi {

// Rows per band: 16 MCU rows of 4:2:0 (OpenCV's chroma subsampling).
inline constexpr int kJpegBandRows = 256;

// `image` (8-bit, 1 or 3 channels, BGR) at `quality` 1..100 in bands of
// kJpegBandRows; nullopt when it is one band, when the restart interval
// would not fit its 16-bit field, or when the bands' headers do not match
// (then encode the image whole).
std::optional<std::vector<std::uint8_t>> encode_jpeg_bands(const cv::Mat& image, int quality);

}  // namespace cbi
