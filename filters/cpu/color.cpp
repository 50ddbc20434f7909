// The CPU colour matrix and blend with OpenCV's universal intrinsics at
// AVX2 width (plus three raw AVX2 instructions, see to_f32), bit-identical
// to ColorOp<T>::sample and BlendOp<T>::sample, and HSV/HLS (raw AVX2,
// bit-identical to HsvOp<T>); filters/cpu/opencv_avx2.hpp (included first)
// sets up the intrinsics.
#include "filters/cpu/opencv_avx2.hpp"

#include "filters/cpu/color.hpp"

#include <cfloat>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace cbi::cpu {
namespace {

#if CBI_OPENCV_AVX2
using namespace cv;

// One vector of T: the pixels of one step, per channel.
template <class T>
struct Avx2;
template <>
struct Avx2<std::uint8_t> {
    using V = v_uint8x32;
};
template <>
struct Avx2<std::uint16_t> {
    using V = v_uint16x16;
};
template <>
struct Avx2<float> {
    using V = v_float32x8;
};

// Widening and narrowing stay inside each 128-bit half: unpacking with
// zeros (or one byte shuffle for 8-bit) widens, the AVX2 packs narrow,
// half by half, so the packs undo the widening exactly. v_expand and v_pack
// keep the elements in order with lane permutes that cost a noticeable part
// of a colour matrix's time (docs/performance.md#cpu-color); the arithmetic in between does not care
// in which order the pixels of a step sit in the float vectors.

// A vector of samples as 4 / sizeof(T) vectors of floats, exactly.
CBI_AVX2 void to_f32(const v_uint16x16& v, v_float32x8* f) {
    const v_uint16x16 z = v256_setzero_u16();
    f[0] = v_cvt_f32(v_reinterpret_as_s32(v256_unpacklo(v, z)));
    f[1] = v_cvt_f32(v_reinterpret_as_s32(v256_unpackhi(v, z)));
}
CBI_AVX2 void to_f32(const v_uint8x32& v, v_float32x8* f) {
    // f[k] takes bytes 4k..4k+3 of each half (the order of two unpacks):
    // byte i to the low byte of an int32 lane; an index with bit 7 set gives 0.
    for (int k = 0; k < 4; ++k) {
        const int z = static_cast<int>(0x80808000u), i = 4 * k;
        const __m256i pick = _mm256_setr_epi32(z | i, z | (i + 1), z | (i + 2), z | (i + 3),  //
                                               z | i, z | (i + 1), z | (i + 2), z | (i + 3));
        f[k] = v_cvt_f32(v_int32x8(_mm256_shuffle_epi8(v.val, pick)));
    }
}
CBI_AVX2 void to_f32(const v_float32x8& v, v_float32x8* f) {
    f[0] = v;
}

// saturate_round<T> of two float vectors, as 16 samples <= hi in to_f32's
// order. v_min(hi, v) caps (it returns v when v is NaN: _mm256_min_ps gives
// its second operand); v_round rounds to nearest even (the default MXCSR
// mode, as std::nearbyint) and turns NaN and anything beyond int32 into
// INT_MIN; the pack's unsigned saturation then gives 0 for NaN and
// negatives, as saturate_round does.
CBI_AVX2 v_uint16x16 round_pack(const v_float32x8* s, float hi) {
    const v_float32x8 cap = v256_setall_f32(hi);
    return v_uint16x16(_mm256_packus_epi32(v_round(v_min(cap, s[0])).val, v_round(v_min(cap, s[1])).val));
}
CBI_AVX2 void from_f32(const v_float32x8* s, v_uint16x16& out) {
    out = round_pack(s, 65535.f);
}
CBI_AVX2 void from_f32(const v_float32x8* s, v_uint8x32& out) {
    out = v_uint8x32(_mm256_packus_epi16(round_pack(s, 255.f).val, round_pack(s + 2, 255.f).val));
}
CBI_AVX2 void from_f32(const v_float32x8* s, v_float32x8& out) {
    out = s[0];
}  // float: no rounding

// One step's pixels as a vector per channel (CN 1, 3 or 4: deinterleaved).
template <int CN, class T, class V>
CBI_AVX2 void load_channels(const T* p, V* c) {
    if constexpr (CN == 1)
        c[0] = v256_load(p);
    else if constexpr (CN == 3)
        v_load_deinterleave(p, c[0], c[1], c[2]);
    else
        v_load_deinterleave(p, c[0], c[1], c[2], c[3]);
}

// Pixels [0, returned x) of one row: per step, one vector of T per channel
// (32 pixels for 8-bit, 16 for 16-bit, 8 for float), deinterleaved,
// widened to floats, the matrix applied in sample()'s order
// (((m0*c0 + m1*c1) + m2*c2) + m3) with separate roundings (no FMA), then
// rounded, saturated, narrowed and interleaved back. Alpha is copied. A
// 1-channel input (CI 1) is one vector per step, read as B = G = R.
template <int CI, int CO, class T>
CBI_AVX2 int color_row_avx2(const StorageMatrix& matrix, const T* in, T* out, int width) {
    using V = typename Avx2<T>::V;
    constexpr int N = V::nlanes;                // pixels per step
    constexpr int K = N / v_float32x8::nlanes;  // float vectors per channel
    constexpr int R = CO < 3 ? CO : 3;          // matrix rows used
    int x = 0;
    if constexpr (std::is_same_v<T, std::uint16_t> && CO == 1 && CI != 1)
        if (matrix.fixed15) {  // sample()'s integer form, 16 pixels a step
            const v_uint32x8 q0 = v256_setall_u32(matrix.q15[0]), q1 = v256_setall_u32(matrix.q15[1]),
                             q2 = v256_setall_u32(matrix.q15[2]), half = v256_setall_u32(1u << 14);
            for (; x + N <= width; x += N) {
                V c[4];
                load_channels<CI>(in + x * CI, c);
                v_uint32x8 lo[3], hi[3];
                for (int i = 0; i < 3; ++i) v_expand(c[i], lo[i], hi[i]);
                const v_uint32x8 a = (lo[0] * q0 + lo[1] * q1 + lo[2] * q2 + half) >> 15,
                                 b = (hi[0] * q0 + hi[1] * q1 + hi[2] * q2 + half) >> 15;
                v_store(out + x, v_pack(a, b));  // <= 65535 each: the pack keeps them
            }
            return x;
        }
    v_float32x8 m[R][4];
    for (int r = 0; r < R; ++r)
        for (int i = 0; i < 4; ++i) m[r][i] = v256_setall_f32(matrix.m[r][i]);
    for (; x + N <= width; x += N) {
        V c[4];
        load_channels<CI>(in + x * CI, c);
        v_float32x8 f[3][K];
        for (int i = 0; i < (CI == 1 ? 1 : 3); ++i) to_f32(c[i], f[i]);
        if constexpr (CI == 1)
            for (int k = 0; k < K; ++k) f[1][k] = f[2][k] = f[0][k];
        V o[4];
        for (int r = 0; r < R; ++r) {
            v_float32x8 s[K];
            for (int k = 0; k < K; ++k) s[k] = ((m[r][0] * f[0][k] + m[r][1] * f[1][k]) + m[r][2] * f[2][k]) + m[r][3];
            from_f32(s, o[r]);
        }
        if constexpr (CO == 1)
            v_store(out + x, o[0]);
        else if constexpr (CO == 3)
            v_store_interleave(out + x * CO, o[0], o[1], o[2]);
        else
            v_store_interleave(out + x * CO, o[0], o[1], o[2], c[3]);  // alpha copied
    }
    return x;
}

// Samples [0, returned i) of n: BlendOp::sample's arithmetic (the two
// products, then the two sums, each rounded), a vector of T at a time. A
// blend is per sample, so channels and the order to_f32 leaves the samples
// in do not matter.
template <class T>
CBI_AVX2 int blend_row_avx2(const BlendOp<T>& op, const T* a, const T* b, T* out, int n) {
    using V = typename Avx2<T>::V;
    constexpr int N = V::nlanes;
    constexpr int K = N / v_float32x8::nlanes;
    const v_float32x8 alpha = v256_setall_f32(op.alpha), beta = v256_setall_f32(op.beta),
                      gamma = v256_setall_f32(op.gamma);
    int i = 0;
    for (; i + N <= n; i += N) {
        v_float32x8 fa[K], fb[K], s[K];
        to_f32(v256_load(a + i), fa);
        to_f32(v256_load(b + i), fb);
        for (int k = 0; k < K; ++k) s[k] = (alpha * fa[k] + beta * fb[k]) + gamma;
        V o;
        from_f32(s, o);
        v_store(out + i, o);
    }
    return i;
}

// HsvOp<uint8_t> with 3 or 4 channels: pixels [0, returned x) of one row,
// 32 per step, with operator()'s arithmetic. The channels are widened to
// int32 lanes in to_f32's order and narrowed back through the saturating
// packs (which also clamp H to 0..255 as operator() does). HSV: the
// integer formula with the division tables read by gathers; HLS: the float
// formula, its one fused multiply-add for H through the FMA instruction
// (the function is compiled for AVX2 and FMA; -ffp-contract=off keeps the
// other products and sums separately rounded).
#define CBI_AVX2_FMA [[gnu::target("avx2,fma")]] inline

CBI_AVX2 void widen_s32(const v_uint8x32& v, __m256i* w) {
    for (int k = 0; k < 4; ++k) {
        const int z = static_cast<int>(0x80808000u), i = 4 * k;
        const __m256i pick = _mm256_setr_epi32(z | i, z | (i + 1), z | (i + 2), z | (i + 3),  //
                                               z | i, z | (i + 1), z | (i + 2), z | (i + 3));
        w[k] = _mm256_shuffle_epi8(v.val, pick);
    }
}
CBI_AVX2 v_uint8x32 narrow_u8(const __m256i* w) {
    return v_uint8x32(_mm256_packus_epi16(_mm256_packus_epi32(w[0], w[1]), _mm256_packus_epi32(w[2], w[3])));
}

// H, S, V of 8 pixels (int32 lanes), as HsvOp::hsv8.
CBI_AVX2_FMA void hsv8_lanes(const HsvOp<std::uint8_t>& op, __m256i b, __m256i g, __m256i r, __m256i& h_out,
                             __m256i& s_out, __m256i& v_out) {
    const __m256i v = _mm256_max_epi32(_mm256_max_epi32(b, g), r);
    const __m256i vmin = _mm256_min_epi32(_mm256_min_epi32(b, g), r);
    const __m256i diff = _mm256_sub_epi32(v, vmin);
    const __m256i half = _mm256_set1_epi32(1 << 11);
    const __m256i sdiv = _mm256_i32gather_epi32(op.sdiv, v, 4);
    const __m256i hdiv = _mm256_i32gather_epi32(op.hdiv, diff, 4);
    s_out = _mm256_srai_epi32(_mm256_add_epi32(_mm256_mullo_epi32(diff, sdiv), half), 12);
    const __m256i is_r = _mm256_cmpeq_epi32(v, r), is_g = _mm256_cmpeq_epi32(v, g);
    const __m256i hr = _mm256_sub_epi32(g, b);
    const __m256i hg = _mm256_add_epi32(_mm256_sub_epi32(b, r), _mm256_add_epi32(diff, diff));
    const __m256i hb = _mm256_add_epi32(_mm256_sub_epi32(r, g), _mm256_slli_epi32(diff, 2));
    __m256i h = _mm256_blendv_epi8(_mm256_blendv_epi8(hb, hg, is_g), hr, is_r);
    h = _mm256_srai_epi32(_mm256_add_epi32(_mm256_mullo_epi32(h, hdiv), half), 12);
    h = _mm256_add_epi32(h, _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), h), _mm256_set1_epi32(180)));
    h_out = h;
    v_out = v;
}

// H, L, S of 8 pixels (int32 lanes), as HsvOp::hls_float on src / 255 and
// operator()'s roundings.
CBI_AVX2_FMA void hls8_lanes(__m256i bi, __m256i gi, __m256i ri, __m256i& h_out, __m256i& l_out, __m256i& s_out) {
    const __m256 k = _mm256_set1_ps(1.f / 255.f);
    const __m256 b = _mm256_mul_ps(_mm256_cvtepi32_ps(bi), k), g = _mm256_mul_ps(_mm256_cvtepi32_ps(gi), k),
                 r = _mm256_mul_ps(_mm256_cvtepi32_ps(ri), k);
    const __m256 vmax = _mm256_max_ps(_mm256_max_ps(r, g), b), vmin = _mm256_min_ps(_mm256_min_ps(r, g), b);
    const __m256 diff = _mm256_sub_ps(vmax, vmin), sum = _mm256_add_ps(vmax, vmin);
    const __m256 l = _mm256_mul_ps(sum, _mm256_set1_ps(0.5f));
    const __m256 some = _mm256_cmp_ps(diff, _mm256_set1_ps(FLT_EPSILON), _CMP_GT_OQ);  // else H = S = 0
    const __m256 dark = _mm256_cmp_ps(l, _mm256_set1_ps(0.5f), _CMP_LT_OQ);
    const __m256 s = _mm256_div_ps(diff, _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(2.f), sum), sum, dark));
    const __m256 kh = _mm256_div_ps(_mm256_set1_ps(60.f), diff);
    const __m256 is_r = _mm256_cmp_ps(vmax, r, _CMP_EQ_OQ), is_g = _mm256_cmp_ps(vmax, g, _CMP_EQ_OQ);
    const __m256 wrap = _mm256_and_ps(_mm256_cmp_ps(g, b, _CMP_LT_OQ), _mm256_set1_ps(360.f));
    const __m256 hr = _mm256_fmadd_ps(_mm256_sub_ps(g, b), kh, wrap);
    const __m256 hg = _mm256_fmadd_ps(_mm256_sub_ps(b, r), kh, _mm256_set1_ps(120.f));
    const __m256 hb = _mm256_fmadd_ps(_mm256_sub_ps(r, g), kh, _mm256_set1_ps(240.f));
    const __m256 h = _mm256_and_ps(_mm256_blendv_ps(_mm256_blendv_ps(hb, hg, is_g), hr, is_r), some);
    // Rounded to nearest even (MXCSR's default); the packs saturate.
    h_out = _mm256_cvtps_epi32(_mm256_mul_ps(h, _mm256_set1_ps(0.5f)));
    l_out = _mm256_cvtps_epi32(_mm256_mul_ps(l, _mm256_set1_ps(255.f)));
    s_out = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_and_ps(s, some), _mm256_set1_ps(255.f)));
}

template <int CN>
CBI_AVX2_FMA int hsv_row_avx2(const HsvOp<std::uint8_t>& op, const std::uint8_t* in, std::uint8_t* out, int width) {
    constexpr int N = v_uint8x32::nlanes;
    int x = 0;
    for (; x + N <= width; x += N) {
        v_uint8x32 c[4];
        load_channels<CN>(in + x * CN, c);
        __m256i b[4], g[4], r[4], o[3][4];
        widen_s32(c[0], b);
        widen_s32(c[1], g);
        widen_s32(c[2], r);
        for (int k = 0; k < 4; ++k) {
            if (op.hls)
                hls8_lanes(b[k], g[k], r[k], o[0][k], o[1][k], o[2][k]);
            else
                hsv8_lanes(op, b[k], g[k], r[k], o[0][k], o[1][k], o[2][k]);
        }
        if constexpr (CN == 3)
            v_store_interleave(out + x * CN, narrow_u8(o[0]), narrow_u8(o[1]), narrow_u8(o[2]));
        else
            v_store_interleave(out + x * CN, narrow_u8(o[0]), narrow_u8(o[1]), narrow_u8(o[2]), c[3]);
    }
    return x;
}
#endif

// Rows of op with the channel counts as constants: the AVX2 steps where
// the CPU has AVX2, then ColorOp<T>::sample for the rest of each row.
template <int CI, int CO, class T>
void rows(const ColorOp<T>& op, int y0, int y1) {
    const int width = op.dst.width;
    for (int y = y0; y < y1; ++y) {
        const T* in = op.src.template row<const T>(y);
        T* out = op.dst.template row<T>(y);
        int x = 0;
#if CBI_OPENCV_AVX2
        if (has_avx2()) x = color_row_avx2<CI, CO>(op.matrix, in, out, width);
#endif
        for (; x < width; ++x) {
            for (int r = 0; r < (CO < 3 ? CO : 3); ++r)
                out[x * CO + r] = ColorOp<T>::sample(op.matrix, in + x * CI, r, color_step(CI));
            if constexpr (CO == 4) out[x * CO + 3] = in[x * CI + 3];
        }
    }
}

}  // namespace

template <class T>
void color_rows(const ColorOp<T>& op, int y0, int y1) {
    const int ci = op.src.channels, co = op.dst.channels;
    if (ci == 1 && co == 1 && op.matrix.copy) {  // gray of a 1-channel image: the image itself
        for (int y = y0; y < y1; ++y)
            std::memcpy(op.dst.template row<T>(y), op.src.template row<const T>(y), op.dst.row_bytes());
        return;
    }
    if (ci == 1 && co == 3) return rows<1, 3>(op, y0, y1);
    if (ci == 3 && co == 3) return rows<3, 3>(op, y0, y1);
    if (ci == 3 && co == 1) return rows<3, 1>(op, y0, y1);
    if (ci == 4 && co == 4) return rows<4, 4>(op, y0, y1);
    if (ci == 4 && co == 1) return rows<4, 1>(op, y0, y1);
    for (int y = y0; y < y1; ++y)
        for (int x = 0; x < op.dst.width; ++x) op(x, y);
}

template <class T>
void blend_rows(const BlendOp<T>& op, int y0, int y1) {
    const int n = op.dst.width * op.dst.channels;
    for (int y = y0; y < y1; ++y) {
        const T* a = op.a.template row<const T>(y);
        const T* b = op.b.template row<const T>(y);
        T* out = op.dst.template row<T>(y);
        int i = 0;
#if CBI_OPENCV_AVX2
        if (has_avx2()) i = blend_row_avx2(op, a, b, out, n);
#endif
        for (; i < n; ++i) out[i] = op.sample(a[i], b[i]);
    }
}

template <class T>
void hsv_rows(const HsvOp<T>& op, int y0, int y1) {
    const int width = op.dst.width, cn = op.src.channels;
    for (int y = y0; y < y1; ++y) {
        int x = 0;
#if CBI_OPENCV_AVX2
        if constexpr (std::is_same_v<T, std::uint8_t>) {
            static const bool fma = __builtin_cpu_supports("fma");
            if (has_avx2() && fma && (cn == 3 || cn == 4)) {
                const T* in = op.src.template row<const T>(y);
                T* out = op.dst.template row<T>(y);
                x = cn == 3 ? hsv_row_avx2<3>(op, in, out, width) : hsv_row_avx2<4>(op, in, out, width);
            }
        }
#endif
        for (; x < width; ++x) op(x, y);
    }
}

template void color_rows(const ColorOp<std::uint8_t>&, int, int);
template void color_rows(const ColorOp<std::uint16_t>&, int, int);
template void color_rows(const ColorOp<float>&, int, int);
template void blend_rows(const BlendOp<std::uint8_t>&, int, int);
template void blend_rows(const BlendOp<std::uint16_t>&, int, int);
template void blend_rows(const BlendOp<float>&, int, int);
template void hsv_rows(const HsvOp<std::uint8_t>&, int, int);
template void hsv_rows(const HsvOp<std::uint16_t>&, int, int);
template void hsv_rows(const HsvOp<float>&, int, int);

}  // namespace cbi::cpu
