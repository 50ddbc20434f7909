#pragma once
// The two passes of the CPU 8-bit Gaussian (GaussianOp<uint8_t>, OpenCV's
// fixed point) with OpenCV's universal intrinsics at AVX2 width, as
// OpenCV's GaussianBlurFixedPoint does them (cpu/gauss8.cpp). Each returns
// how many leading outputs it wrote (a multiple of the vector width, 0
// where the CPU lacks AVX2); TileWorker does the rest with its generic
// loops, which give the same values.
#include <cstddef>
#include <cstdint>

namespace cbi::cpu {

// Row pass: out[i] = sum over t < k of w[t] * in[i + t * tap_stride], i < n,
// in uint16 lanes (exact: weights sum to 256 and in[] <= 255, so every
// partial sum is <= 65280).
int gauss8_row_sums(std::uint16_t* out, const std::uint16_t* in, std::ptrdiff_t tap_stride, const std::uint16_t* w,
                    int k, int n);

// Column pass and finish: out[i] = (sum over j < k of w[j] * rows[i + j * pitch] + 32768) >> 16, i < n,
// each product uint16 x uint16 -> uint32, the sums in uint32 (< 2^24).
int gauss8_columns(std::uint8_t* out, const std::uint16_t* rows, std::ptrdiff_t pitch, const std::uint16_t* w, int k,
                   int n);

}  // namespace cbi::cpu
