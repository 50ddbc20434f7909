#pragma once
// What the derivative kinds (sobel, scharr, laplacian) share: integer
// separable kernels in OpenCV's layout and the conversion of their sums.
#include <cstdint>
#include <type_traits>

#include "filters/arith.hpp"
#include "schedules/host_device.hpp"

namespace cbi {

// Separable integer kernels in OpenCV's layout (cv::getDerivKernels): a
// first derivative uses deriv across x and smooth down y (gx), or the
// transpose (gy); the Laplacian's hold a second derivative in deriv.
struct SobelKernels {
    int deriv[7];   // derivative kernel (length max(ksize, 3))
    int smooth[7];  // smoothing kernel (length ksize)
    int deriv_size;
    int smooth_size;
};

// cv::getSobelKernels(order, 0, ksize): the derivative kernel of `order`
// (KSIZE 1 widens a derivative to 3) and the smoothing kernel of ksize.
SobelKernels derivative_kernels(int order, int ksize);

// The KSIZEs of OpenCV's Sobel kernels (Sobel and Laplacian).
constexpr bool is_sobel_ksize(int k) {
    return k == 1 || k == 3 || k == 5 || k == 7;
}

// The derivative ops' sums (integer kernels: exact integers for integer
// samples) as float, as cv::Sobel/cv::Laplacian to CV_32F give them.
template <class T, class Acc>
CBI_HOST_DEVICE float derivative_to_float(Acc g) {
    // 8-bit sums stay below 2^22 (255 * 20 * 64 for Sobel KSIZE 7): the cheap exact conversion.
    if constexpr (std::is_same_v<T, std::uint8_t>)
        return small_int_to_float(g);
    else
        return static_cast<float>(g);
}

// sqrt(v) for a gradient magnitude converted to T. 8-bit on the device:
// sqrt.approx (one instruction instead of the correctly rounded sequence),
// with the same result after rounding: v is then a sum of squares of
// integers, an integer n exact in float below 2^24, and sqrt(n) lies at
// least 0.25 / 512 from every half-integer below 256 ((k + 1/2)^2 =
// k^2 + k + 1/4 is no integer), far beyond sqrt.approx's error (about
// 2^-22 relative); from n = 65281 on both give 255.5 or more and saturate.
// Checked for every 3x3 gradient pair up to 300 (test_filters_cuda).
template <class T>
CBI_HOST_DEVICE float magnitude_sqrt(float v) {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<T, std::uint8_t>) {
        float r;
        asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));  // v is 0 or at least 1: no subnormals
        return r;
    }
#endif
    return sqrtf(v);
}

// gx^2 + gy^2 for a gradient magnitude converted to T. 8-bit on the device:
// one fused multiply-add, with the same result after saturation: for
// integer gradients whose squares sum below 2^24 every product and sum is
// exact either way, and from 2^24 on both give at least 2^23, far past
// 65281, where the magnitude saturates at 255.
template <class T>
CBI_HOST_DEVICE float sum_of_squares(float gx, float gy) {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<T, std::uint8_t>) return __fmaf_rn(gx, gx, __fmul_rn(gy, gy));
#endif
    return add_rn(mul_rn(gx, gx), mul_rn(gy, gy));
}

}  // namespace cbi
