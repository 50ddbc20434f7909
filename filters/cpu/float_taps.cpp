// The float tap sums with OpenCV's universal intrinsics (see
// cpu/float_taps.hpp); filters/cpu/opencv_avx2.hpp (included first) sets them up.
#include "filters/cpu/opencv_avx2.hpp"

#include "filters/cpu/float_taps.hpp"

namespace cbi::cpu {
namespace {

#if CBI_OPENCV_AVX2
using namespace cv;

// B vectors of sums, in registers across all k taps. The add's latency (3-4
// cycles) over its throughput (2 a cycle) needs about 8 independent sums to
// keep both adders busy; 8 sums, a broadcast weight and a product fit the
// 16 AVX2 registers.
template <int B>
CBI_AVX2 void taps_block(float* acc, const float* in, std::ptrdiff_t tap_stride, const float* w, int k) {
    constexpr int L = v_float32x8::nlanes;
    v_float32x8 s[B];
    for (int b = 0; b < B; ++b) s[b] = v256_setzero_f32();  // 0 + w*v, not w*v: a -0 product gives +0, as weighted_sum
    for (int t = 0; t < k; ++t) {
        const v_float32x8 wt = v256_setall_f32(w[t]);
        const float* tap = in + t * tap_stride;
        for (int b = 0; b < B; ++b) s[b] = s[b] + wt * v256_load(tap + b * L);  // no CV_FMA3: two roundings
    }
    for (int b = 0; b < B; ++b) v_store(acc + b * L, s[b]);
}

CBI_AVX2 int float_taps_avx2(float* acc, const float* in, std::ptrdiff_t tap_stride, const float* w, int k, int n) {
    constexpr int L = v_float32x8::nlanes, B = 8;
    int i = 0;
    for (; i + B * L <= n; i += B * L) taps_block<B>(acc + i, in + i, tap_stride, w, k);
    for (; i + 2 * L <= n; i += 2 * L) taps_block<2>(acc + i, in + i, tap_stride, w, k);  // narrow tiles (smem:32x8)
    for (; i + L <= n; i += L) taps_block<1>(acc + i, in + i, tap_stride, w, k);
    return i;
}
#endif

}  // namespace

int float_taps(float* acc, const float* in, std::ptrdiff_t tap_stride, const float* w, int k, int n) {
#if CBI_OPENCV_AVX2
    if (has_avx2()) return float_taps_avx2(acc, in, tap_stride, w, k, n);
#endif
    return 0;
}

}  // namespace cbi::cpu
