#pragma once
// A PNG encoded on all cores: bands of rows are filtered and deflated in
// parallel (zlib), and the bands' deflate streams are joined into the one
// zlib stream of the image's IDAT chunks, as pigz joins its blocks. Every
// band but the last ends with a sync flush (an empty stored block, byte
// aligned), so the concatenation is one valid stream; the zlib trailer's
// Adler-32 is the bands' combined (adler32_combine). Each row is filtered
// with Sub and deflated at level 1 with the run-length strategy: what
// OpenCV writes by default (libpng with PNG_FILTER_SUB, Z_BEST_SPEED,
// Z_RLE), so the files are about the same size. Band heights depend only
// on the row's length, so the bytes do not depend on the number of
// threads.
#include <cstdint>
#include <optional>
#include <vector>

#include <opencv2/core.hpp>

namespace cbi {

// `image` (8- or 16-bit; 1, 3 or 4 channels, BGR(A) as OpenCV holds them)
// as a PNG file's bytes; nullopt when it is one band (then encode it whole).
std::optional<std::vector<std::uint8_t>> encode_png_bands(const cv::Mat& image);

// The rows of one band for rows of `row_bytes` bytes (each band about 1 MiB).
int png_band_rows(std::size_t row_bytes);

}  // namespace cbi
