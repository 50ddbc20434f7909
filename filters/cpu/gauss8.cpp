// The 8-bit Gaussian's passes with OpenCV's universal intrinsics (see
// cpu/gauss8.hpp); filters/cpu/opencv_avx2.hpp (included first) sets them up.
#include "filters/cpu/opencv_avx2.hpp"

#include "filters/cpu/gauss8.hpp"

namespace cbi::cpu {
namespace {

#if CBI_OPENCV_AVX2
using namespace cv;

// 64 outputs per step: 4 vectors of uint16 sums, kept in registers across the k taps.
CBI_AVX2 int row_sums_avx2(std::uint16_t* out, const std::uint16_t* in, std::ptrdiff_t tap_stride,
                           const std::uint16_t* w, int k, int n) {
    constexpr int L = v_uint16x16::nlanes, B = 4;
    int i = 0;
    for (; i + B * L <= n; i += B * L) {
        v_uint16x16 s[B];
        for (int b = 0; b < B; ++b) s[b] = v256_setzero_u16();
        for (int t = 0; t < k; ++t) {
            const v_uint16x16 wt = v256_setall_u16(w[t]);
            const std::uint16_t* tap = in + t * tap_stride + i;
            for (int b = 0; b < B; ++b) s[b] = s[b] + v_mul_wrap(wt, v256_load(tap + b * L));
        }
        for (int b = 0; b < B; ++b) v_store(out + i + b * L, s[b]);
    }
    return i;
}

// 32 outputs per step. Each product widens to 32 bits as v_mul_expand's,
// but with the in-lane unpacks only (v256_unpacklo/hi of the low and high
// halves of the products): the sums sit in each 128-bit half's unpack
// order, and _mm256_packus_epi32 (also in-lane) puts them back in order,
// so no lane permutes but the one in the final pack to bytes (v_pack).
CBI_AVX2 int columns_avx2(std::uint8_t* out, const std::uint16_t* rows, std::ptrdiff_t pitch, const std::uint16_t* w,
                          int k, int n) {
    constexpr int L = v_uint16x16::nlanes;  // 16
    int i = 0;
    for (; i + 2 * L <= n; i += 2 * L) {
        v_uint32x8 s[4];
        for (int b = 0; b < 4; ++b) s[b] = v256_setzero_u32();
        for (int j = 0; j < k; ++j) {
            const v_uint16x16 wj = v256_setall_u16(w[j]);
            const std::uint16_t* row = rows + j * pitch + i;
            for (int h = 0; h < 2; ++h) {
                const v_uint16x16 r = v256_load(row + h * L);
                const v_uint16x16 lo = v_mul_wrap(wj, r), hi = v_mul_hi(wj, r);
                s[2 * h] = s[2 * h] + v_reinterpret_as_u32(v256_unpacklo(lo, hi));
                s[2 * h + 1] = s[2 * h + 1] + v_reinterpret_as_u32(v256_unpackhi(lo, hi));
            }
        }
        const v_uint32x8 half = v256_setall_u32(1u << 15);
        v_uint16x16 o[2];
        for (int h = 0; h < 2; ++h)
            o[h] = v_uint16x16(_mm256_packus_epi32(((s[2 * h] + half) >> 16).val, ((s[2 * h + 1] + half) >> 16).val));
        v_store(out + i, v_pack(o[0], o[1]));  // <= 255 each: the pack keeps them
    }
    return i;
}
#endif

}  // namespace

int gauss8_row_sums(std::uint16_t* out, const std::uint16_t* in, std::ptrdiff_t tap_stride, const std::uint16_t* w,
                    int k, int n) {
#if CBI_OPENCV_AVX2
    if (has_avx2()) return row_sums_avx2(out, in, tap_stride, w, k, n);
#endif
    return 0;
}

int gauss8_columns(std::uint8_t* out, const std::uint16_t* rows, std::ptrdiff_t pitch, const std::uint16_t* w, int k,
                   int n) {
#if CBI_OPENCV_AVX2
    if (has_avx2()) return columns_avx2(out, rows, pitch, w, k, n);
#endif
    return 0;
}

}  // namespace cbi::cpu
