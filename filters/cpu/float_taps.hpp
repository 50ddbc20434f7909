#pragma once
// The float separable stencils' tap sums (GaussianOp and SobelOp on float
// sums: 32f, 16u, 16s images) at AVX2 width with OpenCV's universal
// intrinsics (cpu/float_taps.cpp). The compiler's own vectorisation of
// weighted_taps keeps the sums in registers across the taps but zero-fills
// and copies a stack array around every block; these do not.
#include <cstddef>

namespace cbi::cpu {

// acc[i] = sum over t < k of w[t] * in[i + t * tap_stride], i < n, as
// weighted_taps forms it: a sum starts at 0 and adds the taps in order
// t = 0..k-1, each product and each sum rounded separately (no FMA), so the
// values are bit-identical to the per-pixel path. Returns how many leading
// outputs it wrote (a multiple of 8, 0 where the CPU lacks AVX2); the
// caller's generic loop does the rest.
int float_taps(float* acc, const float* in, std::ptrdiff_t tap_stride, const float* w, int k, int n);

}  // namespace cbi::cpu
