#pragma once
// scharr:x|y|mag: |gx|, |gy| or sqrt(gx^2 + gy^2) of cv::Scharr(src, CV_32F,
// dx, dy, 1, 0, border) per channel, rounded and saturated to the input
// depth (float stays float), as sobel is to cv::Sobel. Scharr's 3x3 kernels
// (cv::getScharrKernels: derivative [-1 0 1], smoothing [3 10 3]) in
// Sobel's layout, so it runs as SobelOp on every kernel Sobel runs on.
#include <string>
#include <string_view>

#include "filters/kinds/sobel.hpp"

namespace cbi {

struct ScharrFilter {
    SobelMode mode = SobelMode::mag;
    friend bool operator==(const ScharrFilter&, const ScharrFilter&) = default;
};

inline SobelKernels scharr_kernels() {
    return SobelKernels{{-1, 0, 1}, {3, 10, 3}, 3, 3};
}

template <>
struct FilterKind<ScharrFilter> {
    static constexpr std::string_view name = "scharr", form = "scharr[:x|y|mag]", params = "mode";
    static constexpr std::string_view help =
        "|gx|, |gy| or sqrt(gx^2+gy^2) of the 3x3 Scharr derivatives (default mag)";
    static constexpr std::string_view opencv = "cv::Scharr(src, CV_32F, 1, 0 / 0, 1, 1, 0, border)";
    static constexpr Category category = Category::stencil;
    static constexpr std::string_view examples[] = {"x", "y", "mag"};
    // Not measured: a 3x3 Sobel's rows (the same kernels with other weights).
    static constexpr KindDefault defaults[] = {
        {true, 0, static_cast<int>(Depth::u8), 0, "stream:256x16 stream:128x16 stream:256x32"},
        {true, 0, kAnyDepth, 0, "stream:256x16 stream:512x8 stream:128x16"},
        {false, 0, kAnyDepth, 0, "sep:256x256 sep:128x128 sep:512x512"},
    };

    static ScharrFilter parse(std::string_view a) { return {parse_gradient_mode(name, a)}; }
    static std::string print(const ScharrFilter& f) { return gradient_mode_name(f.mode); }
    static Footprint footprint(const ScharrFilter&) { return {3, 3}; }
    static constexpr PairFusion pair_fusion(const ScharrFilter&) { return {.second = true, .always_second = true}; }
    template <class T, BorderMode B, class Src>
    static auto op(const ScharrFilter& f, const Src& source, const ImageView& dst) {
        return SobelOp<T, B, Src>{{source, dst}, {f.mode, scharr_kernels()}};
    }
};

}  // namespace cbi
