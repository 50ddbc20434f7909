#pragma once
// Fused stencil pairs on stream:WxH: one kernel walks strips top to bottom
// and carries both stencils (and the colour node before the first, when one
// is fused) through line buffers, so the intermediate image never leaves
// the chip and each of its rows is computed once per strip.
//
// A thread owns a run of R consecutive output samples of a strip row and
// keeps, for the window of intermediate samples its outputs read (the run
// plus kChainHalo pixels on each side):
//  1. per input row: the first stencil's row sums of the window, read
//     through the first stencil's source (its border rule, and the colour
//     matrix when fused), into a ring of the last kChainK rows in
//     registers, shifted by one slot per row (one copy of the row body:
//     unrolled kChainK times for constant slots, the build took minutes
//     per kernel);
//  2. kChainHalo rows later: the column sums and finish(): one intermediate
//     row of the window, stored as the sample type T as the unfused graph
//     stores it;
//  3. the consumer's row sums of that row for the run, into a ring of the
//     last kChainK intermediate rows in the thread's own shared-memory
//     slots (run-time slots: rows above and below the image are read
//     through the consumer's border rule from rows of the ring);
//  4. each output row once the intermediate rows below it are in: the
//     column sums, finish(), stored.
// Intermediate samples outside the image (in x) are the consumer's border
// rule applied to the intermediate image: threads at the image's edges
// compute the first stencil at the column that rule maps to (or take the
// constant), in a rolled loop through the sources.
// The first stencil is an 8-bit blur or Gaussian (kChainFirst), the
// consumer any stencil; every pass at most kChainK x kChainK. Smaller
// kernels take the taps within their radius, in weighted_sum's order; every sum goes through weighted_add, so
// the outputs are bit-identical to running the two nodes.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "filters/cuda_order.cuh"
#include "filters/cuda_stream.cuh"  // store_run, with_one_of
#include "filters/ops.hpp"

namespace cbi::cuda {

inline constexpr int kChainHalo = 2;                  // the largest stencil radius the kernel takes
inline constexpr int kChainK = 2 * kChainHalo + 1;   // ring slots, and the largest kernel size
inline constexpr int kChainRun = 8;                   // output samples per thread

// Each pass's taps centred in kChainK slots (slot kChainHalo + t for offset
// t), and its radii across and down.
template <class W1, int P1, class W2, int P2>
struct ChainTaps {
    W1 x1[P1][kChainK], y1[P1][kChainK];
    W2 x2[P2][kChainK], y2[P2][kChainK];
    int hx1[P1], hy1[P1], hx2[P2], hy2[P2];
};

// Sample c of pixel x of an input row inside the image, as src.at gives
// it (without its border checks: the caller's window lies inside the row).
template <class Src, class T>
__device__ __forceinline__ T chain_inside_at(const Src& src, const T* row, int x, int c) {
    if (row == nullptr) return src.constant;
    if constexpr (Src::kStored) {
        return row[x * src.view.channels + c];
    } else {
        const T* in = row + x * src.input.channels;
        return c < src.matrix.rows ? ColorOp<T>::sample(src.matrix, in, c) : in[3];
    }
}

// sum over the taps t = -h .. h of w[kChainHalo + t] * get(t) (sum + get(t)
// for unit weights), in weighted_sum's order; taps beyond h are not read.
template <bool kUnit, class Acc, class W, class Get>
__device__ __forceinline__ Acc chain_sum(const W (&w)[kChainK], int h, Get&& get) {
    Acc sum = 0;
#pragma unroll
    for (int t = -kChainHalo; t <= kChainHalo; ++t) {
        if (t < -h || t > h) continue;
        sum = kUnit ? sum + get(t) : weighted_add<Acc>(sum, w[kChainHalo + t], get(t));
    }
    return sum;
}

template <class Pre, class Op, int C, int P1, int P2>
__global__ void chain_stream(const __grid_constant__ Pre pre, const __grid_constant__ Op op,
                             const __grid_constant__ ChainTaps<typename Pre::W, P1, typename Op::W, P2> taps,
                             int strip_w, int strip_h, int strips_y, const TileOrder order) {
    using T = typename Op::Sample;
    using A1 = typename Pre::Acc;
    using A2 = typename Op::Acc;
    constexpr int H = kChainHalo, K = kChainK, R = kChainRun;
    constexpr int N2 = R + 2 * H * C;   // intermediate samples in a thread's window
    constexpr int N1 = N2 + 2 * H * C;  // input samples behind them
    constexpr bool unit1 = UnitWeightOp<Pre>, unit2 = UnitWeightOp<Op>;
    const int width = op.dst.width, height = op.dst.height;
    StripWork strips;
    if (!strip_work(width, C, R, strip_w, strips_y, order, strips)) return;  // no barriers below
    const int s0 = strips.s0, count = strips.count;
    const int f2 = s0 - H * C, f1 = f2 - H * C;  // window starts, in samples of a row
    const bool inside = f1 >= 0 && f1 + N1 <= width * C;
    extern __shared__ __align__(16) unsigned char chain_smem[];
    const int nthreads = blockDim.x * blockDim.y, me = threadIdx.y * blockDim.x + threadIdx.x;
    A2* const ring2_smem = reinterpret_cast<A2*>(chain_smem);
    const auto ring2 = [&](int p, int slot, int o) -> A2& { return ring2_smem[((p * K + slot) * R + o) * nthreads + me]; };

    // The consumer's row sum of a row in its constant border, and its vertical radius.
    A2 const_row[P2];
    int hy2 = 0;
#pragma unroll
    for (int p = 0; p < P2; ++p) {
        const_row[p] = chain_sum<unit2, A2>(taps.x2[p], taps.hx2[p], [&](int) { return to_acc<A2>(op.src.constant); });
        hy2 = max(hy2, taps.hy2[p]);
    }
    // Window samples outside the image that the consumer's constant border gives (edge threads).
    std::uint32_t constant_mask = 0;
    if (!inside)
        for (int i = 0; i < N2; ++i) {
            const int x = (f2 + i + H * C) / C - H;  // floor((f2 + i) / C): f2 >= -H * C
            if ((x < 0 || x >= width) && border_index(op.src.mode, x, width) < 0) constant_mask |= 1u << i;
        }

    for (int sy = strips.first; sy < strips.end; sy += strips.step) {
        const int y0 = sy * strip_h, y_end = min(y0 + strip_h, height);
        const int m_first = max(0, y0 - hy2), m_last = min(height - 1, y_end - 1 + hy2);  // intermediate rows
        const int r_first = m_first - H, r_end = m_last + H + 1;                          // input rows
        A1 ring1[P1][K][N2];  // slot K - 1: the newest row
#pragma unroll 1
        for (int r = r_first; r < r_end; ++r) {
            // 1. The first stencil's row sums of input row r, into the newest slot.
#pragma unroll
            for (int p = 0; p < P1; ++p)
#pragma unroll
                for (int k = 0; k + 1 < K; ++k)
#pragma unroll
                    for (int i = 0; i < N2; ++i) ring1[p][k][i] = ring1[p][k + 1][i];
            const auto* row = pre.src.row(r);
            if (inside) {
                A1 in[N1];
#pragma unroll
                for (int i = 0; i < N1; ++i) {
                    const int x = (f1 + i) / C;
                    in[i] = to_acc<A1>(chain_inside_at(pre.src, row, x, f1 + i - x * C));
                }
#pragma unroll
                for (int p = 0; p < P1; ++p)
#pragma unroll
                    for (int i = 0; i < N2; ++i)
                        ring1[p][K - 1][i] = chain_sum<unit1, A1>(taps.x1[p], taps.hx1[p], [&](int t) { return in[i + (H + t) * C]; });
            } else {
                // Edge threads: each window sample at the column the consumer's
                // border maps it to, read through the first stencil's source.
                A1 sums[P1][N2];
#pragma unroll 1
                for (int i = 0; i < N2; ++i) {
                    const int x = (f2 + i + H * C) / C - H, c = f2 + i - x * C;
                    const int col = x >= 0 && x < width ? x : max(0, border_index(op.src.mode, x, width));
#pragma unroll
                    for (int p = 0; p < P1; ++p)
                        sums[p][i] = chain_sum<unit1, A1>(taps.x1[p], taps.hx1[p],
                                                          [&](int t) { return to_acc<A1>(pre.src.at(row, col + t, c)); });
                }
#pragma unroll
                for (int p = 0; p < P1; ++p)
#pragma unroll
                    for (int i = 0; i < N2; ++i) ring1[p][K - 1][i] = sums[p][i];
            }
            // 2. Intermediate row m: rows m - H .. m + H = r are in (slot H + d holds row m + d).
            const int m = r - H;
            if (m < m_first) continue;
            T mid[N2];
#pragma unroll
            for (int i = 0; i < N2; ++i) {
                A1 v[Pre::kMaxPasses] = {};
#pragma unroll
                for (int p = 0; p < P1; ++p)
                    v[p] = chain_sum<unit1, A1>(taps.y1[p], taps.hy1[p], [&](int d) { return ring1[p][H + d][i]; });
                mid[i] = (constant_mask >> i) & 1u ? op.src.constant : pre.finish(v);
            }
            // 3. The consumer's row sums of row m for the run.
            const int slot = m % K;
#pragma unroll
            for (int p = 0; p < P2; ++p)
#pragma unroll
                for (int o = 0; o < R; ++o)
                    ring2(p, slot, o) = chain_sum<unit2, A2>(taps.x2[p], taps.hx2[p], [&](int t) { return to_acc<A2>(mid[o + (H + t) * C]); });
            // 4. Outputs whose rows below are in: y = m - hy2, and at the
            // image's last row every row left in the strip.
            const int ya = max(y0, m - hy2), yb = m < height - 1 ? min(y_end, m - hy2 + 1) : y_end;
#pragma unroll 1
            for (int y = ya; y < yb; ++y) {
                int slot_of[K];  // ring slot of row y + d, through the consumer's border rule (-1: the constant)
#pragma unroll
                for (int d = -H; d <= H; ++d) {
                    const int yy = y + d;
                    const int ry = yy >= 0 && yy < height ? yy : border_index(op.src.mode, yy, height);
                    slot_of[H + d] = ry < 0 ? -1 : ry % K;
                }
                T out[R];
#pragma unroll
                for (int o = 0; o < R; ++o) {
                    A2 v[Op::kMaxPasses] = {};
#pragma unroll
                    for (int p = 0; p < P2; ++p)
                        v[p] = chain_sum<unit2, A2>(taps.y2[p], taps.hy2[p], [&](int d) {
                            return slot_of[H + d] < 0 ? const_row[p] : ring2(p, slot_of[H + d], o);
                        });
                    out[o] = op.finish(v);
                }
                store_run(op.dst.template row<T>(y) + s0, out, count);
            }
        }
    }
}

// The first stencils chain_stream is built for: the smoothing filters that
// usually come before another stencil (blur or Gaussian, then an edge
// filter or a second blur). Each one adds kernels to every binary; a
// derivative first (Sobel, then a blur) runs as two kernels.
template <class Op>
inline constexpr bool kChainFirst = false;
template <BorderMode B, class Src>
inline constexpr bool kChainFirst<BoxOp<std::uint8_t, B, Src>> = true;
template <BorderMode B, class Src>
inline constexpr bool kChainFirst<GaussianOp<std::uint8_t, B, Src>> = true;

// Whether chain_stream takes the pair: an 8-bit blur or Gaussian first, 1
// or 3 channels, every pass of both at most kChainK x kChainK.
template <class Pre, class Op>
bool chain_stream_takes(const Pre& pre, const Op& op) {
    if (!kChainFirst<Pre>) return false;
    const int c = op.dst.channels;
    if (c != 1 && c != 3) return false;
    for (int p = 0; p < pre.passes(); ++p)
        if (pre.kw(p) > kChainK || pre.kh(p) > kChainK) return false;
    for (int p = 0; p < op.passes(); ++p)
        if (op.kw(p) > kChainK || op.kh(p) > kChainK) return false;
    return true;
}

// Each pass's weights centred in kChainK slots (1 for unit weights).
template <class W, class S>
void centre_taps(const S& s, int p, W (&x)[kChainK], W (&y)[kChainK], int& hx, int& hy) {
    hx = s.kw(p) / 2, hy = s.kh(p) / 2;
    for (int i = 0; i < kChainK; ++i) x[i] = y[i] = W(0);
    for (int i = 0; i < s.kw(p); ++i) x[kChainHalo - hx + i] = s.wx(p) ? s.wx(p)[i] : W(1);
    for (int i = 0; i < s.kh(p); ++i) y[kChainHalo - hy + i] = s.wy(p) ? s.wy(p)[i] : W(1);
}

// Bytes of shared memory per thread: the consumer's ring.
template <class Op, int P2>
constexpr int chain_stream_bytes_per_thread() {
    return P2 * kChainK * kChainRun * static_cast<int>(sizeof(typename Op::Acc));
}

template <class Pre, class Op>
void launch_chain_stream(const StreamSchedule& strip, const Pre& pre, const Op& op, cudaStream_t stream, int block,
                         const TileOrder& order) {
    if constexpr (kChainFirst<Pre>) {
        if (op.dst.empty()) return;
        with_one_of<1, 3>(op.dst.channels, [&](auto cc) {
            constexpr int C = cc();
            constexpr int P1 = 1;  // box and Gaussian
            with_passes(op, [&](auto p2c) {
                constexpr int P2 = p2c();
                ChainTaps<typename Pre::W, P1, typename Op::W, P2> taps{};
                for (int p = 0; p < P1; ++p) centre_taps(pre, p, taps.x1[p], taps.y1[p], taps.hx1[p], taps.hy1[p]);
                for (int p = 0; p < P2; ++p) centre_taps(op, p, taps.x2[p], taps.y2[p], taps.hx2[p], taps.hy2[p]);
                constexpr auto kernel = chain_stream<Pre, Op, C, P1, P2>;
                constexpr int per_thread = chain_stream_bytes_per_thread<Op, P2>();
                const int device = current_device();
                allow_shared_memory<kernel>(device);
                const int max_threads = std::min(max_threads_per_block<kernel>(), shared_memory_limit(device) / per_thread);
                if (max_threads < 1) throw std::runtime_error("fused stencils: cannot read the kernel's attributes");
                const StripLaunch l = strip_launch(strip, op.dst.width, op.dst.height, C, kChainRun, max_threads, block, order);
                kernel<<<l.grid, l.threads, static_cast<std::size_t>(per_thread) * l.threads.x * l.threads.y, stream>>>(
                    pre, op, taps, l.strip_w, l.strip_h, l.strips_y, order);
            });
        });
    }
}

}  // namespace cbi::cuda
