#pragma once
// gaussian:K[:SIGMA] = cv::GaussianBlur(src, dst, {K,K}, SIGMA, SIGMA,
// border); SIGMA 0 or absent: OpenCV's rule from K (its fixed tables for
// K <= 9). On 8-bit images OpenCV's bit-exact fixed point: weights in 1/256
// (gaussian_fixed_weights), exact integer sums (at most 255 * 256 * 256 <
// 2^24), one rounding at the end; the result equals OpenCV's bit for bit.
// Other depths: float weights (gaussian_weights) and float arithmetic.
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "filters/kinds/args.hpp"
#include "filters/kinds/kind.hpp"
#include "filters/ops.hpp"

namespace cbi {

struct GaussianFilter {
    int ksize = 3;
    double sigma = 0;  // 0: derived from ksize by OpenCV's rule
    friend bool operator==(const GaussianFilter&, const GaussianFilter&) = default;
};

// OpenCV's 1-D Gaussian kernel (cv::getGaussianKernel, bit-exact): the
// fixed tables for k <= 9 when sigma <= 0, otherwise sampled and
// normalised. Fixed-size arrays, so preparing a launch allocates nothing.
struct GaussianKernel1D {
    int size;
    double w[kMaxKernel];
};
GaussianKernel1D gaussian_weights(int ksize, double sigma);

// The same kernel in units of 1/256, summing to exactly 256, as
// cv::GaussianBlur uses it on 8-bit images (GaussianOp<std::uint8_t>).
struct GaussianFixedKernel {
    int size;
    std::uint16_t w[kMaxKernel];
};
GaussianFixedKernel gaussian_fixed_weights(int ksize, double sigma);

template <class W>
struct GaussianArgs {
    int ksize;
    W weights[kMaxKernel];
};

template <class T, BorderMode B, class Src = BorderedSource<T, B>>
struct GaussianOp : SeparableStencil<GaussianOp<T, B, Src>, T, B, Src>,
                    GaussianArgs<std::conditional_t<std::is_same_v<T, std::uint8_t>, std::uint16_t, float>> {
    static constexpr bool kFixedPoint = std::is_same_v<T, std::uint8_t>;
    static constexpr bool kStream8 = kFixedPoint;
    static constexpr bool kFinishReturnsSum = std::is_same_v<T, float>;
    // Fixed point: finish() is this rounding shift of the sum (kernels that
    // hold sums in other forms round them alike: cuda/pair_strip.cuh).
    static constexpr int kRoundingShift = kFixedPoint ? 16 : 0;
    using Acc = std::conditional_t<kFixedPoint, std::uint32_t, float>;
    using W = std::conditional_t<kFixedPoint, std::uint16_t, float>;
    using Args = GaussianArgs<W>;

    CBI_HOST_DEVICE int passes() const { return 1; }
    CBI_HOST_DEVICE const W* wx(int) const { return this->weights; }
    CBI_HOST_DEVICE const W* wy(int) const { return this->weights; }
    CBI_HOST_DEVICE int kw(int) const { return this->ksize; }
    CBI_HOST_DEVICE int kh(int) const { return this->ksize; }
    CBI_HOST_DEVICE T finish(const Acc* sums) const {
        if constexpr (kFixedPoint)
            return static_cast<T>((sums[0] + (1u << (kRoundingShift - 1))) >>
                                  kRoundingShift);  // round half up, as OpenCV's ufixedpoint32
        else
            return saturate_round<T>(sums[0]);
    }
};

template <>
struct FilterKind<GaussianFilter> {
    static constexpr std::string_view name = "gaussian", form = "gaussian:K[:SIGMA]", params = "ksize sigma";
    static constexpr std::string_view help = "Gaussian blur K x K; K odd, 1..255; SIGMA 0 or absent: from K";
    static constexpr std::string_view opencv = "cv::GaussianBlur(src, dst, {K,K}, SIGMA, SIGMA, border)";
    static constexpr Category category = Category::stencil;
    static constexpr std::string_view examples[] = {"3", "5:1.2", "9", "31"};
    static constexpr KindDefault defaults[] = {
        {true, 9, static_cast<int>(Depth::u8), 0, "stream:256x16 stream:256x32 stream:128x16"},
        {true, 9, kAnyDepth, 1, "sep:128x32 sep:64x32 stream:256x32"},
        {true, 9, kAnyDepth, 0, "sep:64x32 sep:32x32 sep:128x32"},
        {true, 0, kAnyDepth, 1, "sep:64x32 sep:128x32 sep:32x32"},
        {true, 0, kAnyDepth, 0, "sep:32x32 sep:64x32 sep:128x32"},
        {false, 0, kAnyDepth, 0, "sep:256x256 sep:128x128 sep:512x512"},
    };

    static GaussianFilter parse(std::string_view a) {
        const auto parts = args::split(a, ':');
        args::expect_fields(name, a, parts, 1, 2, "K[:SIGMA]");
        GaussianFilter f{args::parse_ksize(name, parts[0], kMaxKernel), 0.0};
        if (parts.size() == 2 && (!args::parse_double(parts[1], f.sigma) || f.sigma < 0))
            args::invalid("gaussian sigma '" + std::string(parts[1]) + "' must be a number >= 0 (0: derived from K)");
        if (f.sigma == 0) f.sigma = 0;  // -0 means 0, which print leaves out: store +0 so it reads back the same
        return f;
    }
    static std::string print(const GaussianFilter& f) {
        return std::to_string(f.ksize) + (f.sigma > 0 ? ":" + args::number(f.sigma) : "");
    }
    static Footprint footprint(const GaussianFilter& f) { return {f.ksize, f.ksize}; }
    static constexpr PairFusion pair_fusion(const GaussianFilter&) { return {.first = true, .second = true}; }
    template <class T, BorderMode B, class Src>
    static auto op(const GaussianFilter& f, const Src& source, const ImageView& dst) {
        using Op = GaussianOp<T, B, Src>;
        Op op{{source, dst}, {f.ksize, {}}};
        if constexpr (Op::kFixedPoint) {
            const auto kernel = gaussian_fixed_weights(f.ksize, f.sigma);
            for (int i = 0; i < f.ksize; ++i) op.weights[i] = kernel.w[i];
        } else {
            const auto kernel = gaussian_weights(f.ksize, f.sigma);
            for (int i = 0; i < f.ksize; ++i) op.weights[i] = static_cast<float>(kernel.w[i]);
        }
        return op;
    }
};

}  // namespace cbi
