#pragma once
// hsv and hls = cv::cvtColor(src, dst, COLOR_BGR2HSV / COLOR_BGR2HLS):
// channels (H, S, V) or (H, L, S). 8-bit: H in 0..180 (degrees / 2), S, V
// and L in 0..255 -- HSV bit for bit with OpenCV's integer path
// (hsv_shift = 12 division tables), HLS with its float path as the AVX2
// build runs it (inputs times 1/255, one fused multiply-add for H, rounded
// to nearest even). Float: H in 0..360, S and L as OpenCV (V the maximum).
// 16-bit, which OpenCV refuses: the float definition on src / 65535, H
// stored as on 8-bit (degrees / 2, 0..180) and S, L (and V) in 0..65535,
// rounded and saturated. A 1-channel input is read as R = G = B (H = S =
// 0); a 4-channel input keeps its alpha (4 channels out), as `color` does.
//
// These are their own kinds, not presets of `color`: `color` is a 3x4
// matrix (StorageMatrix) that the fused colour-before-stencil paths, the
// AVX2 row kernel and the CUDA vec kernels apply as a matrix; a non-linear
// transform there would be a branch in each of them.
#include <cfloat>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "filters/kinds/args.hpp"
#include "filters/kinds/kind.hpp"
#include "filters/ops.hpp"

namespace cbi {

struct HsvFilter {
    friend bool operator==(const HsvFilter&, const HsvFilter&) = default;
};
struct HlsFilter {
    friend bool operator==(const HlsFilter&, const HlsFilter&) = default;
};

// round(n / d) to nearest even for n >= 0, d > 0 (0 for d = 0): cvRound of
// the double quotient, as OpenCV fills its tables (the quotient's double
// rounding never moves it across a half: its distance from one is at least
// 1 / (6 d), far above double precision).
CBI_HOST_DEVICE constexpr int div_round_even(int n, int d) {
    if (d == 0) return 0;
    const int q = n / d, r = n % d;
    return 2 * r > d || (2 * r == d && (q & 1)) ? q + 1 : q;
}
// OpenCV's RGB2HSV_b tables (color_hsv.simd.hpp, hsv_shift 12):
// sdiv[i] = cvRound((255 << 12) / i), hdiv[i] = cvRound((180 << 12) / (6 i)).
CBI_HOST_DEVICE constexpr int hsv_sdiv(int i) {
    return div_round_even(255 << 12, i);
}
CBI_HOST_DEVICE constexpr int hsv_hdiv(int i) {
    return div_round_even(180 << 12, 6 * i);
}

template <class T>
struct HsvOp {
    ImageView src;
    ImageView dst;
    bool hls;
    // 8-bit HSV on the host: hsv_sdiv and hsv_hdiv as tables (the GPU
    // computes them: two integer divisions).
    static constexpr int kTable = std::is_same_v<T, std::uint8_t> ? 256 : 1;
    int sdiv[kTable];
    int hdiv[kTable];

    CBI_HOST_DEVICE int sdiv_of(int i) const {
#if !defined(__CUDA_ARCH__)
        if constexpr (kTable == 256) return sdiv[i];
#endif
        return hsv_sdiv(i);
    }
    CBI_HOST_DEVICE int hdiv_of(int i) const {
#if !defined(__CUDA_ARCH__)
        if constexpr (kTable == 256) return hdiv[i];
#endif
        return hsv_hdiv(i);
    }

    // OpenCV's 8-bit HSV (RGB2HSV_b), integer arithmetic.
    CBI_HOST_DEVICE void hsv8(int b, int g, int r, T* out) const {
        const int v = b > g ? (b > r ? b : r) : (g > r ? g : r);
        const int vmin = b < g ? (b < r ? b : r) : (g < r ? g : r);
        const int diff = v - vmin;
        const int s = (diff * sdiv_of(v) + (1 << 11)) >> 12;
        int h = v == r ? g - b : v == g ? b - r + 2 * diff : r - g + 4 * diff;
        h = (h * hdiv_of(diff) + (1 << 11)) >> 12;  // arithmetic shift, as OpenCV's
        h += h < 0 ? 180 : 0;
        out[0] = static_cast<T>(h < 0 ? 0 : h > 255 ? 255 : h);
        out[1] = static_cast<T>(s);
        out[2] = static_cast<T>(v);
    }

    // OpenCV's float HSV (RGB2HSV_f), H in degrees.
    static CBI_HOST_DEVICE void hsv_float(float b, float g, float r, float& h, float& s, float& v) {
        v = r;
        float vmin = r;
        if (v < g) v = g;
        if (v < b) v = b;
        if (vmin > g) vmin = g;
        if (vmin > b) vmin = b;
        const float diff = v - vmin;
        s = diff / (fabsf(v) + FLT_EPSILON);
        const float k = static_cast<float>(60.0 / static_cast<double>(add_rn(diff, FLT_EPSILON)));
        if (v == r)
            h = mul_rn(g - b, k);
        else if (v == g)
            h = add_rn(mul_rn(b - r, k), 120.f);
        else
            h = add_rn(mul_rn(r - g, k), 240.f);
        if (h < 0) h = add_rn(h, 360.f);
    }

    // OpenCV's float HLS (RGB2HLS_f's vector form, which the 8-bit path
    // runs on src / 255): H in degrees; `fused` with its one fused
    // multiply-add for H.
    static CBI_HOST_DEVICE void hls_float(float b, float g, float r, float& h, float& l, float& s) {
        const float vmax = fmaxf(fmaxf(r, g), b), vmin = fminf(fminf(r, g), b);
        const float diff = vmax - vmin, sum = vmax + vmin;
        l = mul_rn(sum, 0.5f);
        if (!(diff > FLT_EPSILON)) {
            h = s = 0.f;
            return;
        }
        s = diff / (l < 0.5f ? sum : 2.f - sum);
        const float k = 60.f / diff;
        if (vmax == r)
            h = fma_rn(g - b, k, g < b ? 360.f : 0.f);
        else if (vmax == g)
            h = fma_rn(b - r, k, 120.f);
        else
            h = fma_rn(r - g, k, 240.f);
    }

    CBI_HOST_DEVICE void operator()(int x, int y) const {
        const T* in = src.row<const T>(y) + x * src.channels;
        T* out = dst.row<T>(y) + x * dst.channels;
        const int step = color_step(src.channels);  // 1 channel: R = G = B
        const T b = in[0], g = in[step], r = in[2 * step];
        if constexpr (std::is_same_v<T, std::uint8_t>) {
            if (!hls) {
                hsv8(b, g, r, out);
            } else {
                constexpr float k = 1.f / 255.f;
                float h, l, s;
                hls_float(mul_rn(to_float(b), k), mul_rn(to_float(g), k), mul_rn(to_float(r), k), h, l, s);
                out[0] = saturate_round<T>(mul_rn(h, 0.5f));
                out[1] = saturate_round<T>(mul_rn(l, 255.f));
                out[2] = saturate_round<T>(mul_rn(s, 255.f));
            }
        } else if constexpr (std::is_same_v<T, std::uint16_t>) {
            constexpr float k = 1.f / 65535.f;
            const float fb = mul_rn(to_float(b), k), fg = mul_rn(to_float(g), k), fr = mul_rn(to_float(r), k);
            float h, m1, m2;  // (S, V) or (L, S)
            if (hls)
                hls_float(fb, fg, fr, h, m1, m2);
            else
                hsv_float(fb, fg, fr, h, m1, m2);
            out[0] = saturate_round<T>(mul_rn(h, 0.5f));
            out[1] = saturate_round<T>(mul_rn(m1, 65535.f));
            out[2] = hls ? saturate_round<T>(mul_rn(m2, 65535.f)) : (b > g ? (b > r ? b : r) : (g > r ? g : r));
        } else {
            if (hls)
                hls_float(b, g, r, out[0], out[1], out[2]);
            else
                hsv_float(b, g, r, out[0], out[1], out[2]);
        }
        if (dst.channels == 4) out[3] = in[3];
    }
};

// The kinds' shared parts.
struct HsvKindBase {
    static constexpr Category category = Category::pointwise;
    static constexpr std::string_view examples[] = {""};
    static constexpr KindDefault defaults[] = {
        // Not measured. One thread a pixel: the CUDA vec:N kernels take the
        // colour matrix and blend only (cuda/backend.cu launch_vec).
        {true, 0, kAnyDepth, 0, "naive tile:32x8 column:32"},
        {false, 0, kAnyDepth, 0, "naive"},
    };
    static Footprint footprint_any() { return {}; }
    // 3 channels from 1 or 3, 4 (alpha kept) from 4; cbi::Error otherwise.
    static int channels_out(std::string_view name, int channels);
    static void parse_none(std::string_view name, std::string_view a);
    template <class T>
    static HsvOp<T> make(bool hls, const ImageView& src, const ImageView& dst) {
        HsvOp<T> op{src, dst, hls, {}, {}};
        if constexpr (HsvOp<T>::kTable == 256)
            for (int i = 0; i < 256; ++i) op.sdiv[i] = hsv_sdiv(i), op.hdiv[i] = hsv_hdiv(i);
        return op;
    }
};

template <>
struct FilterKind<HsvFilter> : HsvKindBase {
    static constexpr std::string_view name = "hsv", form = "hsv", params = "";
    static constexpr std::string_view help =
        "BGR to HSV: H 0..180 on 8/16-bit (degrees / 2), 0..360 on float; alpha kept";
    static constexpr std::string_view opencv = "cv::cvtColor(src, dst, COLOR_BGR2HSV)";
    static HsvFilter parse(std::string_view a) { return parse_none(name, a), HsvFilter{}; }
    static std::string print(const HsvFilter&) { return {}; }
    static Footprint footprint(const HsvFilter&) { return {}; }
    static int output_channels(const HsvFilter&, int channels) { return channels_out(name, channels); }
    template <class T>
    static HsvOp<T> op(const HsvFilter&, const ImageView& src, const ImageView& dst) {
        return make<T>(false, src, dst);
    }
};

template <>
struct FilterKind<HlsFilter> : HsvKindBase {
    static constexpr std::string_view name = "hls", form = "hls", params = "";
    static constexpr std::string_view help =
        "BGR to HLS: H 0..180 on 8/16-bit (degrees / 2), 0..360 on float; alpha kept";
    static constexpr std::string_view opencv = "cv::cvtColor(src, dst, COLOR_BGR2HLS)";
    static HlsFilter parse(std::string_view a) { return parse_none(name, a), HlsFilter{}; }
    static std::string print(const HlsFilter&) { return {}; }
    static Footprint footprint(const HlsFilter&) { return {}; }
    static int output_channels(const HlsFilter&, int channels) { return channels_out(name, channels); }
    template <class T>
    static HsvOp<T> op(const HlsFilter&, const ImageView& src, const ImageView& dst) {
        return make<T>(true, src, dst);
    }
};

}  // namespace cbi
