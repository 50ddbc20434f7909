#pragma once
// Fused 8-bit stencil pairs on stream:WxH: one kernel walks strips top to
// bottom and carries both stencils (and a gray conversion before the
// first, when one is fused) through line buffers, so the intermediate image
// never leaves the chip and each of its rows is computed once per strip.
//
// It is the stream8 kernel (cuda_stream8.cuh) twice over. A warp walks a
// strip; each lane owns 8 consecutive samples of a row (any channels, taps
// C samples apart), two samples per 32-bit register as 16-bit lanes. Per
// input row:
//  1. fetch: the lane's 8 samples of the first stencil's input (for a
//     fused gray conversion, 24 bytes of BGR and ColorOp's arithmetic),
//     through the first stencil's border rule;
//  2. the first stencil's column sums over a ring of the last 5 input rows
//     in registers, to shared memory; after a __syncwarp each lane forms its
//     8 row sums from its neighbours' columns and finish()es them: one
//     intermediate row, stored as the unfused graph stores it;
//  3. intermediate samples outside the image: the consumer's border rule,
//     copied from the lanes that hold the samples it maps to (edge warps
//     only, offsets resolved once);
//  4. the consumer's column sums over a ring of the last 5 intermediate
//     rows, to shared memory, its row sums and finish(), stored.
// The row loop is unrolled 5 times, so ring slots are constants. Output
// rows whose window crosses the image's top or bottom read the rows that
// the consumer's border rule maps to, picked from the ring at run time.
// Lane 0 and 31 supply halo columns of the first stencil only, lanes 1 and
// 30 those of the consumer: a warp outputs 28 * 8 samples of a row.
// Integer sums are exact in any order and every finish() is the op's own,
// so the outputs equal running the two nodes, bit for bit.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "filters/cuda_order.cuh"
#include "filters/cuda_stream8.cuh"
#include "filters/ops.hpp"

namespace cbi::cuda {

inline constexpr int kChainRing = 5;  // rows in each stage's ring: the largest kernel size taken
inline constexpr int kChainHaloLanes = 2;  // lanes at each end of a warp that only feed others (one per stencil)
inline constexpr int kChainMaxWarps = 8;  // per block; three blocks of them per SM leave 85 registers a thread
inline constexpr int kChainChunk = (32 - 2 * kChainHaloLanes) * kStream8Bytes;  // samples of a row a warp outputs

// The first stencils the kernel takes: the 8-bit stream kernel's smoothing
// filters (blur and Gaussian: one pass, non-negative weights), which
// usually come before another stencil.
template <class Op>
inline constexpr bool kChainFirst = kStream8Op<Op> && !MayRunTwoPasses<Op>;

// A warp's shared memory.
template <int P2>
struct ChainWarpStorage {
    uint4 col1[34];                 // the first stencil's column sums of a row; lane l at l + 1
    uint4 col2[P2][34];             // the consumer's, per pass
    unsigned long long mid[32];     // an intermediate row, for the border copies (edge warps)
    int fetch_offsets[32][kStream8Bytes];  // per lane: each sample's offset in its input row (-1: the constant)
    int copy_from[32][kStream8Bytes];      // per lane: each intermediate sample's source in `mid` (-1: the constant, -2: its own)
};

// Gray of 8 BGR pixels (24 bytes, little-endian words) by ColorOp's arithmetic.
__device__ __forceinline__ unsigned long long chain_gray8(const StorageMatrix& matrix, const unsigned long long (&w)[3]) {
    std::uint8_t px[24];
#pragma unroll
    for (int i = 0; i < 24; ++i) px[i] = static_cast<std::uint8_t>(w[i / 8] >> (8 * (i % 8)));
    unsigned long long out = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) out |= static_cast<unsigned long long>(ColorOp<std::uint8_t>::sample(matrix, px + 3 * i, 0, 1)) << (8 * i);
    return out;
}

// v as 16-bit lanes picked from ring slot s (a run-time index: selects, not local memory).
__device__ __forceinline__ void chain_pick(const std::uint32_t (&ring)[kChainRing][4], int s, std::uint32_t (&v)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        v[i] = ring[0][i];
#pragma unroll
        for (int q = 1; q < kChainRing; ++q) v[i] = s == q ? ring[q][i] : v[i];
    }
}

// The kernel. Pre: the first stencil (K1 = 5: smaller kernels take zero
// taps at the ends); Op: the consumer, K2 x K2 with P2 passes; C:
// intermediate channels; kGray: Pre's source converts 3-channel BGR to gray.
template <class Pre, class Op, int K2, int C, int P2, bool kGray>
__global__ void __launch_bounds__(kChainMaxWarps * 32, 3) chain_stream(const __grid_constant__ Pre pre, const __grid_constant__ Op op,
                             const __grid_constant__ Stream8Taps<1, kChainRing> taps1, const __grid_constant__ Stream8Taps<P2, K2> taps2,
                             int strip_h, int strips_y, const TileOrder order) {
    constexpr int K1 = kChainRing, R = kChainRing, G = kStream8Bytes;
    constexpr int h1 = K1 / 2, h2 = K2 / 2;
    static_assert(stream8_halo_lanes(K1, C) == 1 && stream8_halo_lanes(K2, C) == 1);
    constexpr bool biased = requires { op.mode; };  // Sobel: negative weights
    constexpr int CI = kGray ? 3 : 1;  // input bytes per intermediate sample
    extern __shared__ __align__(16) uint4 chain_smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    ChainWarpStorage<P2>& ws = reinterpret_cast<ChainWarpStorage<P2>*>(chain_smem)[warp];
    const int width = op.dst.width, height = op.dst.height, row_bytes = width * C;
    Stream8Strips strips;
    if (!stream8_strips(row_bytes, kChainChunk, strips_y, order, strips)) return;  // the whole block
    // The warp's samples of a row: [b0, b0 + 256); this lane's [b, b + 8).
    const int b0 = (strips.x * (blockDim.x >> 5) + warp) * kChainChunk - kChainHaloLanes * G;
    const int b = b0 + lane * G;
    const bool outputs = lane >= kChainHaloLanes && lane < 32 - kChainHaloLanes && b < row_bytes;
    const bool needed = b < row_bytes + (h1 + h2) * C;  // some output reads this lane's input
    const ImageView& in = [&]() -> const ImageView& {
        if constexpr (kGray) return pre.src.input;
        else return pre.src.view;
    }();
    const bool fast_load = b >= 0 && b + G <= row_bytes && ((reinterpret_cast<std::uintptr_t>(in.data) | in.stride) & 7) == 0;
    const bool fast_store = b + G <= row_bytes && ((reinterpret_cast<std::uintptr_t>(op.dst.data) | op.dst.stride) & 7) == 0;
    const Stream8Lane ln{b, outputs, needed, fast_load, fast_store};
    const bool edge_warp = b0 + G < 0 || b0 + 31 * G > row_bytes;  // its intermediate samples cross the image's sides
    const unsigned long long const1 = 0x0101010101010101ull * static_cast<std::uint8_t>(pre.src.constant);
    const unsigned long long const2 = 0x0101010101010101ull * static_cast<std::uint8_t>(op.src.constant);
    int(&fetch_offsets)[G] = ws.fetch_offsets[lane];
    int(&copy_from)[G] = ws.copy_from[lane];
    if (!fast_load && needed)
#pragma unroll 1
        for (int i = 0; i < G; ++i) {  // through the first stencil's border rule
            const int q = b + i;
            const int px = (q + 4 * G * C) / C - 4 * G;  // floor(q / C): q >= -2 * G
            const int x = border_index(pre.src.mode, px, width);
            fetch_offsets[i] = x < 0 ? -1 : kGray ? x * 3 : x * C + (q - px * C);
        }
    if (edge_warp)
#pragma unroll 1
        for (int i = 0; i < G; ++i) {  // through the consumer's border rule, from the warp's row
            const int q = b + i;
            const int px = (q + 4 * G * C) / C - 4 * G;
            const bool read = px >= -h2 && px < width + h2;  // an output reads it
            const int x = border_index(op.src.mode, px, width);
            copy_from[i] = (q >= 0 && q < row_bytes) || !read ? -2 : x < 0 ? -1 : x * C + (q - px * C) - b0;
        }
    // The lane's 8 samples of input row r (the gray of 8 pixels with kGray).
    const auto fetch = [&](int r) -> unsigned long long {
        const std::uint8_t* row = pre.src.row(r);
        if (row == nullptr) return const1;
        if (fast_load) {
            const auto* p = reinterpret_cast<const unsigned long long*>(row + b * CI);
            if constexpr (kGray) {
                const unsigned long long w[3] = {__ldg(p), __ldg(p + 1), __ldg(p + 2)};
                return chain_gray8(pre.src.matrix, w);
            } else {
                return __ldg(p);
            }
        }
        if (!needed) return 0;
        unsigned long long v = 0;
#pragma unroll
        for (int i = 0; i < G; ++i) {
            const int at = fetch_offsets[i];
            std::uint8_t s;
            if constexpr (kGray) s = at < 0 ? static_cast<std::uint8_t>(pre.src.constant) : ColorOp<std::uint8_t>::sample(pre.src.matrix, row + at, 0, 1);
            else s = at < 0 ? static_cast<std::uint8_t>(pre.src.constant) : row[at];
            v |= static_cast<unsigned long long>(s) << (8 * i);
        }
        return v;
    };

    for (int sy = strips.first; sy < strips.end; sy += strips.step) {
        const int y0 = sy * strip_h, y_end = min(y0 + strip_h, height);
        // Intermediate rows m_first .. m_last; input rows from m_first - h1.
        const int m_first = max(0, y0 - h2), m_last = min(height - 1, y_end - 1 + h2);
        const int r_first = m_first - h1;
        // Input row r in ring1 slot (r - r_first) % R, intermediate row m in ring2 slot (m - m_first) % R.
        std::uint32_t ring1[R][4], ring2[R][4];
        with_slots<2 * h1>([&](auto s) { to_lanes(fetch(r_first + s()), ring1[s()]); });
        for (int m0 = m_first; m0 <= m_last; m0 += R) {
            // Loads of the batch's input rows in flight together (rows inside the image, whole-word lanes).
            const bool direct = fast_load && m0 + h1 + R - 1 < height && m0 + R - 1 <= m_last;
            unsigned long long batch[R];
            if (direct) {
                unsigned long long words[R][CI];
                with_slots<R>([&](auto j) {
                    const auto* p = reinterpret_cast<const unsigned long long*>(in.template row<const std::uint8_t>(m0 + j() + h1) + b * CI);
#pragma unroll
                    for (int w = 0; w < CI; ++w) words[j()][w] = __ldg(p + w);
                });
                with_slots<R>([&](auto j) {
                    if constexpr (kGray) batch[j()] = chain_gray8(pre.src.matrix, words[j()]);
                    else batch[j()] = words[j()][0];
                });
            }
            with_slots<R>([&](auto jc) {
                constexpr int j = jc();
                const int m = m0 + j;
                if (m > m_last) return;
                // 1. + 2. Input row m + h1 into ring1, intermediate row m out.
                unsigned long long bytes;
                if (direct) {
                    bytes = batch[j];
                } else {
                    bytes = fetch(m + h1);
                }
                to_lanes(bytes, ring1[(j + 2 * h1) % R]);
                std::uint32_t col1[1][4];
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    std::uint32_t s = 0;
#pragma unroll
                    for (int t = 0; t < K1; ++t) s += taps1.y[0][t] * ring1[(j + t) % R][i];
                    col1[0][i] = s;
                }
                stream8_store_columns(ws.col1 + 1, 0, lane, col1);
                __syncwarp();
                unsigned long long mid = 0;
                if (lane > 0 && lane < 31) {
                    std::uint32_t acc[1][G];
                    stream8_row_sums<false, false, K1, C>(ws.col1 + 1, 0, lane, taps1, acc);
#pragma unroll
                    for (int o = 0; o < G; ++o) mid |= static_cast<unsigned long long>(pre.finish(acc[0] + o)) << (8 * o);
                }
                __syncwarp();
                // 3. The consumer's border across x.
                if (edge_warp) {
                    ws.mid[lane] = mid;
                    __syncwarp();
                    const auto* row = reinterpret_cast<const std::uint8_t*>(ws.mid);
                    unsigned long long fixed = 0;
#pragma unroll
                    for (int i = 0; i < G; ++i) {
                        const int from = copy_from[i];
                        const unsigned long long s = from == -2 ? (mid >> (8 * i)) & 0xff : from < 0 ? const2 & 0xff : row[from];
                        fixed |= s << (8 * i);
                    }
                    mid = fixed;
                    __syncwarp();
                }
                to_lanes(mid, ring2[j]);
                // 4. Output rows whose rows below are in: y = m - h2, and at the
                // image's last row every row left in the strip.
                const int ya = max(y0, m - h2), yb = m < height - 1 ? min(y_end, m - h2 + 1) : y_end;
#pragma unroll 1
                for (int y = ya; y < yb; ++y) {
                    std::uint32_t col2[P2][4];
#pragma unroll
                    for (int p = 0; p < P2; ++p)
#pragma unroll
                        for (int i = 0; i < 4; ++i) col2[p][i] = biased ? taps2.bias[p] * 0x00010001u : 0u;
                    if (y - h2 >= 0 && y + h2 == m) {  // rows y - h2 .. m: the ring's newest, constant slots
#pragma unroll
                        for (int t = 0; t < K2; ++t)
#pragma unroll
                            for (int p = 0; p < P2; ++p)
#pragma unroll
                                for (int i = 0; i < 4; ++i) col2[p][i] += taps2.y[p][t] * ring2[(j + R + t - (K2 - 1)) % R][i];
                    } else {  // rows through the border rule (within the ring's last R rows of m)
                        std::uint32_t c2[4];
                        to_lanes(const2, c2);
#pragma unroll
                        for (int t = 0; t < K2; ++t) {
                            const int mm = border_index(op.src.mode, y + t - h2, height);
                            std::uint32_t v[4];
                            chain_pick(ring2, (j + 2 * R - (m - max(mm, 0))) % R, v);
#pragma unroll
                            for (int p = 0; p < P2; ++p)
#pragma unroll
                                for (int i = 0; i < 4; ++i) col2[p][i] += taps2.y[p][t] * (mm < 0 ? c2[i] : v[i]);
                        }
                    }
                    stream8_store_columns(ws.col2[0] + 1, 34, lane, col2);
                    __syncwarp();
                    if (outputs) {
                        std::uint32_t acc[P2][G];
                        stream8_row_sums<false, biased, K2, C>(ws.col2[0] + 1, 34, lane, taps2, acc);
                        stream8_finish(op, ln, acc, y, row_bytes);
                    }
                    __syncwarp();
                }
            });
        }
    }
}

// Whether chain_stream takes the pair: an 8-bit blur or Gaussian of at
// most 5x5 first, then an 8-bit blur, Gaussian or Sobel of 3x3 or 5x5
// (equal sizes across passes and axes, column sums within 16-bit lanes);
// 1 or 3 channels, or gray of 3-channel BGR before the first; not wrap.
template <class Pre, class Op>
bool chain_stream_takes(const Pre& pre, const Op& op) {
    if constexpr (!kChainFirst<Pre> || !kStream8Op<Op>) {
        return false;
    } else {
        const int k1 = square_kernel_size(pre), k2 = square_kernel_size(op);
        if (k1 < 1 || k1 > kChainRing || (k2 != 3 && k2 != 5)) return false;
        if (!stream8_lanes_fit(pre) || !stream8_lanes_fit(op)) return false;
        const int c = op.dst.channels;
        if constexpr (!std::remove_cvref_t<decltype(pre.src)>::kStored) {
            if (c != 1 || pre.src.matrix.rows != 1 || pre.src.input.channels != 3) return false;
        }
        return c == 1 || c == 3;
    }
}

template <class Pre, class Op>
void launch_chain_stream(const StreamSchedule& strip, const Pre& pre, const Op& op, cudaStream_t stream, int block,
                         const TileOrder& order) {
    if constexpr (kChainFirst<Pre> && kStream8Op<Op>) {
        if (op.dst.empty()) return;
        constexpr bool gray = !std::remove_cvref_t<decltype(pre.src)>::kStored;
        const auto taps1 = stream8_taps<1, kChainRing>(pre);  // centred: zero at the ends of smaller kernels
        const auto go = [&](auto kc, auto cc, auto pc) {
            constexpr int K2 = kc(), C = cc(), P2 = pc();
            const auto s = Stream8Shape::of(strip, op.dst.width, op.dst.height, C, kChainChunk, sizeof(ChainWarpStorage<P2>),
                                            kChainMaxWarps, block, order);
            chain_stream<Pre, Op, K2, C, P2, gray><<<s.grid, s.threads(), s.shared_bytes(), stream>>>(
                pre, op, taps1, stream8_taps<P2, K2>(op), s.strip_h, s.strips_y, order);
        };
        with_one_of<3, 5>(square_kernel_size(op), [&](auto kc) {
            const auto with_c = [&](auto cc) { with_passes(op, [&](auto pc) { go(kc, cc, pc); }); };
            if constexpr (gray) with_c(std::integral_constant<int, 1>{});
            else with_one_of<1, 3>(op.dst.channels, with_c);
        });
    }
}

}  // namespace cbi::cuda
