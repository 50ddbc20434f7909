#pragma once
// The CPU backend's tiled path for the separable stencils (BoxOp, GaussianOp,
// SobelOp) under the stencil-only tile schedules smem:WxH and sep:WxH.
//
// Each TBB task takes a run of tiles in the schedule's TileOrder (row-major
// unless +ORDER is given; edge tiles clipped).
// For one tile it walks the output rows top to bottom; per output row and
// pass it
//   1. copies the one new source row the window needs (the tile's width
//      plus kw - 1 halo columns) into a padded row of RowAcc values, the
//      border resolved once per row and once per halo column (the interior
//      is one contiguous conversion, no border_index calls; a source that
//      computes its samples, such as a fused colour node, goes through
//      at()); passes that read the same row (Sobel mag) share one copy,
//   2. forms that row's sums across x into a buffer of row-sum rows
//      (the first output row of a tile primes it with kh - 1 rows),
//   3. forms the weighted column sum of the kh rows of the window and calls
//      the op's finish().
// Steps 2 and 3 add the taps through weighted_step in the same index order
// as SeparableStencil::operator() (a sum starts at 0, taps i = 0..k-1), so
// every output is bit-identical to the per-pixel path; the loops run over
// the interleaved samples x*C + c of a row, contiguous, so the compiler
// vectorises them. The 8-bit Gaussian and Sobel run the leading part of
// steps 2 and 3 through intrinsics instead (cpu_gauss8, cpu_sobel8: exact
// integer sums, so the same values), and so do the float sums (cpu_float_taps:
// the same roundings in the same order); the generic loops do the rest of a
// row.
//
// Integer box sums (kUnitWeights, integral Acc) slide running sums down y
// (and across x for wide kernels) instead: integer addition is exact and
// associative, so sum + new - old equals the direct sum bit for bit, and
// the cost no longer grows with k. Float box sums (double Acc) are not
// exact in general: they slide only for kernels wider than kRunningRowMin,
// where the result is within rounding of the direct sum (not bit-identical
// to the per-pixel path; see slides_float_running_sums), and take the
// direct sums below that.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "filters/cpu/float_taps.hpp"
#include "filters/cpu/gauss8.hpp"
#include "filters/cpu/rows.hpp"
#include "filters/cpu/sobel8.hpp"
#include "filters/kinds/all.hpp"
#include "filters/ops.hpp"
#include "schedules/schedule.hpp"

namespace cbi::cpu {

// The ops the tiled path runs: SeparableStencil's interface.
template <class Op>
concept SeparableStencilOp = requires(const Op& op, const typename Op::Acc* sums) {
    typename Op::Acc;
    typename Op::W;
    typename Op::Sample;
    op.passes();
    op.kw(0);
    op.kh(0);
    op.wx(0);
    op.wy(0);
    op.finish(sums);
    op.src;
    op.dst;
};

template <class Op>
constexpr bool slides_running_sums() {
    if constexpr (UnitWeightOp<Op>)
        return std::is_integral_v<typename Op::Acc>;
    else
        return false;
}

// Float box sums (in double, as cv::blur's) slide too, for large kernels
// only: within rounding of the direct sum instead of bit-identical to it
// (OpenCV's own box filter and the GPU's sep:WxH slide them as well). A row
// whose slid sums are not all finite (an Inf or NaN in or near its window:
// Inf - Inf) is recomputed directly.
template <class Op>
constexpr bool slides_float_running_sums() {
    if constexpr (UnitWeightOp<Op>)
        return std::is_floating_point_v<typename Op::Acc>;
    else
        return false;
}

// Whether v[0..n) are all finite: the exponent bits of each, OR-ed (an
// integer reduction, so it vectorises without -ffast-math).
template <class F>
CBI_CPU_INLINE bool all_finite(const F* __restrict v, int n) {
    using U = std::conditional_t<sizeof(F) == 8, std::uint64_t, std::uint32_t>;
    constexpr U exponent = sizeof(F) == 8 ? U(0x7ff0000000000000ull) : U(0x7f800000u);
    U bad = 0;
    for (int i = 0; i < n; ++i) bad |= U((std::bit_cast<U>(v[i]) & exponent) == exponent);
    return bad == 0;
}

// Whether the op's source keeps its samples in view's memory (BorderedSource)
// so a row's interior can be copied; a source without kStored is one.
template <class Src>
constexpr bool stores_samples() {
    if constexpr (requires { Src::kStored; })
        return Src::kStored;
    else
        return true;
}

// acc[i] = sum over taps t < k of w[t] * in[i + t * tap_stride], i < n, each
// sum formed as weighted_sum does (start at 0, taps in order, through
// weighted_step). A null w means unit weights. Outputs go in blocks of
// kBlock that stay in registers across all k taps (the block loop is
// contiguous: it vectorises), so each tap costs one load per vector and no
// stores; the tail is the same sum one output at a time. The horizontal
// pass has tap_stride = channels, the vertical one the row-sum row pitch.
// Sums of outputs [i0, i0 + kBlock), kept in registers across the k taps.
template <int kBlock, class Acc, class In, class W, bool kUnit>
CBI_CPU_INLINE void weighted_taps_block(Acc* __restrict acc, const In* __restrict in, std::ptrdiff_t tap_stride,
                                        const W* __restrict w, int k, int i0) {
    Acc a[kBlock];
    for (int b = 0; b < kBlock; ++b) a[b] = Acc(0);
    for (int t = 0; t < k; ++t) {
        const In* __restrict tap = in + t * tap_stride + i0;
        if constexpr (kUnit) {
            constexpr const W* unit = nullptr;
            for (int b = 0; b < kBlock; ++b) a[b] = weighted_step<Acc>(a[b], unit, 0, Acc(tap[b]));
        } else {
            const W wt = w[t];  // w[t], hoisted out of the block
            for (int b = 0; b < kBlock; ++b) a[b] = weighted_step<Acc>(a[b], &wt, 0, Acc(tap[b]));
        }
    }
    for (int b = 0; b < kBlock; ++b) acc[i0 + b] = a[b];
}

template <class Acc, class In, class W, bool kUnit>
CBI_CPU_INLINE void weighted_taps_impl(Acc* __restrict acc, const In* __restrict in, std::ptrdiff_t tap_stride,
                                       const W* __restrict w, int k, int n) {
    constexpr int kBlock = 256 / sizeof(Acc);  // 256 bytes of sums: 8 AVX2 registers, enough to hide the add latency
    constexpr int kVector = 32 / sizeof(Acc);  // one AVX2 register, for narrow tiles (smem:32x8 on 1 channel)
    int i0 = 0;
    for (; i0 + kBlock <= n; i0 += kBlock)
        weighted_taps_block<kBlock, Acc, In, W, kUnit>(acc, in, tap_stride, w, k, i0);
    for (; i0 + kVector <= n; i0 += kVector)
        weighted_taps_block<kVector, Acc, In, W, kUnit>(acc, in, tap_stride, w, k, i0);
    for (int i = i0; i < n; ++i) {
        Acc a = 0;
        for (int t = 0; t < k; ++t) a = weighted_step<Acc>(a, kUnit ? nullptr : w, t, Acc(in[t * tap_stride + i]));
        acc[i] = a;
    }
}

template <class Acc, class In, class W>
CBI_CPU_CLONES void weighted_taps(Acc* __restrict acc, const In* __restrict in, std::ptrdiff_t tap_stride, const W* w,
                                  int k, int n) {
    if (w == nullptr) return weighted_taps_impl<Acc, In, W, true>(acc, in, tap_stride, w, k, n);
    int done = 0;
    if constexpr (std::is_same_v<Acc, float> && std::is_same_v<In, float>) {
        // Float sums: the leading outputs through cpu_float_taps' AVX2 code.
        if constexpr (std::is_same_v<W, float>) {
            done = float_taps(acc, in, tap_stride, w, k, n);
        } else {  // Sobel's integer weights, as weighted_add converts them
            float wf[kMaxKernel];
            for (int t = 0; t < k; ++t) wf[t] = static_cast<float>(w[t]);
            done = float_taps(acc, in, tap_stride, wf, k, n);
        }
    }
    weighted_taps_impl<Acc, In, W, false>(acc + done, in + done, tap_stride, w, k, n - done);
}

// Unit weights: acc[i] = sum over t < k of in[i + t*C] for i < count*C,
// from sums over power-of-two windows: `part` (len samples of scratch,
// len = (count + k - 1) * C, the padded row's length) holds the sums over
// 1, 2, 4, ... pixels in turn (each level one vectorised pass:
// part[i] += part[i + width*C]), and the levels of k's set bits are added
// into acc side by side. About 2 log2(k) adds per sample with no chain
// from one output to the next (a running sum along x is one chain per
// channel, bound by the add's latency). Exact for integers; for floating
// point within rounding of the direct sum (see slides_float_running_sums).
template <class Acc>
CBI_CPU_CLONES void window_row_sums(Acc* __restrict acc, const Acc* __restrict in, Acc* __restrict part, int channels,
                                    int k, int count) {
    const int n = count * channels;
    int len = (count + k - 1) * channels;  // valid samples of the current level
    const Acc* level = in;                 // level 0 (1-pixel sums) is the row itself
    int offset = 0;                        // pixels of the window already in acc
    for (int width = 1; width <= k; width *= 2) {
        if (k & width) {
            const Acc* __restrict from = level + static_cast<std::ptrdiff_t>(offset) * channels;
            if (offset == 0)
                for (int i = 0; i < n; ++i) acc[i] = from[i];
            else
                for (int i = 0; i < n; ++i) acc[i] += from[i];
            offset += width;
        }
        if (2 * width > k) break;
        const int step = width * channels;
        len -= step;
        for (int i = 0; i < len; ++i)
            part[i] = level[i] + level[i + step];  // in place from level 1 on: reads run ahead
        level = part;
    }
}

// out[i] = op.finish({s0[i], s1[i]}) for i < n (s1 is read only by
// two-pass ops). The op is copied into a local first: out may be a uint8_t
// row, which may alias anything, so without the copy every store would
// force the op's fields (ksize, mode, weights) to be reloaded and the loop
// could not vectorise.
template <class Op>
CBI_CPU_INLINE void finish_samples(const Op& op_ref, const typename Op::Acc* __restrict s0,
                                   const typename Op::Acc* __restrict s1, typename Op::Sample* __restrict out, int n) {
    const Op op = op_ref;
    typename Op::Acc sums[Op::kMaxPasses] = {};
    if (op.passes() == 1) {
        for (int i = 0; i < n; ++i) {
            sums[0] = s0[i];
            out[i] = op.finish(sums);
        }
    } else {
        for (int i = 0; i < n; ++i) {
            sums[0] = s0[i];
            sums[1] = s1[i];
            out[i] = op.finish(sums);
        }
    }
}

// Integer box: the same finish() with ksize a compile-time constant K in a
// local copy, so the division by K*K becomes a multiplication (and
// vectorises); other sizes take the division.
template <int K, class Op>
CBI_CPU_CLONES void finish_box_row(const Op& op_ref, const typename Op::Acc* s0, typename Op::Sample* out, int n) {
    Op op = op_ref;
    op.ksize = K;
    finish_samples(op, s0, s0, out, n);
}

// Integer box of any other K: the rounded mean (s + n/2) / n, n = K*K,
// without the division, which did not vectorise. 8-bit: x = s + n/2 < 256 n <= 2^24, times
// m = floor(2^S / n) + 1 < 2^32 with S = 31 + floor(log2 n), shifted by S:
// x m / 2^S exceeds x / n by under x / 2^S < 1 / n, so the floor is exact
// (quotient_magic's argument with a 32-bit multiplier). 16-bit (s < 2^32):
// floor(s / n + 1/2) in double; s / n + 1/2 is never an integer (n is odd)
// and lies at least 1 / (2n) from one, far above double's error.
template <class Op>
CBI_CPU_CLONES void finish_box_any_row(const Op& op, const typename Op::Acc* __restrict s0,
                                       typename Op::Sample* __restrict out, int n) {
    const std::uint32_t d = static_cast<std::uint32_t>(op.ksize * op.ksize);
    if constexpr (std::is_same_v<typename Op::Sample, std::uint8_t>) {
        const int shift = 31 + std::bit_width(d) - 1;
        const std::uint64_t m = (std::uint64_t{1} << shift) / d + 1;
        const std::uint32_t half = d / 2;
        for (int i = 0; i < n; ++i)
            out[i] = static_cast<std::uint8_t>((static_cast<std::uint64_t>(s0[i] + half) * m) >> shift);
    } else {
        const double inv = 1.0 / d;
        for (int i = 0; i < n; ++i)
            out[i] = static_cast<typename Op::Sample>(
                static_cast<std::int64_t>(static_cast<double>(static_cast<std::uint32_t>(s0[i])) * inv + 0.5));
    }
}

template <class Op>
CBI_CPU_CLONES void finish_any_row(const Op& op, const typename Op::Acc* s0, const typename Op::Acc* s1,
                                   typename Op::Sample* out, int n) {
    finish_samples(op, s0, s1, out, n);
}

// Ops whose finish() is saturate_round<T>(sums[0]) with float sums and an
// integer T (sepfilter2d): the rounding through round_block, which
// vectorises where finish_any_row's compare chain did not.
template <class Op>
constexpr bool kFinishRoundsSum = false;
template <class T, BorderMode B, class Src>
constexpr bool kFinishRoundsSum<SepFilter2DOp<T, B, Src>> = !std::is_same_v<T, float>;

template <class T>
CBI_CPU_CLONES void round_row(const float* __restrict s, T* __restrict out, int n) {
    int i = 0;
    for (; i + 64 <= n; i += 64) round_block<64>(s + i, out + i);
    for (; i + 8 <= n; i += 8) round_block<8>(s + i, out + i);
    for (; i < n; ++i) out[i] = saturate_round<T>(s[i]);
}

template <class Op>
void finish_row(const Op& op, const typename Op::Acc* s0, const typename Op::Acc* s1, typename Op::Sample* out, int n) {
    if constexpr (kFinishRoundsSum<Op>) return round_row(s0, out, n);
    if constexpr (slides_running_sums<Op>() && UnitWeightOp<Op>) {
        switch (op.ksize) {
            case 3: return finish_box_row<3>(op, s0, out, n);
            case 5: return finish_box_row<5>(op, s0, out, n);
            case 7: return finish_box_row<7>(op, s0, out, n);
            case 9: return finish_box_row<9>(op, s0, out, n);
            case 15: return finish_box_row<15>(op, s0, out, n);
            case 31: return finish_box_row<31>(op, s0, out, n);
            default: return finish_box_any_row(op, s0, out, n);
        }
    }
    finish_any_row(op, s0, s1, out, n);
}

// Box sums wider than this take window_row_sums across x (and, for float,
// slide down y); narrower ones the direct sums, which are as fast there
// and keep float results bit-identical to the per-pixel path
// (docs/performance.md#cpu-box-sums).
inline constexpr int kRunningRowMin = 8;

// The 8-bit fixed-point Gaussian (GaussianOp<uint8_t>): its passes have
// vector forms in cpu_gauss8.
template <class Op>
constexpr bool is_gauss8() {
    if constexpr (requires { Op::kFixedPoint; }) {
        static_assert(!Op::kFixedPoint || std::is_same_v<typename Op::W, std::uint16_t>);
        return Op::kFixedPoint;
    } else {
        return false;
    }
}

// The 8-bit Sobel and Laplacian (SobelOp<uint8_t>, LaplacianOp<uint8_t>,
// any source): their passes have vector forms in cpu_sobel8.
template <class Op>
constexpr bool kIsSobel8 = false;
template <BorderMode B, class Src>
constexpr bool kIsSobel8<SobelOp<std::uint8_t, B, Src>> = true;
template <BorderMode B, class Src>
constexpr bool kIsSobel8<LaplacianOp<std::uint8_t, B, Src>> = true;
template <class Op>
constexpr bool kIsLaplacian8 = false;
template <BorderMode B, class Src>
constexpr bool kIsLaplacian8<LaplacianOp<std::uint8_t, B, Src>> = true;

// Ops whose finish() returns their one pass's sum unchanged (the float
// Gaussian): the sums can go straight to the output row.
template <class Op>
constexpr bool kFinishReturnsSum = op_trait_finish_returns_sum<Op>();

// The 8-bit sepfilter2d (SepFilter2DOp<uint8_t>, any source).
template <class Op>
constexpr bool kIsSepFilter8 = false;
template <BorderMode B, class Src>
constexpr bool kIsSepFilter8<SepFilter2DOp<std::uint8_t, B, Src>> = true;

// Taps w[t] = m[t] / 2^shift with integers m (the smallest such shift up to
// 14), and sum |m| in `sum`; false for a tap that is no such multiple.
inline bool dyadic_taps(const float* w, int k, int* m, int& shift, int& sum) {
    shift = 0;
    for (int t = 0; t < k; ++t)
        while (shift <= 14 && std::ldexp(w[t], shift) != std::trunc(std::ldexp(w[t], shift))) ++shift;
    if (shift > 14) return false;
    long long total = 0;
    for (int t = 0; t < k; ++t) {
        const float v = std::ldexp(w[t], shift);
        if (!(std::fabs(v) <= 32767.f)) return false;
        m[t] = static_cast<int>(v);
        total += m[t] < 0 ? -m[t] : m[t];
    }
    if (total > 32767) return false;
    sum = static_cast<int>(total);
    return true;
}

// How an 8-bit sepfilter2d's sums run (TileWorker's integer path): taps
// that are multiples of 2^-sx across x and 2^-sy down y, scaled to
// integers mx and my, with 255 * sum |mx| * sum |my| below 2^24. Its float
// sums are then exact (every partial sum a multiple of 2^-(sx + sy) under
// 2^24), so integer sums in any order are the same values, and rounding to
// nearest even is a shift. Row sums in int16 (255 * sum |mx| within it);
// column sums in int16 where 255 * sum |mx| * sum |my| + 2^(sx + sy) fits,
// else in int32.
enum class IntTaps { none, int16, int32 };
inline IntTaps int_sepfilter_taps(const float* kx, int nx, const float* ky, int ny, int* mx, int* my, int& shift) {
    int sx = 0, sy = 0, ax = 0, ay = 0;
    if (!dyadic_taps(kx, nx, mx, sx, ax) || !dyadic_taps(ky, ny, my, sy, ay)) return IntTaps::none;
    shift = sx + sy;
    const long long most = 255LL * ax * ay + (1LL << shift);
    if (most <= 32767) return IntTaps::int16;
    return 255LL * ax <= 32767 && most < (1LL << 24) ? IntTaps::int32 : IntTaps::none;
}

// The type of the padded source row and of the row sums (the pass across
// x): the op's Acc, except for the 8-bit ops above, whose row sums fit 16
// bits. The Gaussian's weights (uint16, in 1/256) sum to 256, so a row sum
// is at most 255 * 256 = 65280: uint16, as OpenCV's GaussianBlurFixedPoint
// keeps them. The Sobel's weights' magnitudes sum to at most 64 (KSIZE 7),
// so |row sum| <= 16320: int16. The row pass then runs 16 lanes per AVX2
// vector instead of 8, and so does the Sobel's column pass where its
// gradients fit int16 (KSIZE 3 and 5); the Gaussian's column pass widens
// uint16 x uint16 to its uint32 sums. All exact, so the result is
// unchanged.
template <class Op>
using RowAcc = std::conditional_t<is_gauss8<Op>(), std::uint16_t,
                                  std::conditional_t<kIsSobel8<Op>, std::int16_t, typename Op::Acc>>;

// How far ahead load_padded_row prefetches a tile's source rows.
inline constexpr int kPrefetchRows = 4;

// One tile [x0, x1) x [y0, y1) of the output.
template <class Op>
class TileWorker {
public:
    using T = typename Op::Sample;
    using Acc = typename Op::Acc;
    using Row = RowAcc<Op>;
    static constexpr int kPasses = Op::kMaxPasses;

    // Row sums go down a buffer of kBufferWindows * (kh + 1) rows per pass
    // in order, so any window of kh consecutive rows is contiguous with one
    // pitch (a plain strided tap loop). When the buffer is full its last
    // kh - 1 rows move to its top (slide_buffer): kh - 1 rows copied per
    // (kBufferWindows - 1) * (kh + 1) + 2 rows added, where a ring holding
    // each row twice copied every row. The working set stays in L1/L2
    // whatever the tile height. Box sums that slide down y read only the
    // row they add and the row they drop, never a whole window: theirs is a
    // ring of kh + 1 rows, row r in r % (kh + 1), nothing copied.
    static constexpr int kBufferWindows = 4;

    TileWorker(const Op& op, int tile_w) : op_(op), channels_(op.src.view.channels) {
        int max_kw = 1, rows = 0;
        for (int p = 0; p < op.passes(); ++p) {
            max_kw = std::max(max_kw, op.kw(p));
            max_kh_ = std::max(max_kh_, op.kh(p));
            if constexpr (kIsSobel8<Op>)
                int16_gradients_ =
                    int16_gradients_ && sobel8_gradients_fit_int16(op.wx(p), op.kw(p), op.wy(p), op.kh(p));
            buffer_rows_[p] = (slides_down(p) ? 1 : kBufferWindows) * (op.kh(p) + 1);
            if constexpr (kIsLaplacian8<Op>)  // its two passes' gradients are summed in int16
                int16_gradients_ = sobel8_gradient_sum_fits_int16(op.wx(0), op.kw(0), op.wy(0), op.kh(0), op.wx(1),
                                                                  op.kw(1), op.wy(1), op.kh(1));
            rows += buffer_rows_[p];
        }
        n_max_ = tile_w * channels_;
        pad_len_ = (tile_w + max_kw - 1) * channels_;
        if constexpr (kIsSepFilter8<Op>) {
            const IntTaps taps = int_sepfilter_taps(op.kx, op.nx, op.ky, op.ny, int_wx_, int_wy_, int_shift_);
            if (taps != IntTaps::none && sobel8_vectorised()) {
                int32_columns_ = taps == IntTaps::int32;
                int_buffer_.reset(new std::int16_t[pad_len_ + static_cast<std::size_t>(rows) * n_max_]);
                int_pad_ = int_buffer_.get();
                int_sums_ = int_pad_ + pad_len_;
            }
        }
        row_buffer_.reset(new Row[2 * static_cast<std::size_t>(pad_len_) + static_cast<std::size_t>(rows) * n_max_]);
        col_buffer_.reset(new Acc[static_cast<std::size_t>(kPasses) * n_max_]);
        pad_ = row_buffer_.get();
        part_ = pad_ + pad_len_;
        Row* next = part_ + pad_len_;
        for (int p = 0; p < op.passes(); ++p) {
            row_sums_[p] = next;
            next += static_cast<std::size_t>(buffer_rows_[p]) * n_max_;
        }
        for (int p = 0; p < kPasses; ++p) col_sums_[p] = col_buffer_.get() + static_cast<std::size_t>(p) * n_max_;
    }

    // The tile [x0, x1) x [y0, y1) into op.dst.
    void run(int x0, int x1, int y0, int y1) {
        start(x0, x1, y0);
        for (int y = y0; y < y1; ++y) row(y, op_.dst.template row<T>(y) + static_cast<std::ptrdiff_t>(x0) * channels_);
    }

    // Starts a walk down columns [x0, x1) (at most the constructor's
    // tile_w) from output row y0: primes each pass's buffer with the first
    // kh - 1 rows of row y0's window. Window row r of pass p (source row
    // y0 - kh/2 + r) sits in buffer row r - first_row_[p]. Rows outer: the
    // passes of a Sobel magnitude read the same padded rows, loaded once
    // (load_padded_row).
    CBI_CPU_CLONES void start(int x0, int x1, int y0) {
        x0_ = x0, y0_ = y0, tw_ = x1 - x0;
        const int passes = op_.passes(), n = tw_ * channels_;
        for (int p = 0; p < passes; ++p) first_row_[p] = 0;
        for (int r = 0; r < max_kh_ - 1; ++r)
            for (int p = 0; p < passes; ++p)
                if (r < op_.kh(p) - 1) add_row_sums(p, r, x0_, y0_, tw_, n);
    }

    // Output row y of the walk, its columns [x0, x1) into out[0 .. (x1 -
    // x0) * channels): the walk's rows in order, y0, y0 + 1, ...
    CBI_CPU_CLONES void row(int y, T* out) {
        const int passes = op_.passes(), n = tw_ * channels_;
        const int r0 = y - y0_;  // first window row of output row y
        for (int p = 0; p < passes; ++p) add_row_sums(p, r0 + op_.kh(p) - 1, x0_, y0_, tw_, n);
        if constexpr (kIsSepFilter8<Op>)
            if (int_sums_ != nullptr) return int16_columns(out, r0, n);
        const int done = vector_columns(out, r0, n);
        for (int p = 0; p < passes; ++p) column_sums(p, r0, done, n);
        finish_row(op_, col_sums_[0] + done, col_sums_[passes - 1] + done, out + done, n - done);
    }

private:
    // Whether pass p's column sums slide down y (box: always for integers,
    // for floats above kRunningRowMin) instead of summing each window.
    bool slides_down(int p) const {
        return slides_running_sums<Op>() || (slides_float_running_sums<Op>() && op_.kh(p) > kRunningRowMin);
    }

    // Window row r's row sums (the modulo wraps only the sliding box's ring).
    Row* slot(int p, int r) const { return slot_in(row_sums_[p], p, r); }
    template <class R>
    R* slot_in(R* sums, int p, int r) const {
        return sums + static_cast<std::size_t>((r - first_row_[p]) % buffer_rows_[p]) * n_max_;
    }

    // The 8-bit sepfilter2d with integer sums (int_sepfilter_taps): the
    // column sums of the row whose window starts at row r0, rounded by the
    // shift and saturated, straight into out.
    void int16_columns(std::uint8_t* out, int r0, int n) {
        const std::int16_t* rows = slot_in(int_sums_, 0, r0);
        const int k = op_.kh(0);
        const int done =
            (int32_columns_ ? int32_columns_u8 : int16_columns_u8)(out, rows, n_max_, int_wy_, k, int_shift_, n);
        for (int i = done; i < n; ++i) {
            int g = 0;
            for (int j = 0; j < k; ++j) g += int_wy_[j] * rows[i + static_cast<std::ptrdiff_t>(j) * n_max_];
            if (int_shift_ > 0) g = (g + (1 << (int_shift_ - 1)) - 1 + ((g >> int_shift_) & 1)) >> int_shift_;
            out[i] = static_cast<std::uint8_t>(std::clamp(g, 0, 255));
        }
    }

    // Its row sums of window row r, from an int16 padded row.
    void int16_row_sums(int r, int n) {
        const int kw = op_.kw(0);
        std::int16_t* sums = slot_in(int_sums_, 0, r);
        const int done = sobel8_row_sums(sums, int_pad_, channels_, int_wx_, kw, n);
        for (int i = done; i < n; ++i) {
            int a = 0;
            for (int t = 0; t < kw; ++t) a += int_wx_[t] * int_pad_[i + t * channels_];
            sums[i] = static_cast<std::int16_t>(a);
        }
    }

    // Before window row r of pass p is added to a full buffer: its last
    // kh - 1 rows (r - kh + 1 .. r - 1, the rest of row r's window) move to
    // its top.
    void slide_buffer(int p, int r) {
        if (slides_down(p) || r - first_row_[p] < buffer_rows_[p]) return;
        const int kept = op_.kh(p) - 1;
        const std::size_t count = static_cast<std::size_t>(kept) * n_max_;  // no overlap: kept < rows / 2
        if (int_sums_ != nullptr)
            std::copy(slot_in(int_sums_, p, r - kept), slot_in(int_sums_, p, r - kept) + count, int_sums_);
        else
            std::copy(slot(p, r - kept), slot(p, r - kept) + count, row_sums_[p]);
        first_row_[p] = r - kept;
    }

    // The 8-bit ops' vector code (cpu_gauss8, cpu_sobel8) for the output row
    // whose window starts at row r0: column sums and finish from the row
    // sums, straight into out; the float Gaussian's column sums, into out
    // too (no pass through col_sums_). Returns how many leading outputs it
    // wrote.
    CBI_CPU_INLINE int vector_columns(T* out, int r0, int n) {
        if constexpr (is_gauss8<Op>()) {
            return gauss8_columns(out, slot(0, r0), n_max_, op_.wy(0), op_.kh(0), n);
        } else if constexpr (kIsSobel8<Op>) {
            if (!int16_gradients_) return 0;  // KSIZE 7: the generic int32 sums
            if constexpr (kIsLaplacian8<Op>)
                return sobel8_sum_abs_columns(out, slot(0, r0), op_.wy(0), op_.kh(0), slot(1, r0), op_.wy(1), op_.kh(1),
                                              n_max_, n);
            if (op_.passes() == 1) return sobel8_abs_columns(out, slot(0, r0), n_max_, op_.wy(0), op_.kh(0), n);
            return sobel8_magnitude_columns(out, slot(0, r0), op_.wy(0), op_.kh(0), slot(1, r0), op_.wy(1), op_.kh(1),
                                            n_max_, n);
        } else if constexpr (kFinishReturnsSum<Op>) {
            weighted_taps<Acc>(out, slot(0, r0), n_max_, op_.wy(0), op_.kh(0), n);
            return n;
        } else {
            return 0;
        }
    }

    // Column sums of pass p for outputs [from, n) of the row whose window starts at row r0.
    CBI_CPU_INLINE void column_sums(int p, int r0, int from, int n) {
        const int kh = op_.kh(p);
        Acc* __restrict s = col_sums_[p];
        if (slides_down(p) && r0 > 0) {
            // Box: the column sums slide down: add the new row, drop the old one.
            const Row* __restrict add = slot(p, r0 + kh - 1);
            const Row* __restrict drop = slot(p, r0 - 1);
            for (int i = from; i < n; ++i) s[i] = s[i] + add[i] - drop[i];
            if constexpr (slides_float_running_sums<Op>())
                if (!all_finite(s + from, n - from)) {  // the direct sum, rows in order (as weighted_taps adds them)
                    for (int i = from; i < n; ++i) s[i] = Acc(0);
                    for (int j = 0; j < kh; ++j) {
                        const Row* __restrict row = slot(p, r0 + j);
                        for (int i = from; i < n; ++i) s[i] = s[i] + row[i];
                    }
                }
        } else {
            weighted_taps<Acc>(s + from, slot(p, r0) + from, n_max_, op_.wy(p), kh, n - from);
        }
    }

    // The 8-bit ops' vector code for the row sums of pass p, window row r,
    // from the padded row. Returns how many leading sums it wrote.
    int vector_row_sums(int p, int r, int n) {
        if constexpr (is_gauss8<Op>())
            return gauss8_row_sums(slot(p, r), pad_, channels_, op_.wx(p), op_.kw(p), n);
        else if constexpr (kIsSobel8<Op>)
            return sobel8_row_sums(slot(p, r), pad_, channels_, op_.wx(p), op_.kw(p), n);
        else
            return 0;
    }

    // Row sums of pass p for window row r (source row y0 - kh/2 + r) into its buffer row.
    void add_row_sums(int p, int r, int x0, int y0, int tw, int n) {
        const int kw = op_.kw(p);
        slide_buffer(p, r);
        if (int_sums_ != nullptr) {
            load_padded_row(y0 - op_.kh(p) / 2 + r, x0 - kw / 2, tw + kw - 1, int_pad_);
            return int16_row_sums(r, n);
        }
        load_padded_row(y0 - op_.kh(p) / 2 + r, x0 - kw / 2, tw + kw - 1, pad_);
        if (UnitWeightOp<Op> && kw > kRunningRowMin) {
            window_row_sums(slot(p, r), pad_, part_, channels_, kw, tw);
            if constexpr (slides_float_running_sums<Op>())
                if (!all_finite(slot(p, r), n)) weighted_taps<Row>(slot(p, r), pad_, channels_, op_.wx(p), kw, n);
        } else {
            const int done = vector_row_sums(p, r, n);
            weighted_taps<Row>(slot(p, r) + done, pad_ + done, channels_, op_.wx(p), kw, n - done);
        }
    }

    // pad[xi*C + c] = source sample (xs + xi, y, c) through the border rule,
    // as P, for xi < len.
    template <class P>
    CBI_CPU_CLONES void load_padded_row(int y, int xs, int len, P* pad) {
        if (y == loaded_y_ && xs == loaded_xs_ && len == loaded_len_) return;  // the other pass's row (Sobel mag)
        loaded_y_ = y;
        loaded_xs_ = xs;
        loaded_len_ = len;
        const auto& src = op_.src;
        const int C = channels_, width = src.view.width;
        const T* row = src.row(y);  // border-resolved once per row; null in a constant border
        if constexpr (!stores_samples<std::remove_cvref_t<decltype(src)>>()) {
            // Samples computed on the fly (a fused colour node): each through at().
            for (int xi = 0; xi < len; ++xi)
                for (int c = 0; c < C; ++c) pad[xi * C + c] = static_cast<P>(src.at(row, xs + xi, c));
            return;
        }
        if (row != nullptr && y + kPrefetchRows < src.view.height) {  // the same piece kPrefetchRows rows down
            const int lo = std::clamp(-xs, 0, len), hi = std::clamp(width - xs, lo, len);
            const char* ahead = reinterpret_cast<const char*>(row + static_cast<std::ptrdiff_t>(xs + lo) * C) +
                                kPrefetchRows * src.view.stride;
            for (int b = 0; b < (hi - lo) * C * static_cast<int>(sizeof(T)); b += 64) __builtin_prefetch(ahead + b);
        }
        cpu::load_padded_row(src, row, xs, len, pad);  // cpu/rows.hpp
    }

    const Op& op_;
    int channels_;
    int n_max_ = 0, pad_len_ = 0;
    int max_kh_ = 1;
    int x0_ = 0, y0_ = 0, tw_ = 0;                       // the walk start() began
    bool int16_gradients_ = kIsSobel8<Op>;               // 8-bit Sobel: every pass's gradients fit int16 (cpu_sobel8)
    int loaded_y_ = 0, loaded_xs_ = 0, loaded_len_ = 0;  // the row in pad_ (len 0: none yet)
    int buffer_rows_[kPasses] = {};                      // rows of row_sums_[p]: a buffer, or the sliding box's ring
    int first_row_[kPasses] = {};                        // the tile's window row in row_sums_[p]'s first row
    std::unique_ptr<Row[]> row_buffer_;                  // pad_, part_, row_sums_
    std::unique_ptr<Acc[]> col_buffer_;                  // col_sums_
    Row* pad_ = nullptr;
    Row* part_ = nullptr;  // window_row_sums' scratch row
    // The 8-bit sepfilter2d's integer path (int_sepfilter_taps): its taps as
    // integers, its shift, its padded row and row sums (null: the float path).
    int int_wx_[kMaxKernel] = {}, int_wy_[kMaxKernel] = {}, int_shift_ = 0;
    bool int32_columns_ = false;  // column sums in int32 (IntTaps::int32)
    std::unique_ptr<std::int16_t[]> int_buffer_;
    std::int16_t* int_pad_ = nullptr;
    std::int16_t* int_sums_ = nullptr;
    Row* row_sums_[kPasses] = {};
    Acc* col_sums_[kPasses] = {};
};

// The tiles of a width x height output in `schedule`'s geometry
// (TileSchedule: a tile height <= 0 or >= height is the full height, a tile
// width >= width the full width), task index t taking the tile
// order.map(t, tiles_x, tiles_y). A task takes at least ~16K output pixels,
// so small tiles (sep:7x5) do not drown in task overhead. Each task makes
// its worker once (make(tile_w): a pointer), then calls run(worker, x0, x1,
// y0, y1) per tile.
template <class Make, class Run>
void for_each_tile(const TileSchedule& schedule, const TileOrder& order, int width, int height, Make&& make,
                   Run&& run) {
    if (width <= 0 || height <= 0) return;
    const int th = schedule.tile_height > 0 && schedule.tile_height < height ? schedule.tile_height : height;
    const int tw = schedule.tile_width > 0 && schedule.tile_width < width ? schedule.tile_width : width;
    const int tiles_x = (width + tw - 1) / tw, tiles_y = (height + th - 1) / th;
    const int grain = std::max(1, 16384 / (tw * th));
    tbb::parallel_for(tbb::blocked_range<int>(0, tiles_x * tiles_y, grain), [&](const tbb::blocked_range<int>& range) {
        const auto worker = make(tw);
        for (int t = range.begin(); t != range.end(); ++t) {
            const Pixel tile = order.map(static_cast<std::uint32_t>(t), tiles_x, tiles_y);
            const int x0 = tile.x * tw, y0 = tile.y * th;
            run(*worker, x0, std::min(x0 + tw, width), y0, std::min(y0 + th, height));
        }
    });
}

// Runs `op` over a width x height output in the tiles of `schedule`.
// `then(x0, x1, y0, y1)` after each tile (a per-sample node applied as
// the tile is stored: cpu/then.hpp).
template <SeparableStencilOp Op, class Then = void (*)(int, int, int, int)>
void run_separable_tiles(
    const TileSchedule& schedule, const Op& op, int width, int height, const TileOrder& order = {},
    const Then& then = [](int, int, int, int) {}) {
    for_each_tile(
        schedule, order, width, height, [&](int tw) { return std::make_unique<TileWorker<Op>>(op, tw); },
        [&](TileWorker<Op>& worker, int x0, int x1, int y0, int y1) {
            worker.run(x0, x1, y0, y1);
            then(x0, x1, y0, y1);
        });
}

}  // namespace cbi::cpu
