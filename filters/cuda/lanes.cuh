#pragma once
// Words of samples folded lane by lane, for the kernels that compute a
// 4-byte word of a row at once (cuda/morph.cuh, cuda/median.cuh): four 8-bit
// or two 16-bit unsigned lanes through the SIMD minimum and maximum, a
// 32-bit word (a float's rank key) as one unsigned lane.
#include <cstdint>
#include <type_traits>

#include "schedules/host_device.hpp"

namespace cbi::cuda {

template <class T, bool kMin>
__device__ __forceinline__ std::uint32_t lanes_fold(std::uint32_t a, std::uint32_t b) {
    if constexpr (sizeof(T) == 1)
        return kMin ? __vminu4(a, b) : __vmaxu4(a, b);
    else if constexpr (sizeof(T) == 2)
        return kMin ? __vminu2(a, b) : __vmaxu2(a, b);
    else
        return kMin ? min(a, b) : max(a, b);
}

// Four 8-bit lanes widened to two words of 16-bit lanes (bytes 0 and 2,
// bytes 1 and 3): their minimum and maximum are one instruction each on
// sm_90, where __vminu4 and __vmaxu4 are sequences of several. Kernels that
// fold a word many times widen it once and narrow their result.
struct Wide8 {
    std::uint32_t even, odd;
};

__device__ __forceinline__ Wide8 widen8(std::uint32_t w) {
    return {__byte_perm(w, 0, 0x4240), __byte_perm(w, 0, 0x4341)};
}
__device__ __forceinline__ std::uint32_t narrow8(Wide8 w) {
    return __byte_perm(w.even, w.odd, 0x6240);
}

// What a kernel folds a loaded word of T samples as: 8-bit words widened.
template <class T, class P>
using Held = std::conditional_t<sizeof(T) == 1 && std::is_same_v<P, std::uint32_t>, Wide8, P>;

template <class V, class P>
__device__ __forceinline__ V held(P w) {
    if constexpr (std::is_same_v<V, Wide8>)
        return widen8(w);
    else
        return w;
}
template <class P, class V>
__device__ __forceinline__ P stored(V v) {
    if constexpr (std::is_same_v<V, Wide8>)
        return narrow8(v);
    else
        return v;
}

template <bool kMin>
__device__ __forceinline__ Wide8 wide_fold(Wide8 a, Wide8 b) {
    return {lanes_fold<std::uint16_t, kMin>(a.even, b.even), lanes_fold<std::uint16_t, kMin>(a.odd, b.odd)};
}

// A sample repeated over a word of samples (P = T: the sample itself).
template <class P, class T>
CBI_HOST_DEVICE P splat(T v) {
    if constexpr (sizeof(P) == sizeof(T)) {
        return static_cast<P>(v);
    } else {
        P p = 0;
        for (unsigned i = 0; i < sizeof(P) / sizeof(T); ++i) p |= static_cast<P>(v) << (8 * sizeof(T) * i);
        return p;
    }
}

}  // namespace cbi::cuda
