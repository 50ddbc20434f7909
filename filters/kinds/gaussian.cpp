#include "filters/kinds/gaussian.hpp"

#include <climits>  // softfloat.hpp uses SHRT_MIN without including it

#include <opencv2/core/softfloat.hpp>

#include <array>

namespace cbi {
namespace {
// OpenCV's bit-exact Gaussian kernel (getGaussianKernelBitExact, OpenCV 4.x):
// the fixed tables for k <= 9 when sigma <= 0, otherwise exp(-x^2 / (2
// sigma^2)) normalised, all in cv::softdouble (software IEEE double, the
// same on every machine). cv::getGaussianKernel rounds these to the kernel
// type; GaussianBlur on 8-bit images takes them to 8 fractional bits.
// A fixed-size array: preparing a launch allocates nothing (tested).
using BitExactKernel = std::array<cv::softdouble, kMaxKernel>;
BitExactKernel compute_gaussian_bit_exact(int n, double sigma) {
    using cv::softdouble;
    static const double small_tables[5][9] = {
        {1.0},
        {0.25, 0.5, 0.25},
        {0.0625, 0.25, 0.375, 0.25, 0.0625},
        {0.03125, 0.109375, 0.21875, 0.28125, 0.21875, 0.109375, 0.03125},
        {4 / 256., 13 / 256., 30 / 256., 51 / 256., 60 / 256., 51 / 256., 30 / 256., 13 / 256., 4 / 256.}};
    BitExactKernel k{};
    if (sigma <= 0 && n % 2 == 1 && n <= 9) {
        for (int i = 0; i < n; ++i) k[i] = softdouble(small_tables[n >> 1][i]);
        return k;
    }
    // sigma from k: ((n - 1) * 0.5 - 1) * 0.3 + 0.8 = n * 0.15 + 0.35, in OpenCV's exact constants.
    const softdouble s = sigma > 0 ? softdouble(sigma)
                                   : cv::mulAdd(softdouble(n), softdouble::fromRaw(0x3fc3333333333333),
                                                softdouble::fromRaw(0x3fd6666666666666));
    const softdouble scale2 = softdouble::fromRaw(0xbfc0000000000000) / (s * s);  // -0.5 * 0.25 (x counts half steps)
    const int half = (n - 1) / 2;
    softdouble sum = softdouble::zero();
    for (int i = 0, x = 1 - n; i < half; ++i, x += 2) {
        k[i] = cv::exp(softdouble(x * x) * scale2);
        sum += k[i];
    }
    sum = sum * softdouble(2) + softdouble::one();
    const softdouble inverse = softdouble::one() / sum;
    for (int i = 0; i < half; ++i) k[n - 1 - i] = k[i] = k[i] * inverse;
    k[half] = inverse;
    return k;
}

// The kernel is asked for at every launch, and softdouble is slow (about
// 2.7 us at 31 taps, 22 us at 255): each thread keeps the last few it
// computed (no lock, no allocation). The reference stays valid until this
// thread's next call.
const BitExactKernel& gaussian_bit_exact(int n, double sigma) {
    struct Entry {
        int n = 0;
        double sigma = 0;
        BitExactKernel k{};
    };
    thread_local std::array<Entry, 4> recent{};
    thread_local int next = 0;
    for (const Entry& e : recent)
        if (e.n == n && e.sigma == sigma) return e.k;
    Entry& e = recent[next];
    next = (next + 1) % static_cast<int>(recent.size());
    e.n = n, e.sigma = sigma, e.k = compute_gaussian_bit_exact(n, sigma);
    return e.k;
}
}  // namespace

GaussianKernel1D gaussian_weights(int n, double sigma) {
    const BitExactKernel& exact = gaussian_bit_exact(n, sigma);
    GaussianKernel1D k{n, {}};
    for (int i = 0; i < n; ++i) k.w[i] = static_cast<double>(exact[i]);
    return k;
}

GaussianFixedKernel gaussian_fixed_weights(int n, double sigma) {
    // OpenCV's getGaussianKernelFixedPoint_ED: round each outer weight to
    // 1/256 carrying the rounding error to the next (error diffusion); the
    // centre takes what is left, so the weights sum to exactly 256.
    using cv::softdouble;
    const BitExactKernel& exact = gaussian_bit_exact(n, sigma);
    GaussianFixedKernel k{n, {}};
    const softdouble one(256.0);
    softdouble error = softdouble::zero();
    int sum = 0;
    for (int i = 0; i < n / 2; ++i) {
        const softdouble v = exact[i] * one + error;
        const int rounded = cvRound(v);
        error = v - softdouble(rounded);
        k.w[i] = k.w[n - 1 - i] = static_cast<std::uint16_t>(rounded);
        sum += 2 * rounded;
    }
    k.w[n / 2] = static_cast<std::uint16_t>(256 - sum);
    return k;
}

}  // namespace cbi
