#pragma once
// Host-only row helpers for the kinds' CPU row forms (filter2d)
// and the clone macros the CPU backend's hot loops use. Kind headers
// include this, so it is seen by nvcc too: nothing here is callable from
// device code.
#include <cstddef>
#include <type_traits>

#include "filters/arith.hpp"

namespace cbi::cpu {

// The hot loops are compiled twice, for AVX2 and for the baseline x86-64
// (SSE2), and the loader picks one per machine (GCC function multi-
// versioning). AVX2 doubles the vector width and lets std::nearbyint in
// saturate_round become one instruction instead of a libm call. No FMA:
// the "avx2" target does not enable it, and the build passes
// -ffp-contract=off, so products and sums still round separately.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__CUDACC__)
#define CBI_CPU_CLONES [[gnu::target_clones("avx2", "default")]]
#define CBI_CPU_INLINE [[gnu::always_inline]] inline
#else
#define CBI_CPU_CLONES
#define CBI_CPU_INLINE inline
#endif

// pad[xi * C + c] = src's sample (xs + xi, c) of row `row` (src.row(y)) as
// P, xi < len: border samples through src.at at the ends only, the
// interior one contiguous conversion.
template <class P, class Src, class T>
CBI_CPU_CLONES void load_padded_row(const Src& src, const T* row, int xs, int len, P* __restrict pad) {
    const int C = src.view.channels, width = src.view.width;
    const int lo = row == nullptr ? len : (xs < 0 ? (-xs < len ? -xs : len) : 0);
    int hi = row == nullptr ? len : width - xs;
    hi = hi < lo ? lo : hi > len ? len : hi;
    for (int xi = 0; xi < lo; ++xi)
        for (int c = 0; c < C; ++c) pad[xi * C + c] = static_cast<P>(src.at(row, xs + xi, c));
    if (hi > lo) {
        const T* __restrict in = row + static_cast<std::ptrdiff_t>(xs + lo) * C;
        P* __restrict interior = pad + lo * C;
        for (int i = 0; i < (hi - lo) * C; ++i) interior[i] = static_cast<P>(in[i]);
    }
    for (int xi = hi; xi < len; ++xi)
        for (int c = 0; c < C; ++c) pad[xi * C + c] = static_cast<P>(src.at(row, xs + xi, c));
}

// Eight floats as one value (GCC's vector extension): one AVX2 register in
// the avx2 clone, two SSE registers in the default one. Blocks of sums are
// written with it because GCC unrolled the tap loop of the plain-array form
// and left it scalar.
using Float8 = float __attribute__((vector_size(32)));

using Int8 = int __attribute__((vector_size(32)));

// out[i] = saturate_round<T>(s[i]) for i < kCount (a multiple of 8), in a
// form that vectorises (std::nearbyint and its compare chain became masks
// and permutes; written on scalars, GCC turned the clamps into branches):
// clamped to [0, max] (NaN to 0), rounded to nearest even by adding and
// subtracting 1.5 * 2^23 (exact for the clamped values), narrowed. The same
// value for every float; float passes.
template <int kCount, class T>
CBI_CPU_INLINE void round_block(const float* __restrict s, T* __restrict out) {
    if constexpr (std::is_same_v<T, float>) {
        __builtin_memcpy(out, s, kCount * sizeof(float));
    } else {
        constexpr float hi = static_cast<float>(T(~T(0))), magic = 12582912.f;
        int q[kCount];
        for (int b = 0; b < kCount / 8; ++b) {
            Float8 v;
            __builtin_memcpy(&v, s + 8 * b, sizeof v);
            v = v > 0.f ? v : 0.f;  // NaN fails the compare: 0
            v = v < hi ? v : hi;
            const Int8 r = __builtin_convertvector((v + magic) - magic, Int8);
            __builtin_memcpy(q + 8 * b, &r, sizeof r);
        }
        for (int i = 0; i < kCount; ++i) out[i] = static_cast<T>(q[i]);
    }
}

// out[i] = saturate_round<T>(sum over t < taps of w[t] * in[off[t] + i])
// for i < n, each sum from 0 in tap order with products and sums rounded
// separately: a per-pixel loop's value bit for bit. 8 * kVectors outputs
// stay in registers across all taps.
template <int kVectors, class T>
CBI_CPU_INLINE void offset_taps_block(T* __restrict out, const float* __restrict in, const float* __restrict w,
                                      const int* __restrict off, int taps, int i0) {
    Float8 a[kVectors];
    for (int v = 0; v < kVectors; ++v) a[v] = Float8{};
    for (int t = 0; t < taps; ++t) {
        const float wt = w[t];
        const float* tap = in + off[t] + i0;
        for (int v = 0; v < kVectors; ++v) {
            Float8 x;
            __builtin_memcpy(&x, tap + 8 * v, sizeof x);
            a[v] = a[v] + wt * x;
        }
    }
    float sums[8 * kVectors];
    __builtin_memcpy(sums, a, sizeof sums);
    round_block<8 * kVectors>(sums, out + i0);
}

template <class T>
CBI_CPU_CLONES void offset_taps_row(T* __restrict out, const float* __restrict in, const float* __restrict w,
                                    const int* __restrict off, int taps, int n) {
    int i0 = 0;
    for (; i0 + 64 <= n; i0 += 64) offset_taps_block<8>(out, in, w, off, taps, i0);
    for (; i0 + 8 <= n; i0 += 8) offset_taps_block<1>(out, in, w, off, taps, i0);
    for (; i0 < n; ++i0) {
        float a = 0.f;
        for (int t = 0; t < taps; ++t) a = a + w[t] * in[off[t] + i0];
        out[i0] = saturate_round<T>(a);
    }
}

}  // namespace cbi::cpu
