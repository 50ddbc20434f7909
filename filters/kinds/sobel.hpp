#pragma once
// sobel:MODE[:KSIZE]: |gx|, |gy| or sqrt(gx^2 + gy^2) of cv::Sobel(src,
// CV_32F, dx, dy, KSIZE, 1, 0, border) per channel, rounded and saturated
// to the input depth (float stays float); MODE x, y or mag (default mag),
// KSIZE 1, 3, 5 or 7 (default 3). Integer inputs give exact integer
// gradients. Passes: x -> {gx}, y -> {gy}, mag -> {gx, gy}.
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "filters/kinds/args.hpp"
#include "filters/kinds/derivative.hpp"
#include "filters/kinds/kind.hpp"
#include "filters/ops.hpp"

namespace cbi {

enum class SobelMode : std::uint8_t { x, y, mag };

struct SobelFilter {
    SobelMode mode = SobelMode::mag;
    int ksize = 3;
    friend bool operator==(const SobelFilter&, const SobelFilter&) = default;
};

// OpenCV's Sobel kernels for a first derivative (cv::getDerivKernels).
inline SobelKernels sobel_kernels(int ksize) {
    return derivative_kernels(1, ksize);
}

struct GradientArgs {
    SobelMode mode;
    SobelKernels k;
};

// A first-derivative stencil: Sobel's kernels, or any other integer pair in
// the same layout (Scharr's).
template <class T, BorderMode B, class Src = BorderedSource<T, B>>
struct SobelOp : SeparableStencil<SobelOp<T, B, Src>, T, B, Src>, GradientArgs {
    using Args = GradientArgs;
    static constexpr bool kMayRunTwoPasses = true;
    static constexpr bool kSignedWeights = true;
    static constexpr bool kStream8 = std::is_same_v<T, std::uint8_t>;

    using Acc = std::conditional_t<std::is_same_v<T, float>, float, std::int32_t>;
    using W = int;
    CBI_HOST_DEVICE int passes() const { return this->mode == SobelMode::mag ? 2 : 1; }
    CBI_HOST_DEVICE bool is_gx(int p) const { return p == 0 && this->mode != SobelMode::y; }
    CBI_HOST_DEVICE const W* wx(int p) const { return is_gx(p) ? this->k.deriv : this->k.smooth; }
    CBI_HOST_DEVICE const W* wy(int p) const { return is_gx(p) ? this->k.smooth : this->k.deriv; }
    CBI_HOST_DEVICE int kw(int p) const { return is_gx(p) ? this->k.deriv_size : this->k.smooth_size; }
    CBI_HOST_DEVICE int kh(int p) const { return is_gx(p) ? this->k.smooth_size : this->k.deriv_size; }
    CBI_HOST_DEVICE T finish(const Acc* sums) const {
        if (passes() == 1) {
            const float g[1] = {derivative_to_float<T>(sums[0])};
            return finish_gradients<1>(g);
        }
        const float g[2] = {derivative_to_float<T>(sums[0]), derivative_to_float<T>(sums[1])};
        return finish_gradients<2>(g);
    }
    // The same from the P = passes() sums as float (exact: kernels that hold
    // them in another form convert them themselves).
    template <int P>
    CBI_HOST_DEVICE T finish_gradients(const float* g) const {
        if constexpr (P == 1)
            return saturate_round<T>(g[0] < 0.f ? -g[0] : g[0]);
        else
            return saturate_round<T, true>(magnitude_sqrt<T>(sum_of_squares<T>(g[0], g[1])));
    }
};

// "x", "y", "mag" or "" (mag), or invalid() naming `kind`.
inline SobelMode parse_gradient_mode(std::string_view kind, std::string_view text) {
    if (text == "x") return SobelMode::x;
    if (text == "y") return SobelMode::y;
    if (text == "mag" || text.empty()) return SobelMode::mag;
    args::invalid(std::string(kind) + " mode '" + std::string(text) + "' must be x, y or mag");
}
inline const char* gradient_mode_name(SobelMode m) {
    return m == SobelMode::x ? "x" : m == SobelMode::y ? "y" : "mag";
}

template <>
struct FilterKind<SobelFilter> {
    static constexpr std::string_view name = "sobel", form = "sobel[:x|y|mag[:KSIZE]]", params = "mode ksize";
    static constexpr std::string_view help =
        "|gx|, |gy| or sqrt(gx^2+gy^2) of the Sobel derivatives; KSIZE 1/3/5/7 (default mag:3)";
    static constexpr std::string_view opencv = "cv::Sobel(src, CV_32F, 1, 0 / 0, 1, KSIZE, 1, 0, border)";
    static constexpr Category category = Category::stencil;
    static constexpr std::string_view examples[] = {"x:1", "y:1", "mag:3", "x:5", "y:7", "mag:7"};
    static constexpr KindDefault defaults[] = {
        {true, 9, static_cast<int>(Depth::u8), 0, "stream:256x16 stream:128x16 stream:256x32"},
        {true, 9, kAnyDepth, 0, "stream:256x16 stream:512x8 stream:128x16"},
        {true, 0, kAnyDepth, 0, "sep:64x32 sep:32x32 sep:128x32"},  // and KSIZE 1 (not square)
        {false, 0, kAnyDepth, 0, "sep:256x256 sep:128x128 sep:512x512"},
    };

    static SobelFilter parse(std::string_view a) {
        const auto parts = args::split(a, ':');
        args::expect_fields(name, a, parts, 1, 2, "x|y|mag[:KSIZE]");
        SobelFilter f{parse_gradient_mode(name, parts[0]), 3};
        if (parts.size() == 2 && (!args::parse_int(parts[1], f.ksize) || !is_sobel_ksize(f.ksize)))
            args::invalid("sobel ksize '" + std::string(parts[1]) + "' must be 1, 3, 5 or 7");
        return f;
    }
    static std::string print(const SobelFilter& f) {
        return std::string(gradient_mode_name(f.mode)) + ":" + std::to_string(f.ksize);
    }
    // KSIZE 1: 3x1 and 1x3 passes, not one square window.
    static Footprint footprint(const SobelFilter& f) {
        return f.ksize == 1 ? Footprint{3, 3, false} : Footprint{f.ksize, f.ksize};
    }
    static constexpr PairFusion pair_fusion(const SobelFilter& f) {
        return {.second = true, .always_second = f.ksize == 3};
    }
    template <class T, BorderMode B, class Src>
    static auto op(const SobelFilter& f, const Src& source, const ImageView& dst) {
        return SobelOp<T, B, Src>{{source, dst}, {f.mode, sobel_kernels(f.ksize)}};
    }
};

}  // namespace cbi
