#pragma once
// Border handling: the one host/device definition every filter reads
// through. Same rules as OpenCV's cv::borderInterpolate, including kernels
// larger than the image (reflection repeats until the index is inside).
//   reflect101  gfedcb|abcdefgh|gfedcba   (OpenCV BORDER_REFLECT_101, SciPy "mirror")
//   reflect     fedcba|abcdefgh|hgfedcb   (OpenCV BORDER_REFLECT,     SciPy "reflect")
//   replicate   aaaaaa|abcdefgh|hhhhhhh
//   constant    vvvvvv|abcdefgh|vvvvvvv
//   wrap        cdefgh|abcdefgh|abcdefg
#include <cstdint>

#include "schedules/host_device.hpp"

namespace cbi {

enum class BorderMode : std::uint8_t { reflect101, reflect, replicate, constant, wrap };

// A node's border rule.
struct Border {
    BorderMode mode = BorderMode::reflect101;
    double value = 0;  // constant border value, in the image's units
    friend bool operator==(const Border&, const Border&) = default;
};

// OpenCV's cv::BORDER_* for a mode (filters/filter.cpp): where cbi hands
// work to OpenCV, and OpenCV's side of the tests and benchmarks.
int opencv_border(BorderMode mode);

// Index of the pixel that stands in for coordinate p of an axis of length n,
// or -1 for a constant border outside the image.
template <BorderMode mode>
CBI_HOST_DEVICE int border_index(int p, int n) {
    if (static_cast<unsigned>(p) < static_cast<unsigned>(n)) return p;
    if constexpr (mode == BorderMode::constant) {
        return -1;
    } else if constexpr (mode == BorderMode::replicate) {
        return p < 0 ? 0 : n - 1;
    } else if constexpr (mode == BorderMode::wrap) {
        if (p < 0) p -= ((p - n + 1) / n) * n;
        return p % n;
    } else {
        if (n == 1) return 0;
        const int delta = mode == BorderMode::reflect101 ? 1 : 0;
        do {
            p = p < 0 ? -p - 1 + delta : n - 1 - (p - n) - delta;
        } while (static_cast<unsigned>(p) >= static_cast<unsigned>(n));
        return p;
    }
}

// The same rules with the mode chosen at run time, for code that is not
// instantiated per border (the stream:WxH kernels).
CBI_HOST_DEVICE int border_index(BorderMode mode, int p, int n) {
    switch (mode) {
        case BorderMode::reflect: return border_index<BorderMode::reflect>(p, n);
        case BorderMode::replicate: return border_index<BorderMode::replicate>(p, n);
        case BorderMode::constant: return border_index<BorderMode::constant>(p, n);
        case BorderMode::wrap: return border_index<BorderMode::wrap>(p, n);
        case BorderMode::reflect101: break;
    }
    return border_index<BorderMode::reflect101>(p, n);
}

}  // namespace cbi
