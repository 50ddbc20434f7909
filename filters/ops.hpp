#pragma once
// The arithmetic of each filter for one output pixel, written once and run
// by both backends: the CPU backend calls op(x, y) for every index of the
// node's schedule, the CUDA kernel does the same per thread. Ops hold views
// and parameters by value so they can be passed to a kernel.
//
// Supported by every op: sample types std::uint8_t, std::uint16_t, float;
// 1, 3 or 4 interleaved channels (stencils process all of them, as OpenCV
// does); every BorderMode. Kernel sizes are bounded by kMaxKernel.
#include <cstdint>
#include <type_traits>

#include "filters/arith.hpp"
#include "filters/border.hpp"
#include "pipeline/image.hpp"

namespace cbi {

inline constexpr int kMaxKernel = 255;  // largest box/Gaussian K; keeps an op's weights in kernel parameters
inline constexpr int kMaxChannels = 4;

// Reads one sample through the border rule B; `constant` for outside pixels
// under BorderMode::constant.
template <class T, BorderMode B>
struct BorderedSource {
    ImageView view;
    T constant;

    // Row pointer for image row y + dy (border-resolved), or nullptr when
    // that row lies in a constant border.
    CBI_HOST_DEVICE const T* row(int y) const {
        const int yy = border_index<B>(y, view.height);
        return yy < 0 ? nullptr : view.row<const T>(yy);
    }
    CBI_HOST_DEVICE T at(const T* row, int x, int c) const {
        const int xx = border_index<B>(x, view.width);
        return row == nullptr || xx < 0 ? constant : row[xx * view.channels + c];
    }
};

// A separable k_w x k_h weighted sum sum_j wy[j] * sum_i wx[i] * src(x+i-rx, y+j-ry),
// evaluated in Acc arithmetic with products and sums in a fixed order.
template <class Acc, class T, BorderMode B, class W>
CBI_HOST_DEVICE Acc separable_sum(const BorderedSource<T, B>& src, int x, int y, int c, const W* wx, int kw,
                                  const W* wy, int kh) {
    Acc acc = 0;
    for (int j = 0; j < kh; ++j) {
        const T* row = src.row(y + j - kh / 2);
        Acc row_sum = 0;
        for (int i = 0; i < kw; ++i) {
            const Acc v = static_cast<Acc>(src.at(row, x + i - kw / 2, c));
            if constexpr (std::is_same_v<Acc, float>)
                row_sum = add_rn(row_sum, mul_rn(static_cast<float>(wx[i]), v));
            else
                row_sum += static_cast<Acc>(wx[i]) * v;
        }
        if constexpr (std::is_same_v<Acc, float>)
            acc = add_rn(acc, mul_rn(static_cast<float>(wy[j]), row_sum));
        else
            acc += static_cast<Acc>(wy[j]) * row_sum;
    }
    return acc;
}

// cv::blur: mean over a k x k window. Integer sums are exact; the mean is
// rounded once. Float sums in double, as OpenCV does.
template <class T, BorderMode B>
struct BoxOp {
    BorderedSource<T, B> src;
    ImageView dst;
    int ksize;

    using Acc = std::conditional_t<std::is_same_v<T, float>, double,
                                   std::conditional_t<std::is_same_v<T, std::uint8_t>, std::uint32_t, std::uint64_t>>;

    CBI_HOST_DEVICE void operator()(int x, int y) const {
        const int r = ksize / 2;
        const Acc n = static_cast<Acc>(ksize) * static_cast<Acc>(ksize);
        T* out = dst.row<T>(y) + x * dst.channels;
        for (int c = 0; c < src.view.channels; ++c) {
            Acc sum = 0;
            for (int j = -r; j <= r; ++j) {
                const T* row = src.row(y + j);
                for (int i = -r; i <= r; ++i) sum += static_cast<Acc>(src.at(row, x + i, c));
            }
            if constexpr (std::is_same_v<T, float>)
                out[c] = static_cast<float>(sum / n);
            else
                out[c] = static_cast<T>((sum + n / 2) / n);  // n is odd: no ties
        }
    }
};

// cv::GaussianBlur: separable weights (see gaussian_weights), float arithmetic.
template <class T, BorderMode B>
struct GaussianOp {
    BorderedSource<T, B> src;
    ImageView dst;
    int ksize;
    float weights[kMaxKernel];

    CBI_HOST_DEVICE void operator()(int x, int y) const {
        T* out = dst.row<T>(y) + x * dst.channels;
        for (int c = 0; c < src.view.channels; ++c)
            out[c] = saturate_round<T>(separable_sum<float>(src, x, y, c, weights, ksize, weights, ksize));
    }
};

enum class SobelMode : std::uint8_t { x, y, mag };

// Separable integer Sobel kernels in OpenCV's layout (cv::getDerivKernels).
// gx uses deriv across x and smooth down y; gy the transpose.
struct SobelKernels {
    int deriv[7];        // derivative kernel (length max(ksize, 3))
    int smooth[7];       // smoothing kernel (length ksize)
    int deriv_size;
    int smooth_size;
};

// cv::Sobel to CV_32F, then |gx|, |gy| or sqrt(gx^2 + gy^2), converted to
// the sample type. Integer inputs give exact integer gradients.
template <class T, BorderMode B>
struct SobelOp {
    BorderedSource<T, B> src;
    ImageView dst;
    SobelMode mode;
    SobelKernels k;

    using Acc = std::conditional_t<std::is_same_v<T, float>, float, std::int32_t>;

    CBI_HOST_DEVICE void operator()(int x, int y) const {
        T* out = dst.row<T>(y) + x * dst.channels;
        for (int c = 0; c < src.view.channels; ++c) {
            float gx = 0.f, gy = 0.f;
            if (mode != SobelMode::y)
                gx = static_cast<float>(separable_sum<Acc>(src, x, y, c, k.deriv, k.deriv_size, k.smooth, k.smooth_size));
            if (mode != SobelMode::x)
                gy = static_cast<float>(separable_sum<Acc>(src, x, y, c, k.smooth, k.smooth_size, k.deriv, k.deriv_size));
            float v;
            if (mode == SobelMode::x)
                v = gx < 0.f ? -gx : gx;
            else if (mode == SobelMode::y)
                v = gy < 0.f ? -gy : gy;
            else
                v = sqrtf(add_rn(mul_rn(gx, gx), mul_rn(gy, gy)));
            out[c] = saturate_round<T>(v);
        }
    }
};

// A 3x4 matrix in storage order: row r gives output channel r, columns
// weigh input channels 0, 1, 2 (B, G, R for OpenCV images) plus an offset.
struct StorageMatrix {
    float m[3][4];
    int rows;  // 3, or 1 for a gray result
};

// Matrix colour transform per pixel; alpha (channel 3) is copied unchanged
// when both images have it.
template <class T>
struct ColorOp {
    ImageView src;
    ImageView dst;
    StorageMatrix matrix;

    CBI_HOST_DEVICE void operator()(int x, int y) const {
        const T* in = src.row<const T>(y) + x * src.channels;
        T* out = dst.row<T>(y) + x * dst.channels;
        const float c0 = static_cast<float>(in[0]), c1 = static_cast<float>(in[1]), c2 = static_cast<float>(in[2]);
        for (int r = 0; r < matrix.rows; ++r) {
            const float* m = matrix.m[r];
            const float v = add_rn(add_rn(add_rn(mul_rn(m[0], c0), mul_rn(m[1], c1)), mul_rn(m[2], c2)), m[3]);
            out[r] = saturate_round<T>(v);
        }
        if (dst.channels == 4) out[3] = in[3];
    }
};

// cv::addWeighted: alpha*A + beta*B + gamma per sample, float arithmetic.
template <class T>
struct BlendOp {
    ImageView a;
    ImageView b;
    ImageView dst;
    float alpha, beta, gamma;

    CBI_HOST_DEVICE void operator()(int x, int y) const {
        const T* pa = a.row<const T>(y) + x * a.channels;
        const T* pb = b.row<const T>(y) + x * b.channels;
        T* out = dst.row<T>(y) + x * dst.channels;
        for (int c = 0; c < dst.channels; ++c)
            out[c] = saturate_round<T>(add_rn(add_rn(mul_rn(alpha, static_cast<float>(pa[c])),
                                                     mul_rn(beta, static_cast<float>(pb[c]))),
                                              gamma));
    }
};

}  // namespace cbi
