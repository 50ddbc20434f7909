#pragma once
// OpenCV's universal intrinsics at AVX2 width, for a .cpp file that
// includes this header before anything else (cpu/color.cpp, cpu/gauss8.cpp).
//
// Outside OpenCV's own build its headers enable SSE2 only (the compatibility
// branch of cv_cpu_dispatch.h ignores __AVX2__), and the project compiles
// for baseline x86-64. So this header names the instruction sets itself,
// compiles the intrinsics (and only them) for AVX2 under a target pragma, in
// a namespace of its own (cbi_avx2); callers mark their functions CBI_AVX2
// and run them where __builtin_cpu_supports("avx2") says so. The macros
// must come before any OpenCV header, hence "include this first".
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)  // as CBI_CPU_CLONES
#ifdef CV_AVX2
#error "filters/cpu/opencv_avx2.hpp must be included before any OpenCV header"
#endif
#define CBI_OPENCV_AVX2 1
#define CV_SSE3 1
#define CV_SSSE3 1
#define CV_SSE4_1 1
#define CV_AVX 1
#define CV_AVX2 1  // no CV_FMA3: products and sums round separately
#define CV_CPU_OPTIMIZATION_HAL_NAMESPACE cbi_avx2
#define CV_CPU_OPTIMIZATION_HAL_NAMESPACE_BEGIN namespace cbi_avx2 {
#define CV_CPU_OPTIMIZATION_HAL_NAMESPACE_END }
#include <immintrin.h>

// Everything the intrinsics header includes, outside the pragma: inline
// functions from these must stay baseline code.
#include <opencv2/core/cvdef.h>
#include <algorithm>
#include <cmath>
#include <opencv2/core/utility.hpp>

#pragma GCC push_options
#pragma GCC target("avx2")  // implies SSE4.1 and AVX; not FMA
#include <opencv2/core/hal/intrin.hpp>
#pragma GCC pop_options

#define CBI_AVX2 [[gnu::target("avx2")]] inline

namespace cbi::cpu {
// Whether this CPU runs the CBI_AVX2 functions.
inline bool has_avx2() {
    static const bool avx2 = __builtin_cpu_supports("avx2");
    return avx2;
}
}  // namespace cbi::cpu
#endif
