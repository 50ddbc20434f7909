#include "pipeline/png_bands.hpp"

#include <oneapi/tbb/parallel_for.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <span>
#include <string_view>

namespace cbi {
namespace {

void put32(std::uint8_t* at, std::uint32_t v) {
    at[0] = static_cast<std::uint8_t>(v >> 24);
    at[1] = static_cast<std::uint8_t>(v >> 16);
    at[2] = static_cast<std::uint8_t>(v >> 8);
    at[3] = static_cast<std::uint8_t>(v);
}

// (zlib's crc32 of a null pointer is its initial value, not c.)
std::uint32_t crc(std::uint32_t c, std::span<const std::uint8_t> bytes) {
    return bytes.empty() ? c : static_cast<std::uint32_t>(::crc32_z(c, bytes.data(), bytes.size()));
}

// A chunk is its length, type, data and the CRC of type and data: with
// the n data bytes already at chunk + 8, writes the rest around them.
void frame_chunk(std::uint8_t* chunk, std::string_view type, std::size_t n) {
    put32(chunk, static_cast<std::uint32_t>(n));
    std::memcpy(chunk + 4, type.data(), 4);
    put32(chunk + 8 + n, crc(0, std::span<const std::uint8_t>(chunk + 4, 4 + n)));
}

void put_chunk(std::vector<std::uint8_t>& out, std::string_view type, std::span<const std::uint8_t> data) {
    const std::size_t at = out.size();
    out.resize(at + 12 + data.size());
    std::copy(data.begin(), data.end(), out.begin() + static_cast<std::ptrdiff_t>(at + 8));
    frame_chunk(out.data() + at, type, data.size());
}

// One row as PNG stores it: filter type 1 (Sub) and each byte less the
// byte one pixel before (RGB(A) order; 16-bit samples big-endian).
template <class T>
void sub_row(const T* in, int width, int channels, std::uint8_t* raw, std::uint8_t* out) {
    static constexpr int kRgb[4] = {2, 1, 0, 3};  // output channel c is input channel kRgb[c] (BGR(A) -> RGB(A))
    const int bpp = channels * static_cast<int>(sizeof(T));
    for (int x = 0; x < width; ++x)
        for (int c = 0; c < channels; ++c) {
            const T v = in[x * channels + (channels >= 3 ? kRgb[c] : c)];
            std::uint8_t* d = raw + (x * channels + c) * sizeof(T);
            if constexpr (sizeof(T) == 2) {
                d[0] = static_cast<std::uint8_t>(v >> 8);
                d[1] = static_cast<std::uint8_t>(v);
            } else {
                d[0] = v;
            }
        }
    const std::size_t n = static_cast<std::size_t>(width) * static_cast<std::size_t>(bpp);
    out[0] = 1;
    std::memcpy(out + 1, raw, static_cast<std::size_t>(bpp));
    for (std::size_t i = static_cast<std::size_t>(bpp); i < n; ++i)
        out[1 + i] = static_cast<std::uint8_t>(raw[i] - raw[i - static_cast<std::size_t>(bpp)]);
}

// A band's rows, filtered and raw-deflated as one IDAT chunk (length,
// type, data, CRC); `last` ends the deflate stream, the others end with a
// sync flush. Empty `chunk` on a zlib failure.
struct Band {
    std::vector<std::uint8_t> chunk;
    std::uint32_t adler = 1;   // of the filtered bytes
    std::size_t filtered = 0;  // their count
};

template <class T>
Band deflate_band(const cv::Mat& image, int y0, int y1, bool last) {
    const int width = image.cols, channels = image.channels();
    const std::size_t row = 1 + static_cast<std::size_t>(width) * static_cast<std::size_t>(channels) * sizeof(T);
    Band band;
    band.filtered = row * static_cast<std::size_t>(y1 - y0);
    std::vector<std::uint8_t> filtered(band.filtered), raw(row - 1);
    for (int y = y0; y < y1; ++y)
        sub_row(image.ptr<T>(y), width, channels, raw.data(), filtered.data() + row * static_cast<std::size_t>(y - y0));
    band.adler = static_cast<std::uint32_t>(::adler32_z(1, filtered.data(), filtered.size()));

    z_stream z{};
    if (::deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, -15, 8, Z_RLE) != Z_OK) return {};
    // deflateBound covers the end of the stream; a sync flush adds at most an
    // empty stored block (5 bytes) and the bits before it.
    const std::size_t bound = ::deflateBound(&z, static_cast<uLong>(filtered.size())) + 16;
    band.chunk.resize(8 + bound + 4);
    z.next_in = filtered.data();
    z.avail_in = static_cast<uInt>(filtered.size());
    z.next_out = band.chunk.data() + 8;
    z.avail_out = static_cast<uInt>(bound);
    const int rc = ::deflate(&z, last ? Z_FINISH : Z_SYNC_FLUSH);
    const bool ok = last ? rc == Z_STREAM_END : rc == Z_OK && z.avail_in == 0 && z.avail_out > 0;
    ::deflateEnd(&z);
    const std::size_t n = bound - z.avail_out;
    if (!ok || n > 0x7FFFFFFF) return {};
    frame_chunk(band.chunk.data(), "IDAT", n);
    band.chunk.resize(8 + n + 4);
    return band;
}

}  // namespace

int png_band_rows(std::size_t row_bytes) {
    constexpr std::size_t kBandBytes = std::size_t{1} << 20;
    return static_cast<int>(std::clamp<std::size_t>(kBandBytes / std::max<std::size_t>(row_bytes, 1), 1, 1 << 20));
}

std::optional<std::vector<std::uint8_t>> encode_png_bands(const cv::Mat& image) {
    const int depth = image.depth(), channels = image.channels();
    if ((depth != CV_8U && depth != CV_16U) || (channels != 1 && channels != 3 && channels != 4)) return std::nullopt;
    // A band's bytes must fit zlib's sizes (uInt) and a chunk's 31-bit length.
    const std::size_t row_bytes = 1 + static_cast<std::size_t>(image.cols) * image.elemSize();
    if (row_bytes > std::size_t{1} << 28) return std::nullopt;
    const int band_rows = png_band_rows(row_bytes);
    const int bands = (image.rows + band_rows - 1) / band_rows;
    if (bands < 2) return std::nullopt;

    std::vector<Band> out_bands(static_cast<std::size_t>(bands));
    tbb::parallel_for(0, bands, [&](int b) {
        const int y0 = b * band_rows, y1 = std::min(image.rows, y0 + band_rows);
        const bool last = b == bands - 1;
        out_bands[static_cast<std::size_t>(b)] = depth == CV_8U ? deflate_band<std::uint8_t>(image, y0, y1, last)
                                                                : deflate_band<std::uint16_t>(image, y0, y1, last);
    });
    std::size_t total = 0;
    std::uint32_t adler = 1;
    for (const Band& band : out_bands) {
        if (band.chunk.empty()) return std::nullopt;
        total += band.chunk.size();
        adler = static_cast<std::uint32_t>(::adler32_combine(adler, band.adler, static_cast<z_off_t>(band.filtered)));
    }

    std::vector<std::uint8_t> png;
    png.reserve(total + 64);
    const std::uint8_t signature[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    png.insert(png.end(), std::begin(signature), std::end(signature));
    std::array<std::uint8_t, 13> ihdr{};
    put32(ihdr.data(), static_cast<std::uint32_t>(image.cols));
    put32(ihdr.data() + 4, static_cast<std::uint32_t>(image.rows));
    ihdr[8] = depth == CV_8U ? 8 : 16;
    ihdr[9] = channels == 1 ? 0 : channels == 3 ? 2 : 6;  // gray, RGB, RGBA; compression, filter, interlace 0
    put_chunk(png, "IHDR", ihdr);
    // The zlib stream: a header (deflate, 32 KiB window, the fastest level),
    // the bands' deflate streams, the Adler-32 of everything deflated.
    const std::uint8_t zlib_header[] = {0x78, 0x01};
    std::array<std::uint8_t, 4> trailer{};
    put32(trailer.data(), adler);
    put_chunk(png, "IDAT", zlib_header);
    for (const Band& band : out_bands) png.insert(png.end(), band.chunk.begin(), band.chunk.end());
    put_chunk(png, "IDAT", trailer);
    put_chunk(png, "IEND", {});
    return png;
}

}  // namespace cbi
