#pragma once
// JPEG decoded by libjpeg-turbo directly: the library OpenCV's reader uses,
// with the same settings (its defaults: the accurate integer IDCT, fancy
// upsampling) into gray or BGR, so the pixels equal cv::imdecode's, turned
// as the EXIF orientation says as cv::imdecode turns them. Two differences:
//   - libjpeg's warnings about the compressed data (a scan cut short, a bad
//     Huffman or arithmetic code, a missing restart marker) are errors:
//     libjpeg fills what it could not decode with gray and OpenCV keeps that
//     image without a word;
//   - it writes the rows straight into the image, where OpenCV 4.6 decodes
//     RGB a row at a time and swaps it to BGR (about twice the time).
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include <opencv2/core.hpp>

namespace cbi {

// The JPEG in `bytes` (checked by check_image) as an 8-bit gray or BGR
// image, turned by its EXIF orientation. Throws cbi::Error naming `subject`
// for corrupt compressed data. nullopt for what it leaves to OpenCV: four
// components (CMYK, YCCK), a file without Huffman tables (Motion JPEG
// frames: OpenCV supplies the standard ones), and any error libjpeg
// raises (OpenCV then gives its result or its error).
std::optional<cv::Mat> decode_jpeg(std::span<const std::uint8_t> bytes, const std::string& subject);

// The EXIF orientation (1..8) in a JPEG's APP1 Exif segment `exif` (from
// its "Exif\0\0" on), or 0 when it has none or cannot be read.
int exif_orientation(std::span<const std::uint8_t> exif);

}  // namespace cbi
