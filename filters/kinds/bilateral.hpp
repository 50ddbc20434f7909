#pragma once
// bilateral:D:SIGMA_COLOR:SIGMA_SPACE = cv::bilateralFilter(src, dst, D,
// SIGMA_COLOR, SIGMA_SPACE, border), as OpenCV 4.6 defines it:
//   - radius D/2, or cvRound(1.5 SIGMA_SPACE) when D <= 0; at least 1
//     (cbi: at most 127, a footprint of at most 255);
//   - a sigma <= 0 is read as 1 (OpenCV 4.6; later OpenCV copies the input
//     when a sigma is <= 1e-6, which a sigma in (0, 1e-6] also gives here);
//   - the taps: the disc dx^2 + dy^2 <= radius^2, row by row, each weighed
//     by exp(-(dx^2 + dy^2) / (2 SIGMA_SPACE^2)) * exp(-d^2 / (2
//     SIGMA_COLOR^2)), d the L1 distance between the tap's channels and the
//     centre's (in the image's units: 16-bit sigmas are in 0..65535, float
//     sigmas in the float values' units);
//   - the output sum(w v) * (1 / sum(w)), float sums, rounded and saturated
//     to integer depths.
// 8u: OpenCV's tables: colour weights (float)exp(d^2 c) for d < 768 (every
// d of 1 and 3 channels; 4 channels compute d >= 768), space weights for
// squared distances below 160 (radius <= 12; larger radii compute the rest);
// within 1 of OpenCV (its SIMD sums round in another order).
// 32f: OpenCV interpolates exp in a 4096-bin-per-channel table over the
// image's global min..max (a global statistic a per-pixel op does not
// have); cbi computes exp (exp_nonpositive) per tap: within 1e-4 of the
// image's scale of OpenCV. 16u and 4 channels (OpenCV refuses them): the
// same definition, colour weights computed per tap.
// exp_nonpositive uses only separately rounded multiplies and adds, so the
// CPU and the GPU compute the same weights bit for bit.
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "filters/kinds/args.hpp"
#include "filters/kinds/kind.hpp"
#include "filters/ops.hpp"
#include "filters/select.hpp"

namespace cbi {

struct BilateralFilter {
    int diameter = 5;  // D; <= 0: from sigma_space
    double sigma_color = 1;
    double sigma_space = 1;
    friend bool operator==(const BilateralFilter&, const BilateralFilter&) = default;
};

inline constexpr int kBilateralMaxRadius = kMaxKernel / 2;
// The disc's radius as OpenCV computes it (sigma_space <= 0 read as 1).
int bilateral_radius(const BilateralFilter& f);

// e^x for x <= 0 as 2^t, t = x log2(e): round(t) goes into the exponent of
// a degree-5 minimax polynomial of 2^f, f = t - round(t) in [-1/2, 1/2]
// (within 4e-6 of e^x relative, 7e-7 for x >= -10, where the weights that
// count lie); 0 below kExpLowest, where 2^round(t) would leave the normal
// floats; NaN gives NaN. Separately rounded multiplies and adds only: the
// same bits on both backends (and in exp_nonpositive8, cpu/bilateral.cpp,
// which takes these constants).
inline constexpr float kExpLowest = -86.9f, kExpLog2e = 1.44269504f;
inline constexpr float kExpRound = 12582912.f;  // 1.5 * 2^23: t + this has round(t) in its low mantissa bits
inline constexpr float kExpP5 = 1.32647145e-3f, kExpP4 = 9.67151392e-3f, kExpP3 = 5.55073395e-2f,
                       kExpP2 = 2.40222424e-1f, kExpP1 = 6.93147004e-1f;  // and 1
CBI_HOST_DEVICE float exp_nonpositive(float x) {
    if (!(x >= kExpLowest)) return x != x ? x : 0.f;
    const float t = mul_rn(x, kExpLog2e);
    const float j = add_rn(t, kExpRound);
    const float f = add_rn(t, -add_rn(j, -kExpRound));  // exact
    float p = kExpP5;
    p = add_rn(mul_rn(p, f), kExpP4);
    p = add_rn(mul_rn(p, f), kExpP3);
    p = add_rn(mul_rn(p, f), kExpP2);
    p = add_rn(mul_rn(p, f), kExpP1);
    p = add_rn(mul_rn(p, f), 1.f);
    // + round(t) << 23: j's low 9 bits are round(t) in two's complement.
#if defined(__CUDA_ARCH__)
    return __uint_as_float(__float_as_uint(p) + (__float_as_uint(j) << 23));
#else
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(p) + (std::bit_cast<std::uint32_t>(j) << 23));
#endif
}

// 1 / v correctly rounded on both backends.
CBI_HOST_DEVICE float reciprocal_rn(float v) {
#if defined(__CUDA_ARCH__)
    return __frcp_rn(v);
#else
    return 1.f / v;
#endif
}

inline constexpr int kBilateralColorTable = 768;  // 8u colour weights held: L1 distances 0..767
inline constexpr int kBilateralSpaceTable = 160;  // space weights held: squared distances 0..159

// A node's weights, built on the host (bilateral_args) and carried by value
// in the op (3.8 KB).
struct BilateralArgs {
    int radius;
    float color_coeff;                         // -0.5 / SIGMA_COLOR^2 as float (never -inf)
    float space_coeff;                         // -0.5 / SIGMA_SPACE^2 as float
    float color_weight[kBilateralColorTable];  // 8u only: (float)exp(d^2 * coeff), coeff in double, as OpenCV
    float space_weight[kBilateralSpaceTable];  // (float)exp(n * coeff) for n = dx^2 + dy^2, as OpenCV
    std::uint8_t
        half_width[kBilateralMaxRadius + 1];  // of the disc's row dy: the largest h with h^2 + dy^2 <= radius^2
};
BilateralArgs bilateral_args(const BilateralFilter& f, Depth depth);

template <class T>
struct BilateralOp : BilateralArgs {
    static constexpr bool kFloat = std::is_same_v<T, float>;
    AnyBorderSource<T> src;
    ImageView dst;

    CBI_HOST_DEVICE void operator()(int x, int y) const { at(x, y, color_weight, space_weight); }
    // With the weight tables read from `colors` and `spaces` (the GPU's naive
    // schedule stages them in shared memory: the kernel parameter indexed by
    // each thread's own colour distance serialises a warp's reads).
    CBI_HOST_DEVICE void at(int x, int y, const float* colors, const float* spaces) const {
        switch (src.view.channels) {
            case 1: pixel<1>(x, y, colors, spaces); return;
            case 3: pixel<3>(x, y, colors, spaces); return;
            default: pixel<4>(x, y, colors, spaces); return;
        }
    }

    CBI_HOST_DEVICE float space_w(int n, const float* spaces) const {
        return n < kBilateralSpaceTable ? spaces[n] : exp_nonpositive(mul_rn(small_int_to_float(n), space_coeff));
    }
    // Integer depths: d is an exact integer below 2^22.
    template <int CN>
    CBI_HOST_DEVICE float color_w(int d, const float* colors) const {
        if constexpr (std::is_same_v<T, std::uint8_t>)
            if (CN <= 3 || d < kBilateralColorTable) return colors[d];  // 1 and 3 channels: always
        const float f = small_int_to_float(d);
        return exp_nonpositive(mul_rn(mul_rn(f, f), color_coeff));
    }
    template <int CN>
    CBI_HOST_DEVICE float color_w(float d, const float*) const {
        return exp_nonpositive(mul_rn(mul_rn(d, d), color_coeff));
    }

    template <int CN>
    CBI_HOST_DEVICE void pixel(int x, int y, const float* colors, const float* spaces) const {
        using V = std::conditional_t<kFloat, float, int>;  // samples as the differences take them
        const T* centre_row = src.row(y);
        V v0[CN];
        float sum[CN];
        float wsum = 0;
        CBI_UNROLL
        for (int c = 0; c < CN; ++c) {
            v0[c] = static_cast<V>(src.at(centre_row, x, c));
            sum[c] = 0;
        }
        if constexpr (kFloat) {  // OpenCV's 32f path: the centre first, weight 1
            CBI_UNROLL
            for (int c = 0; c < CN; ++c) sum[c] = v0[c];
            wsum = 1;
        }
        // A tap of samples v and space weight `space`.
        const auto tap = [&](const V* v, float space) {
            V d = 0;
            CBI_UNROLL
            for (int c = 0; c < CN; ++c) {
                if constexpr (kFloat) {
                    const float diff = add_rn(v[c], -v0[c]), a = diff < 0.f ? -diff : diff;
                    d = c == 0 ? a : add_rn(d, a);  // not 0 + a: the same square, one add fewer
                } else {
                    d += v[c] < v0[c] ? v0[c] - v[c] : v[c] - v0[c];
                }
            }
            const float w = mul_rn(space, color_w<CN>(d, colors));
            CBI_UNROLL
            for (int c = 0; c < CN; ++c) sum[c] = add_rn(sum[c], mul_rn(static_cast<float>(v[c]), w));
            wsum = add_rn(wsum, w);
        };
        const int r = radius, width = src.view.width;
        for (int dy = -r; dy <= r; ++dy) {
            const int h = half_width[dy < 0 ? -dy : dy];
            const T* row = src.row(y + dy);
            // Taps dx = a .. b of the row: inside the image, plain loads and the
            // squared distance stepped ((dx + 1)^2 = dx^2 + 2 dx + 1); else through the border.
            const auto taps = [&](int a, int b) {
                V v[CN];
                if (row != nullptr && x + a >= 0 && x + b < width) {
                    const T* p = row + (x + a) * CN;
                    int n = a * a + dy * dy;
                    for (int dx = a; dx <= b; ++dx, p += CN) {
                        CBI_UNROLL
                        for (int c = 0; c < CN; ++c) v[c] = static_cast<V>(p[c]);
                        tap(v, space_w(n, spaces));
                        n += 2 * dx + 1;
                    }
                } else {
                    for (int dx = a; dx <= b; ++dx) {
                        CBI_UNROLL
                        for (int c = 0; c < CN; ++c) v[c] = static_cast<V>(src.at(row, x + dx, c));
                        tap(v, space_w(dx * dx + dy * dy, spaces));
                    }
                }
            };
            if (kFloat && dy == 0) {  // the centre is in already
                taps(-h, -1);
                taps(1, h);
            } else {
                taps(-h, h);
            }
        }
        const float inv = reciprocal_rn(wsum);
        T* out = dst.row<T>(y) + x * dst.channels;
        CBI_UNROLL
        for (int c = 0; c < CN; ++c) out[c] = saturate_round<T>(mul_rn(sum[c], inv));
    }
};

template <>
struct FilterKind<BilateralFilter> {
    static constexpr std::string_view name = "bilateral", form = "bilateral:D:SIGMA_COLOR:SIGMA_SPACE",
                                      params = "diameter sigma_color sigma_space";
    static constexpr std::string_view help =
        "edge-preserving smoothing over a disc of diameter D (<= 0: from SIGMA_SPACE), weights Gaussian in "
        "distance and in the L1 colour difference";
    static constexpr std::string_view opencv = "cv::bilateralFilter(src, dst, D, SIGMA_COLOR, SIGMA_SPACE, border)";
    static constexpr Category category = Category::window;
    static constexpr std::string_view examples[] = {"5:30:5", "9:0.5:3", "0:75:2"};
    static constexpr KindDefault defaults[] = {
        // naive: the weight tables staged in shared memory (cuda/bilateral.cuh)
        {true, 0, kAnyDepth, 0, "naive tile:32x8 tile:16x16"},
        {false, 0, kAnyDepth, 0, "naive"},
    };

    static BilateralFilter parse(std::string_view a);
    static std::string print(const BilateralFilter& f) {
        return std::to_string(f.diameter) + ":" + args::number(f.sigma_color) + ":" + args::number(f.sigma_space);
    }
    static Footprint footprint(const BilateralFilter& f) {
        const int r = bilateral_radius(f);
        return {2 * r + 1, 2 * r + 1};
    }
    template <class T>
    static BilateralOp<T> op(const BilateralFilter& f, const ImageView& src, const Border& border,
                             const ImageView& dst) {
        return {
            bilateral_args(f, src.depth), {src, saturate_round<T>(static_cast<float>(border.value)), border.mode}, dst};
    }
};

}  // namespace cbi
