#pragma once
// Words of samples folded lane by lane, for the kernels that compute a
// 4-byte word of a row at once (cuda/morph.cuh, cuda/median.cuh): four 8-bit
// or two 16-bit unsigned lanes through the SIMD minimum and maximum, a
// 32-bit word (a float's rank key) as one unsigned lane.
#include <cstdint>

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
