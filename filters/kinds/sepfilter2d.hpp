#pragma once
// sepfilter2d:KX;KY = cv::sepFilter2D(src, dst, -1, KX, KY, {-1,-1}, 0,
// border): correlation with the row kernel KX across x, then the column
// kernel KY down y (1 to 255 taps each, any length: the anchor is the
// middle tap, floor(n / 2), as OpenCV's {-1,-1}), rounded to nearest even
// and saturated to the depth (float stays float). Float weights and float
// sums, taps in index order (SeparableStencil): 8/16-bit within 1 of
// OpenCV (which runs float row and column sums too, fused by its AVX2 loops,
// and a fixed-point path for symmetric smoothing kernels whose taps are
// multiples of 1/256), float within 1e-5 of the output's scale.
// Runs on every schedule that runs the separable stencils (a kernel whose
// two lists differ in length is not square: the tile schedules).
#include <algorithm>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "filters/kinds/args.hpp"
#include "filters/kinds/kind.hpp"
#include "filters/kinds/taps.hpp"
#include "filters/ops.hpp"

namespace cbi {

struct SepFilter2DFilter {
    std::vector<double> kx{1.0};
    std::vector<double> ky{1.0};
    friend bool operator==(const SepFilter2DFilter&, const SepFilter2DFilter&) = default;
};

// The op's taps, by value (2 KB): what a kernel launch carries.
struct SepFilter2DArgs {
    int nx, ny;
    float kx[kMaxKernel];
    float ky[kMaxKernel];
};

template <class T, BorderMode B, class Src = BorderedSource<T, B>>
struct SepFilter2DOp : SeparableStencil<SepFilter2DOp<T, B, Src>, T, B, Src>, SepFilter2DArgs {
    using Args = SepFilter2DArgs;
    static constexpr bool kFinishReturnsSum = std::is_same_v<T, float>;
    using Acc = float;
    using W = float;
    CBI_HOST_DEVICE int passes() const { return 1; }
    CBI_HOST_DEVICE const W* wx(int) const { return this->kx; }
    CBI_HOST_DEVICE const W* wy(int) const { return this->ky; }
    CBI_HOST_DEVICE int kw(int) const { return this->nx; }
    CBI_HOST_DEVICE int kh(int) const { return this->ny; }
    CBI_HOST_DEVICE T finish(const Acc* sums) const { return saturate_round<T>(sums[0]); }
};

// The taps as the op holds them (floats, in order). Throws
// std::invalid_argument for a list of 0 or more than kMaxKernel taps (parse
// never makes one).
inline SepFilter2DArgs sepfilter2d_args(const SepFilter2DFilter& f) {
    const auto bad = [](std::size_t n) { return n == 0 || n > static_cast<std::size_t>(kMaxKernel); };
    if (bad(f.kx.size()) || bad(f.ky.size())) args::invalid("sepfilter2d lists need 1 to 255 taps each");
    SepFilter2DArgs a{static_cast<int>(f.kx.size()), static_cast<int>(f.ky.size()), {}, {}};
    for (int i = 0; i < a.nx; ++i) a.kx[i] = static_cast<float>(f.kx[i]);
    for (int i = 0; i < a.ny; ++i) a.ky[i] = static_cast<float>(f.ky[i]);
    return a;
}

template <>
struct FilterKind<SepFilter2DFilter> {
    static constexpr std::string_view name = "sepfilter2d", form = "sepfilter2d:KX;KY", params = "taps";
    static constexpr std::string_view help =
        "separable correlation: row kernel KX then column kernel KY, comma-separated taps, 1..255 each";
    static constexpr std::string_view opencv = "cv::sepFilter2D(src, dst, -1, KX, KY, {-1,-1}, 0, border)";
    static constexpr Category category = Category::stencil;
    static constexpr std::string_view examples[] = {"1,2,1;-1,0,1", "0.25,0.5,0.25;0.25,0.5,0.25", "1,-2,3,-2,1;2",
                                                    "0.5,0.5;1,1,1,1", "-1,0,1;0.1,0.2,0.3,0.2,0.1,0.05,0.05"};
    static constexpr KindDefault defaults[] = {
        // Not measured: the Gaussian's rows beyond K 9 (the same float taps in one pass).
        {true, 0, kAnyDepth, 1, "sep:64x32 sep:128x32 sep:32x32"},
        {true, 0, kAnyDepth, 0, "sep:32x32 sep:64x32 sep:128x32"},
        {false, 0, kAnyDepth, 0, "sep:256x256 sep:128x128 sep:512x512"},
    };

    static SepFilter2DFilter parse(std::string_view a) {
        const auto rows = taps::parse_rows(name, a, form, kMaxKernel);
        if (rows.size() != 2)
            args::invalid("sepfilter2d needs two lists, KX;KY (row then column kernel), not " +
                          std::to_string(rows.size()) + " (sepfilter2d:KX;KY)");
        return {rows[0], rows[1]};
    }
    static std::string print(const SepFilter2DFilter& f) { return taps::print_rows({f.kx, f.ky}); }
    static Footprint footprint(const SepFilter2DFilter& f) {
        const int w = static_cast<int>(f.kx.size()), h = static_cast<int>(f.ky.size());
        return {w, h, w == h};
    }
    static constexpr PairFusion pair_fusion(const SepFilter2DFilter&) { return {}; }
    template <class T, BorderMode B, class Src>
    static auto op(const SepFilter2DFilter& f, const Src& source, const ImageView& dst) {
        return SepFilter2DOp<T, B, Src>{{source, dst}, sepfilter2d_args(f)};
    }
};

}  // namespace cbi
