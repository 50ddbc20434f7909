#pragma once
// laplacian[:KSIZE] = |cv::Laplacian(src, CV_32F, KSIZE, 1, 0, border)| per
// channel, rounded and saturated to the input depth (float stays float):
// d2x + d2y with the second-derivative kernels of cv::getSobelKernels(2, 0,
// KSIZE) and their transpose (KSIZE 1: the 3x3 cross [0 1 0; 1 -4 1; 0 1 0],
// as 3x1 + 1x3). Integer inputs give exact integer sums (8-bit: below
// 255 * 12 * 64 * 2 < 2^22). Passes: {d2x, d2y}.
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "filters/kinds/args.hpp"
#include "filters/kinds/derivative.hpp"
#include "filters/kinds/kind.hpp"
#include "filters/ops.hpp"

namespace cbi {

struct LaplacianFilter {
    int ksize = 1;  // cv::Laplacian's default
    friend bool operator==(const LaplacianFilter&, const LaplacianFilter&) = default;
};

// The kernels of cv::Laplacian: a second derivative and its smoothing
// (KSIZE 1 widens the derivative to 3).
inline SobelKernels laplacian_kernels(int ksize) {
    return derivative_kernels(2, ksize);
}

struct LaplacianArgs {
    SobelKernels k;  // laplacian_kernels(KSIZE)
};

template <class T, BorderMode B, class Src = BorderedSource<T, B>>
struct LaplacianOp : SeparableStencil<LaplacianOp<T, B, Src>, T, B, Src>, LaplacianArgs {
    using Args = LaplacianArgs;
    static constexpr bool kMayRunTwoPasses = true;
    static constexpr bool kSignedWeights = true;

    using Acc = std::conditional_t<std::is_same_v<T, float>, float, std::int32_t>;
    using W = int;
    CBI_HOST_DEVICE int passes() const { return 2; }
    CBI_HOST_DEVICE const W* wx(int p) const { return p == 0 ? this->k.deriv : this->k.smooth; }
    CBI_HOST_DEVICE const W* wy(int p) const { return p == 0 ? this->k.smooth : this->k.deriv; }
    CBI_HOST_DEVICE int kw(int p) const { return p == 0 ? this->k.deriv_size : this->k.smooth_size; }
    CBI_HOST_DEVICE int kh(int p) const { return p == 0 ? this->k.smooth_size : this->k.deriv_size; }
    CBI_HOST_DEVICE T finish(const Acc* sums) const {
        // Integers: one exact sum; float: d2x + d2y rounded once, as OpenCV adds its two planes.
        float g;
        if constexpr (std::is_same_v<Acc, float>)
            g = add_rn(sums[0], sums[1]);
        else
            g = derivative_to_float<T>(sums[0] + sums[1]);
        return saturate_round<T>(g < 0.f ? -g : g);
    }
};

template <>
struct FilterKind<LaplacianFilter> {
    static constexpr std::string_view name = "laplacian", form = "laplacian[:KSIZE]", params = "ksize";
    static constexpr std::string_view help = "|d2/dx2 + d2/dy2|; KSIZE 1/3/5/7 (default 1: the 3x3 cross)";
    static constexpr std::string_view opencv = "cv::Laplacian(src, CV_32F, KSIZE, 1, 0, border)";
    static constexpr Category category = Category::stencil;
    static constexpr std::string_view examples[] = {"1", "3", "5", "7"};
    static constexpr KindDefault defaults[] = {
        // Not measured: sobel:mag's rows (the same two passes; the 8-bit strip kernel does not take it).
        {true, 9, kAnyDepth, 0, "stream:256x16 stream:512x8 stream:128x16"},
        {true, 0, kAnyDepth, 0, "sep:64x32 sep:32x32 sep:128x32"},
        {false, 0, kAnyDepth, 0, "sep:256x256 sep:128x128 sep:512x512"},
    };

    static LaplacianFilter parse(std::string_view a) {
        LaplacianFilter f;
        if (!a.empty() && (!args::parse_int(a, f.ksize) || !is_sobel_ksize(f.ksize)))
            args::invalid("laplacian ksize '" + std::string(a) + "' must be 1, 3, 5 or 7");
        return f;
    }
    static std::string print(const LaplacianFilter& f) { return std::to_string(f.ksize); }
    static Footprint footprint(const LaplacianFilter& f) {
        return f.ksize == 1 ? Footprint{3, 3, false} : Footprint{f.ksize, f.ksize};
    }
    static constexpr PairFusion pair_fusion(const LaplacianFilter&) { return {}; }
    template <class T, BorderMode B, class Src>
    static auto op(const LaplacianFilter& f, const Src& source, const ImageView& dst) {
        return LaplacianOp<T, B, Src>{{source, dst}, {laplacian_kernels(f.ksize)}};
    }
};

}  // namespace cbi
