#include "filters/cpu/lut8.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define CBI_LUT8_VBMI 1
#endif

namespace cbi::cpu {
namespace {

#if CBI_LUT8_VBMI
// 64 samples per step: the table in four registers, one byte permute over
// each half (128 entries, bit 6 picks the register) and bit 7 picks the
// half. A scalar lookup is bound by one load per sample.
#define CBI_VBMI [[gnu::target("avx512f,avx512bw,avx512vbmi")]] inline
CBI_VBMI __m512i lookup(const __m512i* t, __m512i idx) {
    const __m512i lo = _mm512_permutex2var_epi8(t[0], idx, t[1]), hi = _mm512_permutex2var_epi8(t[2], idx, t[3]);
    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi);
}

CBI_VBMI void lut8_vbmi(const std::uint8_t* table, const std::uint8_t* in, std::uint8_t* out, int n) {
    __m512i t[4];
    for (int k = 0; k < 4; ++k) t[k] = _mm512_loadu_si512(table + 64 * k);
    int i = 0;
    for (; i + 64 <= n; i += 64) _mm512_storeu_si512(out + i, lookup(t, _mm512_loadu_si512(in + i)));
    if (i < n) {
        const __mmask64 m = _cvtu64_mask64(~0ull >> (64 - (n - i)));
        _mm512_mask_storeu_epi8(out + i, m, lookup(t, _mm512_maskz_loadu_epi8(m, in + i)));
    }
}

bool has_vbmi() {
    static const bool vbmi = __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bw");
    return vbmi;
}
#endif

}  // namespace

void lut8_row(const std::uint8_t* table, const std::uint8_t* in, std::uint8_t* out, int n) {
#if CBI_LUT8_VBMI
    if (has_vbmi()) return lut8_vbmi(table, in, out, n);
#endif
    for (int i = 0; i < n; ++i) out[i] = table[in[i]];
}

}  // namespace cbi::cpu
