#pragma once
// Order statistics over a window of samples, for the window kinds (median):
// host and device code, no allocation, no recursion, no exceptions.
//
// - Samples are compared as unsigned keys (rank_key): 8- and 16-bit samples
//   as themselves, floats as their IEEE bits mapped to an order-preserving
//   uint32 (negative values flipped), so every depth selects with integer
//   min/max and the same code. The float order is the IEEE total order:
//   -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN (a NaN sample is a
//   value like any other, larger than +inf: see docs/filters.md#median).
// - Small windows (9 and 25 samples) go through a selection network in
//   registers (median_network), built at compile time by forgetful
//   selection and checked on every 0-1 input by the tests (0-1 principle).
// - Any window: radix selection (radix_select), digit by digit from the top,
//   counting the samples below each candidate digit. O(1) memory with 1-bit
//   digits (the GPU: no per-thread array), or one 256-bin histogram per
//   8-bit digit (the CPU: a 65025-sample window costs 1, 2 or 4 reads of
//   the window for 8u, 16u, 32f).
#include <cstdint>
#include <type_traits>
#include <utility>

#if !defined(__CUDA_ARCH__)
#include <bit>
#if defined(__SSE2__)
#include <emmintrin.h>
#define CBI_MEDIAN_LANES 1
#endif
#endif

#include "schedules/host_device.hpp"

// Unrolls the next loop (constant trip count) on both compilers, so arrays
// indexed by its counter stay in registers.
#if defined(__CUDACC__)
#define CBI_UNROLL _Pragma("unroll")
#else
#define CBI_UNROLL _Pragma("GCC unroll 32")
#endif

namespace cbi {

// The key of a sample: unsigned, ordered as the samples.
template <class T>
CBI_HOST_DEVICE std::uint32_t rank_key(T v) {
    if constexpr (std::is_same_v<T, float>) {
#if defined(__CUDA_ARCH__)
        const std::uint32_t u = __float_as_uint(v);
#else
        const std::uint32_t u = std::bit_cast<std::uint32_t>(v);
#endif
        return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    } else {
        return static_cast<std::uint32_t>(v);
    }
}

// The sample of a key (rank_key's inverse).
template <class T>
CBI_HOST_DEVICE T from_rank_key(std::uint32_t k) {
    if constexpr (std::is_same_v<T, float>) {
        const std::uint32_t u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
#if defined(__CUDA_ARCH__)
        return __uint_as_float(u);
#else
        return std::bit_cast<float>(u);
#endif
    } else {
        return static_cast<T>(k);
    }
}

// Significant bits of a key of T.
template <class T>
inline constexpr int kRankKeyBits = static_cast<int>(sizeof(T)) * 8;

CBI_HOST_DEVICE std::uint32_t key_min(std::uint32_t a, std::uint32_t b) {
    return a < b ? a : b;
}
CBI_HOST_DEVICE std::uint32_t key_max(std::uint32_t a, std::uint32_t b) {
    return a < b ? b : a;
}

// A comparator network that leaves the median of N (odd) values at
// `median`: comparator i puts the smaller of a[i], b[i] at a[i] and the
// larger at b[i].
template <int N>
struct MedianNetwork {
    static constexpr int kMaxComparators = N * N;
    int count = 0;
    int median = 0;
    int a[kMaxComparators] = {};
    int b[kMaxComparators] = {};
};

// Forgetful selection: keep m + 2 candidates (N = 2m + 1), move their
// minimum and maximum out (neither can be the median of the candidates and
// the values not yet read), take the next value in, repeat; the last of
// three is the median. Minimum and maximum come from pairs (about 3k/2
// comparators for k candidates): 20 comparators for 9 values, 132 for 25.
template <int N>
constexpr MedianNetwork<N> forgetful_median_network() {
    static_assert(N % 2 == 1 && N >= 3);
    MedianNetwork<N> net;
    int active[N] = {};
    int k = N / 2 + 2;
    for (int i = 0; i < k; ++i) active[i] = i;
    int next = k;
    auto cmp = [&](int lo, int hi) {
        net.a[net.count] = lo;
        net.b[net.count] = hi;
        ++net.count;
    };
    for (;;) {
        int lows[N] = {}, highs[N] = {};
        int nl = 0, nh = 0;
        for (int p = 0; p + 1 < k; p += 2) {
            cmp(active[p], active[p + 1]);
            lows[nl++] = active[p];
            highs[nh++] = active[p + 1];
        }
        for (int i = 1; i < nl; ++i) cmp(lows[0], lows[i]);
        for (int i = 1; i < nh; ++i) cmp(highs[i], highs[0]);
        int lo = lows[0], hi = highs[0];
        if (k % 2 == 1) {  // the odd one out: against both ends
            const int e = active[k - 1];
            cmp(lo, e);
            cmp(e, hi);
        }
        int kept[N] = {};
        int nk = 0;
        for (int i = 0; i < k; ++i)
            if (active[i] != lo && active[i] != hi) kept[nk++] = active[i];
        if (next == N) {  // k was 3: one left
            net.median = kept[0];
            return net;
        }
        for (int i = 0; i < nk; ++i) active[i] = kept[i];
        active[nk] = next++;
        k = nk + 1;
    }
}

template <int N>
inline constexpr MedianNetwork<N> kMedianNetwork = forgetful_median_network<N>();
template <int N, int I>
inline constexpr int kMedianNetworkA = kMedianNetwork<N>.a[I];
template <int N, int I>
inline constexpr int kMedianNetworkB = kMedianNetwork<N>.b[I];

// The comparators of kMedianNetwork<N> that come before its first reading
// input `shared` or later (it reads its inputs in index order): two windows
// whose first `shared` inputs are the same samples run these once, then
// each the rest on a copy (the GPU's median of two rows at once).
template <int N>
constexpr int median_network_prefix(int shared) {
    const auto& net = kMedianNetwork<N>;
    for (int i = 0; i < net.count; ++i)
        if (net.a[i] >= shared || net.b[i] >= shared) return i;
    return net.count;
}

template <int N, int I>
CBI_HOST_DEVICE void median_network_step(std::uint32_t* v) {
    constexpr int a = kMedianNetworkA<N, I>, b = kMedianNetworkB<N, I>;
    const std::uint32_t x = v[a], y = v[b];
    v[a] = key_min(x, y);
    v[b] = key_max(x, y);
}
template <int N, int... I>
CBI_HOST_DEVICE void apply_median_network(std::uint32_t* v, std::integer_sequence<int, I...>) {
    (median_network_step<N, I>(v), ...);
}

// The median of the N keys in v (v is reordered), through the network
// unrolled at compile time (every index a constant: v stays in registers).
template <int N>
CBI_HOST_DEVICE std::uint32_t median_of(std::uint32_t* v) {
    apply_median_network<N>(v, std::make_integer_sequence<int, kMedianNetwork<N>.count>{});
    return v[kMedianNetwork<N>.median];
}

#if defined(CBI_MEDIAN_LANES)
// The CPU's networks on eight 16-bit keys at once (one SSE2 register): a
// pixel's channels side by side, each lane its own median. Keys of 8- and
// 16-bit samples, biased by 0x8000 so that signed compares order them.
template <int N, int I>
inline void median_lanes_step(__m128i* v) {
    constexpr int a = kMedianNetworkA<N, I>, b = kMedianNetworkB<N, I>;
    const __m128i x = v[a], y = v[b];
    v[a] = _mm_min_epi16(x, y);
    v[b] = _mm_max_epi16(x, y);
}
template <int N, int... I>
inline void apply_median_lanes(__m128i* v, std::integer_sequence<int, I...>) {
    (median_lanes_step<N, I>(v), ...);
}
template <int N>
inline __m128i median_of_lanes(__m128i* v) {
    apply_median_lanes<N>(v, std::make_integer_sequence<int, kMedianNetwork<N>.count>{});
    return v[kMedianNetwork<N>.median];
}
#endif

// The key of rank `rank` (0: the smallest) among the keys `visit` passes to
// its callback (visit(fn) calls fn(key) once per sample; the same samples in
// every call), of which `bits` low bits may be set. Digits of kDigitBits
// bits from the top: a 1-bit digit counts the samples whose decided prefix
// matches and whose next bit is 0 (no array); wider digits count each
// value of the digit in a histogram (at most 65535 samples: 16-bit
// counts). `lo`..`hi` bound the keys (their common top bits are decided
// without a pass).
template <int kDigitBits, class Visit>
CBI_HOST_DEVICE std::uint32_t radix_select(Visit&& visit, int bits, int rank, std::uint32_t lo, std::uint32_t hi) {
    if (lo == hi) return lo;
    // Bits above the highest one where lo and hi differ are those of every key.
    int shift = bits;
    while (shift > 0 && (((lo ^ hi) >> (shift - 1)) & 1u) == 0) --shift;
    std::uint32_t prefix = shift >= 32 ? 0u : (lo >> shift) << shift;
    while (shift > 0) {
        if constexpr (kDigitBits == 1) {
            --shift;
            // Keys that match the prefix above `shift` and have a 0 there.
            int zeros = 0;
            visit([&](std::uint32_t k) { zeros += ((k ^ prefix) >> shift) == 0u; });
            if (rank >= zeros) {
                rank -= zeros;
                prefix |= 1u << shift;
            }
        } else {
            const int step = shift < kDigitBits ? shift : kDigitBits;
            const int top = shift;  // bits at and above `top` are decided
            shift -= step;
            const std::uint32_t mask = (1u << step) - 1u;
            std::uint16_t counts[1 << kDigitBits];
            for (int i = 0; i <= static_cast<int>(mask); ++i) counts[i] = 0;
            visit([&](std::uint32_t k) {
                if (top >= 32 || ((k ^ prefix) >> top) == 0u) ++counts[(k >> shift) & mask];
            });
            std::uint32_t digit = 0;
            while (rank >= counts[digit]) rank -= counts[digit++];
            prefix |= digit << shift;
        }
    }
    return prefix;
}

}  // namespace cbi
