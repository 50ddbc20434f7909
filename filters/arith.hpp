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

// v rounded up to a multiple of m (m > 0): tile sizes to whole runs,
// shared-memory offsets to 16 bytes.
template <class I>
CBI_HOST_DEVICE constexpr I round_up(I v, I m) {
    return (v + m - 1) / m * m;
}

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

// a * b + c rounded once (a fused multiply-add), on both backends: for
// ops that match an OpenCV path which fuses (convertTo's AVX2 loop:
// filters/kinds/scale.hpp). Host: std::fma, a call unless built with FMA.
CBI_HOST_DEVICE float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
    return __fmaf_rn(a, b, c);
#else
    return std::fma(a, b, c);
#endif
}

// Converts a computed value to the sample type T: integers are rounded to
// nearest (ties to even, as OpenCV's cvRound) and saturated; floats pass.
// NaN gives 0. On the GPU, clamping first and adding 2^23 rounds to nearest
// even in the float unit, whose low mantissa bits are then the result: the
// same value as rintf + compare, without the conversion instructions that
// run at an eighth of the float rate on sm_90.
// kNonNegative: v is known to be >= 0 and not NaN (a magnitude), which
// saves the GPU the lower clamp.
template <class T, bool kNonNegative = false>
CBI_HOST_DEVICE T saturate_round(float v) {
    if constexpr (std::is_same_v<T, float>) {
        return v;
    } else {
        constexpr float hi = static_cast<float>(T(~T(0)));
#if defined(__CUDA_ARCH__)
        const float clamped = fminf(kNonNegative ? v : fmaxf(v, 0.f), hi);  // fmaxf(NaN, 0) is 0
        return static_cast<T>(__float_as_uint(__fadd_rn(clamped, 8388608.f)) & 0xffffu);
#else
        const float r = std::nearbyint(v);
        return !(r > 0.f) ? T(0) : r >= hi ? T(~T(0)) : static_cast<T>(r);  // NaN -> 0
#endif
    }
}

// A sample as float, exactly. On the GPU an 8- or 16-bit integer goes
// through the exponent trick (2^23 + v as bits, minus 2^23): an integer OR
// and a float subtract instead of a conversion instruction.
template <class T>
CBI_HOST_DEVICE float to_float(T v) {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::uint16_t>)
        return __fsub_rn(__uint_as_float(0x4B000000u | v), 8388608.f);
#endif
    return static_cast<float>(v);
}

// A sample in the accumulator type of a stencil, exactly (to_float for float sums).
template <class Acc, class T>
CBI_HOST_DEVICE Acc to_acc(T v) {
    if constexpr (std::is_same_v<Acc, float>)
        return to_float(v);
    else
        return static_cast<Acc>(v);
}

// An integer of magnitude below 2^22 as float, exactly: on the GPU through
// the exponent trick (1.5 * 2^23 + v as bits, minus 1.5 * 2^23).
CBI_HOST_DEVICE float small_int_to_float(std::int32_t v) {
#if defined(__CUDA_ARCH__)
    return __fsub_rn(__int_as_float(0x4B400000 + v), 12582912.f);
#else
    return static_cast<float>(v);
#endif
}

// floor(x / d) as a multiply and a shift, for 1 <= d <= 2^16 and x < 256 d
// (the rounded mean of an 8-bit box: x = sum + d/2 <= 255 d + d/2). Exact:
// magic = floor(2^40 / d) + 1 exceeds 2^40 / d by e in (0, 1], so
// x * magic / 2^40 = x/d + x e / 2^40, and x e / 2^40 < 256 d / 2^40 <= 1/d,
// which never reaches the next integer above x/d. On the GPU this replaces
// a division of about a dozen instructions by three.
CBI_HOST_DEVICE constexpr std::uint64_t quotient_magic(std::uint32_t d) {
    return d == 0 ? 0 : (std::uint64_t{1} << 40) / d + 1;
}
CBI_HOST_DEVICE constexpr std::uint32_t quotient_by_magic(std::uint32_t x, std::uint64_t magic) {
    return static_cast<std::uint32_t>((static_cast<std::uint64_t>(x) * magic) >> 40);
}

}  // namespace cbi
