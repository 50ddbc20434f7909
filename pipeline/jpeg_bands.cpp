#include "pipeline/jpeg_bands.hpp"

#include <oneapi/tbb/parallel_for.h>

#include <cstddef>
#include <span>

#include <opencv2/imgcodecs.hpp>

namespace cbi {
namespace {

// One band's stream: the markers before the scan, the scan header, the
// entropy-coded data; empty `entropy` when the stream is not laid out as
// libjpeg writes a baseline image (SOI, segments, one SOS, data, EOI).
struct Parts {
    std::span<const std::uint8_t> headers, scan_header, entropy;
    std::size_t sof_height = 0;  // offset of the frame header's height field in headers
};

Parts split(std::span<const std::uint8_t> jpeg) {
    Parts p;
    const std::size_t n = jpeg.size();
    if (n < 4 || jpeg[0] != 0xFF || jpeg[1] != 0xD8 || jpeg[n - 2] != 0xFF || jpeg[n - 1] != 0xD9) return p;
    std::size_t at = 2;
    while (at + 4 <= n && jpeg[at] == 0xFF) {
        const std::uint8_t marker = jpeg[at + 1];
        const std::size_t length = (std::size_t{jpeg[at + 2]} << 8) | jpeg[at + 3];
        if (length < 2 || at + 2 + length > n) return p;
        if (marker == 0xC0) p.sof_height = at + 5;  // FF C0, length (2), precision (1), height (2)
        if (marker == 0xDA) {
            if (at + 2 + length > n - 2) return p;
            p.headers = jpeg.subspan(0, at);
            p.scan_header = jpeg.subspan(at, 2 + length);
            p.entropy = jpeg.subspan(at + 2 + length, n - 2 - (at + 2 + length));
            return p;
        }
        if (marker == 0xDD || (marker >= 0xC1 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC))
            return p;  // a restart interval already, or not baseline
        at += 2 + length;
    }
    return p;
}

void put16(std::vector<std::uint8_t>& out, std::size_t at, std::size_t v) {
    out[at] = static_cast<std::uint8_t>(v >> 8);
    out[at + 1] = static_cast<std::uint8_t>(v & 0xFF);
}

}  // namespace

std::optional<std::vector<std::uint8_t>> encode_jpeg_bands(const cv::Mat& image, int quality) {
    if (image.depth() != CV_8U || (image.channels() != 1 && image.channels() != 3)) return std::nullopt;
    const int bands = (image.rows + kJpegBandRows - 1) / kJpegBandRows;
    if (bands < 2) return std::nullopt;
    // MCUs per band: 16x16-pixel MCUs in 4:2:0 colour, 8x8 in gray.
    const int mcu = image.channels() == 3 ? 16 : 8;
    const std::size_t interval =
        static_cast<std::size_t>((image.cols + mcu - 1) / mcu) * static_cast<std::size_t>(kJpegBandRows / mcu);
    if (interval > 0xFFFF) return std::nullopt;

    std::vector<std::vector<std::uint8_t>> encoded(static_cast<std::size_t>(bands));
    tbb::parallel_for(0, bands, [&](int b) {
        const cv::Mat band = image.rowRange(b * kJpegBandRows, std::min(image.rows, (b + 1) * kJpegBandRows));
        cv::imencode(".jpg", band, encoded[static_cast<std::size_t>(b)], {cv::IMWRITE_JPEG_QUALITY, quality});
    });

    std::vector<Parts> parts;
    std::size_t total = 0;
    for (const auto& e : encoded) {
        parts.push_back(split(e));
        const Parts& p = parts.back();
        if (p.entropy.empty() || p.sof_height == 0) return std::nullopt;
        total += p.entropy.size() + 2;
    }
    // Every band must have the first band's tables and scan (only the
    // frame height may differ).
    const Parts& first = parts.front();
    for (const Parts& p : parts) {
        if (p.headers.size() != first.headers.size() || p.sof_height != first.sof_height ||
            !std::equal(p.scan_header.begin(), p.scan_header.end(), first.scan_header.begin(), first.scan_header.end()))
            return std::nullopt;
        for (std::size_t i = 0; i < first.headers.size(); ++i)
            if (i != first.sof_height && i != first.sof_height + 1 && p.headers[i] != first.headers[i])
                return std::nullopt;
    }

    std::vector<std::uint8_t> out(first.headers.begin(), first.headers.end());
    out.reserve(out.size() + 6 + first.scan_header.size() + total);
    put16(out, first.sof_height, static_cast<std::size_t>(image.rows));
    // DRI just before the scan header, where libjpeg writes it.
    out.insert(out.end(), {0xFF, 0xDD, 0x00, 0x04, 0, 0});
    put16(out, out.size() - 2, interval);
    out.insert(out.end(), first.scan_header.begin(), first.scan_header.end());
    for (std::size_t b = 0; b < parts.size(); ++b) {
        if (b > 0) out.insert(out.end(), {0xFF, static_cast<std::uint8_t>(0xD0 + (b - 1) % 8)});
        out.insert(out.end(), parts[b].entropy.begin(), parts[b].entropy.end());
    }
    out.insert(out.end(), {0xFF, 0xD9});
    return out;
}

}  // namespace cbi
