#pragma once
// Arithmetic shared by the CPU and CUDA backends. Products and sums are
// rounded separately (never fused into an FMA) on both sides, so the two
// backends produce bit-identical integer outputs; the host side is built
// with -ffp-contract=off for the same reason.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "schedules/host_device.hpp"

namespace cbi {

CBI_HOST_DEVICE float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
CBI_HOST_DEVICE float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

// Converts a computed value to the sample type T: integers are rounded to
// nearest (ties to even, as OpenCV's cvRound) and saturated; floats pass.
template <class T>
CBI_HOST_DEVICE T saturate_round(float v) {
    if constexpr (std::is_same_v<T, float>) {
        return v;
    } else {
        constexpr float hi = static_cast<float>(T(~T(0)));
#if defined(__CUDA_ARCH__)
        const float r = rintf(v);
#else
        const float r = std::nearbyint(v);
#endif
        return !(r > 0.f) ? T(0) : r >= hi ? T(~T(0)) : static_cast<T>(r);  // NaN -> 0
    }
}

template <class T>
CBI_HOST_DEVICE T saturate_int(std::int64_t v) {
    constexpr std::int64_t hi = static_cast<std::int64_t>(T(~T(0)));
    return static_cast<T>(v < 0 ? 0 : v > hi ? hi : v);
}

}  // namespace cbi
