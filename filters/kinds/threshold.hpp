#pragma once
// threshold:T[:MAXVAL[:TYPE]] = cv::threshold(src, dst, T, MAXVAL, TYPE),
// bit for bit, every channel alike. TYPE binary (default), binary_inv,
// trunc, tozero or tozero_inv; MAXVAL the depth's maximum when absent or
// empty (255, 65535; 1 for float). As OpenCV: on 8/16-bit images T is
// floored and MAXVAL rounded (to nearest even) and saturated, the
// comparison src > T is strict and exact in integers; float images compare
// and write in float. T beyond the depth's range acts as OpenCV's
// out-of-range cases do (every sample above, or none).
// TYPE otsu / otsu_inv = THRESH_BINARY / THRESH_BINARY_INV | THRESH_OTSU on
// 8-bit 1-channel images (others are refused, cbi::Error), T ignored: the
// level is Otsu's, from the histogram of the whole input, computed before
// any pixel is written (the CPU backend on the host, the CUDA backend in two
// kernels on the node's stream before the threshold's: filters/cpu/backend.cpp,
// cuda/backend.cu).
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "filters/kinds/args.hpp"
#include "filters/kinds/kind.hpp"
#include "filters/ops.hpp"

namespace cbi {

enum class ThresholdType : std::uint8_t { binary, binary_inv, trunc, tozero, tozero_inv };

struct ThresholdFilter {
    double thresh = 0;
    double maxval = 0;
    bool default_maxval = true;  // MAXVAL absent: the depth's maximum
    ThresholdType type = ThresholdType::binary;
    bool otsu = false;  // THRESH_OTSU: the level from the input's histogram (binary or binary_inv)
    friend bool operator==(const ThresholdFilter&, const ThresholdFilter&) = default;
};

template <class T>
struct ThresholdOp : PerSampleOp<ThresholdOp<T>, T> {
    // The five types as one rule, its choices fixed per op (no switch per
    // sample, so CPU loops vectorise): above ? (keep_above ? src : hi) :
    // (keep_below ? src : lo).
    T thresh;        // integers: floor(T) clamped to [0, max] (all_above covers T < 0)
    bool all_above;  // integers: T < 0, every sample is above
    bool trunc_cmp;  // float trunc: above is !(src < T), as OpenCV's vector min(src, T)
                     // takes it (the second operand when equal or unordered: min(-0, +0) is +0)
    bool keep_above, keep_below;
    T hi, lo;  // what is written above / not above, unless kept

    CBI_HOST_DEVICE bool above(T v) const {
        if constexpr (std::is_same_v<T, float>)
            return trunc_cmp ? !(v < thresh) : v > thresh;
        else
            return all_above | (v > thresh);
    }
    CBI_HOST_DEVICE T sample(T v) const {
        const T a = keep_above ? v : hi, b = keep_below ? v : lo;
        return above(v) ? a : b;
    }
    // Four 8-bit samples of a word at once (the 8-bit stream kernel applies
    // a threshold after its stencil this way: ThenSamples::bytes8): the same
    // rule with byte-wise SIMD on the GPU.
    CBI_HOST_DEVICE std::uint32_t sample4(std::uint32_t v) const requires std::is_same_v<T, std::uint8_t> {
        constexpr std::uint32_t ones = 0x01010101u;
#if defined(__CUDA_ARCH__)
        const std::uint32_t m = all_above ? ~0u : __vcmpgtu4(v, thresh * ones);
#else
        std::uint32_t m = 0;
        for (int k = 0; k < 4; ++k)
            if (all_above || ((v >> (8 * k)) & 0xffu) > thresh) m |= 0xffu << (8 * k);
#endif
        const std::uint32_t a = keep_above ? v : hi * ones, b = keep_below ? v : lo * ones;
        return (a & m) | (b & ~m);
    }
};

inline constexpr int kOtsuBins = 256;

namespace otsu_detail {
// Double arithmetic rounded per operation on both sides (never an FMA).
CBI_HOST_DEVICE double mul(double a, double b) {
#if defined(__CUDA_ARCH__)
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}
CBI_HOST_DEVICE double add(double a, double b) {
#if defined(__CUDA_ARCH__)
    return __dadd_rn(a, b);
#else
    return a + b;
#endif
}
CBI_HOST_DEVICE double sub(double a, double b) {
#if defined(__CUDA_ARCH__)
    return __dsub_rn(a, b);
#else
    return a - b;
#endif
}
CBI_HOST_DEVICE double div(double a, double b) {
#if defined(__CUDA_ARCH__)
    return __ddiv_rn(a, b);
#else
    return a / b;
#endif
}
inline constexpr double kEps = 1.1920928955078125e-07;  // FLT_EPSILON, as OpenCV compares with it

// The image's mean level from a histogram and 1 / its pixels.
CBI_HOST_DEVICE double mean_level(const std::uint32_t* hist, double scale) {
    double mu = 0;
    for (int i = 0; i < kOtsuBins; ++i) mu = add(mu, mul(static_cast<double>(i), static_cast<double>(hist[i])));
    return mul(mu, scale);
}

// What carries from bin to bin in OpenCV's loop: after step(c, p_i, i), the
// lower class's share q1 and mean mu1 up to bin i; `skip`: a class is
// nearly empty at i (OpenCV's continue: mu1 stays scaled by q1).
struct Carry {
    double q1 = 0, mu1 = 0;
    bool skip = true;
};
CBI_HOST_DEVICE void step(Carry& c, double p_i, int i) {
    c.mu1 = mul(c.mu1, c.q1);
    c.q1 = add(c.q1, p_i);
    const double q2 = sub(1.0, c.q1);
    const double lo = q2 < c.q1 ? q2 : c.q1, hi = c.q1 < q2 ? q2 : c.q1;  // std::min, std::max
    c.skip = lo < kEps || hi > sub(1.0, kEps);
    if (!c.skip) c.mu1 = div(add(c.mu1, mul(static_cast<double>(i), p_i)), c.q1);
}

// The between-class variance at a bin step() did not skip; mu: mean_level.
CBI_HOST_DEVICE double sigma(const Carry& c, double mu) {
    const double q2 = sub(1.0, c.q1);
    const double mu2 = div(sub(mu, mul(c.q1, c.mu1)), q2);
    const double d = sub(c.mu1, mu2);
    return mul(mul(mul(c.q1, q2), d), d);
}
}  // namespace otsu_detail

// OpenCV's getThreshVal_Otsu_8u on a histogram of `pixels` samples, step by
// step: double sums, each product, sum and quotient rounded on its own (the
// device through the _rn intrinsics, the host built with -ffp-contract=off:
// call otsu_level there), bins where a class is nearly empty skipped as
// OpenCV skips them (its mu1 still scaled), the first largest between-class
// variance kept (`>`). Returns the level: samples above it are the upper
// class. The GPU runs the same steps, the variances side by side
// (cuda/backend.cu, otsu_histogram).
CBI_HOST_DEVICE int otsu_level_of(const std::uint32_t* hist, double pixels) {
    using namespace otsu_detail;
    const double scale = div(1.0, pixels);
    const double mu = mean_level(hist, scale);
    Carry c;
    double max_sigma = 0;
    int level = 0;
    for (int i = 0; i < kOtsuBins; ++i) {
        step(c, mul(static_cast<double>(hist[i]), scale), i);
        if (c.skip) continue;
        const double s = sigma(c, mu);
        if (s > max_sigma) {
            max_sigma = s;
            level = i;
        }
    }
    return level;
}

// otsu_level_of on the host, compiled where products are never fused.
int otsu_level(const std::uint32_t (&hist)[kOtsuBins], double pixels);

// The node an Otsu node runs as once its level is known: the same TYPE at
// T = level.
ThresholdFilter at_otsu_level(const ThresholdFilter& f, int level);

// The op's threshold, maxval and trunc value for a depth, as cv::threshold
// derives them (thresh.cpp: cvFloor(T), saturate_cast(cvRound(MAXVAL))).
template <class T>
ThresholdOp<T> threshold_op(const ThresholdFilter& f, const ImageView& src, const ImageView& dst);

template <>
struct FilterKind<ThresholdFilter> {
    static constexpr std::string_view name = "threshold", form = "threshold:T[:MAXVAL[:TYPE]]",
                                      params = "thresh maxval type";
    static constexpr std::string_view help =
        "src > T ? MAXVAL : 0 per sample; TYPE binary (default), binary_inv, trunc, tozero, tozero_inv, "
        "otsu or otsu_inv (T from the image's histogram; 8-bit 1-channel); "
        "MAXVAL absent or empty: the depth's maximum (1 for float)";
    static constexpr std::string_view opencv = "cv::threshold(src, dst, T, MAXVAL, TYPE[|THRESH_OTSU])";
    static constexpr Category category = Category::pointwise;
    static constexpr std::string_view examples[] = {"100.5",         "0.25:200:binary_inv", "127::trunc",
                                                    "40000::tozero", "0.5:7:tozero_inv",    "0:200:otsu"};
    static constexpr KindDefault defaults[] = {
        // Runs of N pixels as whole words (cuda/backend.cu vec_samples), as colour.
        {true, 0, static_cast<int>(Depth::u8), 0, "vec:8 vec:4 vec:16"},
        {true, 0, kAnyDepth, 0, "vec:4 vec:2 vec:8"},
        {false, 0, kAnyDepth, 0, "naive"},
    };

    static ThresholdFilter parse(std::string_view a);
    static std::string print(const ThresholdFilter& f);
    static Footprint footprint(const ThresholdFilter&) { return {}; }
    // otsu: 8-bit 1-channel images only (as OpenCV's THRESH_OTSU).
    static std::string refuses_input(const ThresholdFilter& f, Depth depth, int channels);
    static bool whole_image(const ThresholdFilter& f) { return f.otsu; }
    template <class T>
    static ThresholdOp<T> op(const ThresholdFilter& f, const ImageView& src, const ImageView& dst) {
        return threshold_op<T>(f, src, dst);
    }
};

}  // namespace cbi
