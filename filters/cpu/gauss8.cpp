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

// 32 outputs per step, two taps an instruction: vpmaddwd multiplies the
// interleaved samples of rows j and j + 1 by the pair (w[j], w[j + 1]) and
// adds both products in 32 bits. It multiplies signed 16-bit lanes: the
// samples (<= 65280) go in less 32768 (an xor of the top bit) and the sums
// get 32768 * sum(w) back with the rounding's 32768; the weights (<= 256)
// fit as they are. The unpacks are in-lane, so the sums sit in each
// 128-bit half's unpack order and _mm256_packus_epi32 (also in-lane) puts
// them back in order; the one lane permute is the final pack to bytes.
CBI_AVX2 int columns_avx2(std::uint8_t* out, const std::uint16_t* rows, std::ptrdiff_t pitch, const std::uint16_t* w,
                          int k, int n) {
    constexpr int L = v_uint16x16::nlanes;  // 16
    std::uint32_t weight_sum = 0;
    for (int j = 0; j < k; ++j) weight_sum += w[j];
    const __m256i top = _mm256_set1_epi16(static_cast<short>(0x8000));
    const __m256i back = _mm256_set1_epi32(static_cast<int>(32768u * (weight_sum + 1)));
    int i = 0;
    for (; i + 2 * L <= n; i += 2 * L) {
        __m256i s[4];
        for (int b = 0; b < 4; ++b) s[b] = _mm256_setzero_si256();
        for (int j = 0; j < k; j += 2) {
            const bool pair = j + 1 < k;  // an odd k's last tap pairs with a zero weight
            const __m256i wp = _mm256_set1_epi32(static_cast<int>(w[j] | (pair ? std::uint32_t{w[j + 1]} << 16 : 0)));
            const std::uint16_t* ra = rows + j * pitch + i;
            const std::uint16_t* rb = pair ? ra + pitch : ra;
            for (int h = 0; h < 2; ++h) {
                const __m256i a =
                    _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ra + h * L)), top);
                const __m256i b =
                    _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rb + h * L)), top);
                s[2 * h] = _mm256_add_epi32(s[2 * h], _mm256_madd_epi16(_mm256_unpacklo_epi16(a, b), wp));
                s[2 * h + 1] = _mm256_add_epi32(s[2 * h + 1], _mm256_madd_epi16(_mm256_unpackhi_epi16(a, b), wp));
            }
        }
        v_uint16x16 o[2];
        for (int h = 0; h < 2; ++h)
            o[h] = v_uint16x16(_mm256_packus_epi32(_mm256_srli_epi32(_mm256_add_epi32(s[2 * h], back), 16),
                                                   _mm256_srli_epi32(_mm256_add_epi32(s[2 * h + 1], back), 16)));
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
