// The 8-bit Sobel's passes with OpenCV's universal intrinsics (see
// cpu/sobel8.hpp); filters/cpu/opencv_avx2.hpp (included first) sets them up.
//
// The sums run in int16 lanes with wrapping adds and multiplies: modulo
// 2^16 they equal the exact integer sums, so wherever the exact sum fits
// int16 (the row sums always, the gradients where
// sobel8_gradients_fit_int16) they are the exact sums, whatever the order
// of the taps and however large a partial sum. Zero weights (the middle of
// a derivative kernel) are skipped for the same reason.
#include "filters/cpu/opencv_avx2.hpp"

#include "filters/cpu/sobel8.hpp"

namespace cbi::cpu {
namespace {

#if CBI_OPENCV_AVX2
using namespace cv;

constexpr int kLanes = v_int16x16::nlanes;  // 16

// The helpers below inline into the loops that call them (GCC does not
// inline target("avx2") functions on its own here).
#define CBI_AVX2_INLINE [[gnu::always_inline]] CBI_AVX2

// B vectors of row sums from i, kept in registers across the k taps.
template <int B>
CBI_AVX2_INLINE void row_sums_block(std::int16_t* out, const std::int16_t* in, std::ptrdiff_t tap_stride, const int* w,
                                    int k, int i) {
    v_int16x16 s[B];
    for (int b = 0; b < B; ++b) s[b] = v256_setzero_s16();
    for (int t = 0; t < k; ++t) {
        if (w[t] == 0) continue;
        const v_int16x16 wt = v256_setall_s16(static_cast<short>(w[t]));
        const std::int16_t* tap = in + t * tap_stride + i;
        for (int b = 0; b < B; ++b) s[b] = v_add_wrap(s[b], v_mul_wrap(wt, v256_load(tap + b * kLanes)));
    }
    for (int b = 0; b < B; ++b) v_store(out + i + b * kLanes, s[b]);
}

CBI_AVX2 int row_sums_avx2(std::int16_t* out, const std::int16_t* in, std::ptrdiff_t tap_stride, const int* w, int k,
                           int n) {
    int i = 0;
    for (; i + 4 * kLanes <= n; i += 4 * kLanes) row_sums_block<4>(out, in, tap_stride, w, k, i);
    for (; i + kLanes <= n; i += kLanes) row_sums_block<1>(out, in, tap_stride, w, k, i);
    return i;
}

// The gradients of 16 outputs: sum over j < k of w[j] * rows[j * pitch + lane].
CBI_AVX2_INLINE v_int16x16 gradients(const std::int16_t* rows, std::ptrdiff_t pitch, const int* w, int k) {
    v_int16x16 g = v256_setzero_s16();
    for (int j = 0; j < k; ++j)
        if (w[j] != 0)
            g = v_add_wrap(g, v_mul_wrap(v256_setall_s16(static_cast<short>(w[j])), v256_load(rows + j * pitch)));
    return g;
}

CBI_AVX2 int abs_columns_avx2(std::uint8_t* out, const std::int16_t* rows, std::ptrdiff_t pitch, const int* w, int k,
                              int n) {
    int i = 0;
    for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
        const v_uint16x16 a0 = v_abs(gradients(rows + i, pitch, w, k));
        const v_uint16x16 a1 = v_abs(gradients(rows + i + kLanes, pitch, w, k));
        v_store(out + i, v_pack(a0, a1));  // saturates to 255
    }
    for (; i + kLanes <= n; i += kLanes) {
        const v_uint16x16 a = v_abs(gradients(rows + i, pitch, w, k));
        v_store_low(out + i, v_pack(a, a));
    }
    return i;
}

// g / 2^shift rounded to nearest even: floor((g + 2^(shift-1) - 1 + odd) / 2^shift),
// odd the lowest bit of the quotient (a tie goes up only from an odd one).
CBI_AVX2_INLINE v_int16x16 round_shift(const v_int16x16& g, int shift) {
    if (shift == 0) return g;
    const v_int16x16 odd = (g >> shift) & v256_setall_s16(1);
    return (g + v256_setall_s16(static_cast<short>((1 << (shift - 1)) - 1)) + odd) >> shift;
}

CBI_AVX2 int int16_columns_u8_avx2(std::uint8_t* out, const std::int16_t* rows, std::ptrdiff_t pitch, const int* w,
                                   int k, int shift, int n) {
    int i = 0;
    for (; i + 4 * kLanes <= n; i += 4 * kLanes) {
        const v_int16x16 g0 = round_shift(gradients(rows + i, pitch, w, k), shift);
        const v_int16x16 g1 = round_shift(gradients(rows + i + kLanes, pitch, w, k), shift);
        const v_int16x16 g2 = round_shift(gradients(rows + i + 2 * kLanes, pitch, w, k), shift);
        const v_int16x16 g3 = round_shift(gradients(rows + i + 3 * kLanes, pitch, w, k), shift);
        v_store(out + i, v_pack_u(g0, g1));  // saturates to [0, 255]
        v_store(out + i + 2 * kLanes, v_pack_u(g2, g3));
    }
    for (; i + kLanes <= n; i += kLanes) {
        const v_int16x16 g = round_shift(gradients(rows + i, pitch, w, k), shift);
        v_store_low(out + i, v_pack_u(g, g));
    }
    return i;
}

// Column sums of 16 outputs in int32, the lanes of each 128-bit half
// interleaved as unpacklo/unpackhi leave them: lo holds outputs 0-3 and
// 8-11, hi 4-7 and 12-15 (_mm256_packs_epi32(lo, hi) puts them in order).
CBI_AVX2_INLINE void wide_sums(const std::int16_t* rows, std::ptrdiff_t pitch, const int* w, int k, __m256i& lo,
                               __m256i& hi) {
    lo = hi = _mm256_setzero_si256();
    int j = 0;
    for (; j + 1 < k; j += 2) {
        if (w[j] == 0 && w[j + 1] == 0) continue;
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + j * pitch));
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + (j + 1) * pitch));
        const __m256i wj = _mm256_set1_epi32(
            static_cast<int>((static_cast<unsigned>(w[j]) & 0xffffu) | (static_cast<unsigned>(w[j + 1]) << 16)));
        lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), wj));
        hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), wj));
    }
    if (j < k && w[j] != 0) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + j * pitch));
        const __m256i wj = _mm256_set1_epi32(w[j] & 0xffff);
        lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(a, _mm256_setzero_si256()), wj));
        hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(a, _mm256_setzero_si256()), wj));
    }
}

// round_shift in int32 lanes.
CBI_AVX2_INLINE __m256i round_shift32(__m256i g, int shift) {
    if (shift == 0) return g;
    const __m256i odd = _mm256_and_si256(_mm256_srai_epi32(g, shift), _mm256_set1_epi32(1));
    const __m256i bias = _mm256_add_epi32(_mm256_set1_epi32((1 << (shift - 1)) - 1), odd);
    return _mm256_srai_epi32(_mm256_add_epi32(g, bias), shift);
}

// 16 outputs, rounded and saturated to int16 (still beyond [0, 255] where the sum is).
CBI_AVX2_INLINE v_int16x16 wide_outputs(const std::int16_t* rows, std::ptrdiff_t pitch, const int* w, int k,
                                        int shift) {
    __m256i lo, hi;
    wide_sums(rows, pitch, w, k, lo, hi);
    return v_int16x16(_mm256_packs_epi32(round_shift32(lo, shift), round_shift32(hi, shift)));
}

CBI_AVX2 int int32_columns_u8_avx2(std::uint8_t* out, const std::int16_t* rows, std::ptrdiff_t pitch, const int* w,
                                   int k, int shift, int n) {
    int i = 0;
    for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
        const v_int16x16 g0 = wide_outputs(rows + i, pitch, w, k, shift);
        const v_int16x16 g1 = wide_outputs(rows + i + kLanes, pitch, w, k, shift);
        v_store(out + i, v_pack_u(g0, g1));
    }
    for (; i + kLanes <= n; i += kLanes) {
        const v_int16x16 g = wide_outputs(rows + i, pitch, w, k, shift);
        v_store_low(out + i, v_pack_u(g, g));
    }
    return i;
}

// The int16 lanes of each 128-bit half, low four (unpacklo) or high four
// (unpackhi), sign-extended to int32 and converted to float (exact). The
// unpacks stay inside the halves; _mm256_packs_epi32 of the two results
// puts the lanes back in order.
CBI_AVX2_INLINE v_float32x8 low_lanes_as_float(const v_int16x16& g) {
    return v_float32x8(_mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_unpacklo_epi16(g.val, g.val), 16)));
}
CBI_AVX2_INLINE v_float32x8 high_lanes_as_float(const v_int16x16& g) {
    return v_float32x8(_mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_unpackhi_epi16(g.val, g.val), 16)));
}

// SobelOp::finish's magnitude of 16 outputs, before the pack to bytes:
// gx * gx and gy * gy rounded to float, their sum rounded, the correctly
// rounded square root (sqrtf's), rounded to the nearest integer, ties to
// even (cvtps_epi32 under the default rounding mode, as nearbyint).
CBI_AVX2_INLINE v_int16x16 magnitudes(const v_int16x16& gx, const v_int16x16& gy) {
    const v_float32x8 xl = low_lanes_as_float(gx), yl = low_lanes_as_float(gy);
    const v_float32x8 xh = high_lanes_as_float(gx), yh = high_lanes_as_float(gy);
    const v_int32x8 ml = v_round(v_sqrt(xl * xl + yl * yl));
    const v_int32x8 mh = v_round(v_sqrt(xh * xh + yh * yh));
    return v_int16x16(_mm256_packs_epi32(ml.val, mh.val));  // saturates above 32767: still above 255
}

CBI_AVX2 int sum_abs_columns_avx2(std::uint8_t* out, const std::int16_t* rows_x, const int* wx, int kx,
                                  const std::int16_t* rows_y, const int* wy, int ky, std::ptrdiff_t pitch, int n) {
    int i = 0;
    for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
        const int j = i + kLanes;
        const v_uint16x16 a0 =
            v_abs(v_add_wrap(gradients(rows_x + i, pitch, wx, kx), gradients(rows_y + i, pitch, wy, ky)));
        const v_uint16x16 a1 =
            v_abs(v_add_wrap(gradients(rows_x + j, pitch, wx, kx), gradients(rows_y + j, pitch, wy, ky)));
        v_store(out + i, v_pack(a0, a1));  // saturates to 255
    }
    for (; i + kLanes <= n; i += kLanes) {
        const v_uint16x16 a =
            v_abs(v_add_wrap(gradients(rows_x + i, pitch, wx, kx), gradients(rows_y + i, pitch, wy, ky)));
        v_store_low(out + i, v_pack(a, a));
    }
    return i;
}

CBI_AVX2 int magnitude_columns_avx2(std::uint8_t* out, const std::int16_t* rows_x, const int* wx, int kx,
                                    const std::int16_t* rows_y, const int* wy, int ky, std::ptrdiff_t pitch, int n) {
    int i = 0;
    for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
        const int j = i + kLanes;
        const v_int16x16 m0 = magnitudes(gradients(rows_x + i, pitch, wx, kx), gradients(rows_y + i, pitch, wy, ky));
        const v_int16x16 m1 = magnitudes(gradients(rows_x + j, pitch, wx, kx), gradients(rows_y + j, pitch, wy, ky));
        v_store(out + i, v_pack_u(m0, m1));
    }
    for (; i + kLanes <= n; i += kLanes) {
        const v_int16x16 m = magnitudes(gradients(rows_x + i, pitch, wx, kx), gradients(rows_y + i, pitch, wy, ky));
        v_store_low(out + i, v_pack_u(m, m));
    }
    return i;
}
#endif

}  // namespace

bool sobel8_vectorised() {
#if CBI_OPENCV_AVX2
    return has_avx2();
#else
    return false;
#endif
}

int sobel8_row_sums(std::int16_t* out, const std::int16_t* in, std::ptrdiff_t tap_stride, const int* w, int k, int n) {
#if CBI_OPENCV_AVX2
    if (has_avx2()) return row_sums_avx2(out, in, tap_stride, w, k, n);
#endif
    return 0;
}

int sobel8_abs_columns(std::uint8_t* out, const std::int16_t* rows, std::ptrdiff_t pitch, const int* w, int k, int n) {
#if CBI_OPENCV_AVX2
    if (has_avx2()) return abs_columns_avx2(out, rows, pitch, w, k, n);
#endif
    return 0;
}

int int16_columns_u8(std::uint8_t* out, const std::int16_t* rows, std::ptrdiff_t pitch, const int* w, int k, int shift,
                     int n) {
#if CBI_OPENCV_AVX2
    if (has_avx2()) return int16_columns_u8_avx2(out, rows, pitch, w, k, shift, n);
#endif
    return 0;
}

int int32_columns_u8(std::uint8_t* out, const std::int16_t* rows, std::ptrdiff_t pitch, const int* w, int k, int shift,
                     int n) {
#if CBI_OPENCV_AVX2
    if (has_avx2()) return int32_columns_u8_avx2(out, rows, pitch, w, k, shift, n);
#endif
    return 0;
}

int sobel8_sum_abs_columns(std::uint8_t* out, const std::int16_t* rows_x, const int* wx, int kx,
                           const std::int16_t* rows_y, const int* wy, int ky, std::ptrdiff_t pitch, int n) {
#if CBI_OPENCV_AVX2
    if (has_avx2()) return sum_abs_columns_avx2(out, rows_x, wx, kx, rows_y, wy, ky, pitch, n);
#endif
    return 0;
}

int sobel8_magnitude_columns(std::uint8_t* out, const std::int16_t* rows_x, const int* wx, int kx,
                             const std::int16_t* rows_y, const int* wy, int ky, std::ptrdiff_t pitch, int n) {
#if CBI_OPENCV_AVX2
    if (has_avx2()) return magnitude_columns_avx2(out, rows_x, wx, kx, rows_y, wy, ky, pitch, n);
#endif
    return 0;
}

}  // namespace cbi::cpu
