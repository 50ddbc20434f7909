#pragma once
// Fused 8-bit stencil pairs on stream:WxH: one kernel walks strips top to
// bottom and carries both stencils (and a gray conversion before the
// first, when one is fused) through line buffers, so the intermediate image
// never leaves the chip and each of its rows is computed once per strip.
//
// A warp walks a strip; each lane owns 8 consecutive samples of a row (any
// channels, taps C samples apart), held as four pair words: samples 2j and
// 2j + 1 in the low and high 16-bit lanes of word j, so one 32-bit add or
// multiply serves two samples in both passes of both stencils. Per input row:
//  1. fetch: the lane's 8 samples of the first stencil's input (for a
//     fused gray conversion, 24 bytes of BGR); lanes outside the image copy
//     theirs, through the first stencil's border rule, from the lanes that
//     hold them (edge warps only, offsets resolved once);
//  2. the first stencil's column sums, each input row adding its share to
//     the partial sums of the 5 intermediate rows that read it (registers);
//     its row sums from the lane's and its neighbours' column sums (warp
//     shuffles; odd sample offsets by a byte permute); finish(): one
//     intermediate row, as the unfused graph stores it;
//  3. intermediate samples outside the image: the consumer's border rule,
//     copied from the lanes that hold the samples it maps to (edge warps
//     only, offsets resolved once);
//  4. the consumer's column sums over a ring of its last K2 intermediate
//     rows, its row sums and finish(), stored.
// Packed sums stay exact when every 16-bit lane stays in 0 .. 65535
// (ChainTaps: weights divided by their common factor per axis, biases for
// negative weights; pairs that do not fit run unfused). The partial sums
// move down by the adds that extend them and the consumer's rows by
// register moves, so the row loop is one copy of its code. Output rows
// whose window crosses the image's top or bottom read the rows that the
// consumer's border rule maps to, picked from the ring at run time. The
// lanes at each end of a warp only supply halo columns (chain_halo_lanes:
// one for 1 channel, two for 3): a warp outputs 30 or 28 lanes' samples of
// a row. Integer sums are exact in any order and every finish() is the
// op's own, so the outputs equal running the two nodes, bit for bit.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <type_traits>

#include "filters/cuda/launch.cuh"
#include "filters/cuda/order.cuh"
#include "filters/cuda/strip8.cuh"
#include "filters/kinds/all.hpp"
#include "filters/ops.hpp"

namespace cbi::cuda {

inline constexpr int kChainRing = 5;      // the first stencil's kernel size: the largest taken (smaller get zero taps)
inline constexpr int kChainMaxWarps = 8;  // per block
inline constexpr int kChainRegisters = 72;  // per thread: the kernel's cap
// Lanes at each end of a warp that only feed others: an output's window
// reaches (h1 + h2) * C samples beyond it through both stencils (one lane
// for 1 channel, two for 3).
constexpr int chain_halo_lanes(int k2, int channels) {
    return ((kChainRing / 2 + k2 / 2) * channels + kStream8Bytes - 1) / kStream8Bytes;
}
constexpr int chain_chunk(int k2, int channels) {  // samples of a row a warp outputs
    return (32 - 2 * chain_halo_lanes(k2, channels)) * kStream8Bytes;
}

// The first stencils the kernel takes: the 8-bit stream kernel's smoothing
// filters (blur and Gaussian: one pass, non-negative weights), which
// usually come before another stencil.
template <class Op>
inline constexpr bool kChainFirst = kStream8Op<Op> && !MayRunTwoPasses<Op>;

// A stencil's integer weights for the packed sums, centred in K taps
// (smaller kernels get zeros at the ends): each axis divided by its
// weights' common factor, with biases that keep every 16-bit lane of a
// column sum and of a row sum in 0 .. 65535 for 8-bit samples. A lane of a
// row sum minus `offset`, times `scale`, is the pass's sum.
template <int P, int K>
struct ChainTaps {
    std::uint32_t x[P][K], y[P][K];  // 32-bit two's complement: the sums are exact modulo 2^32
    std::uint32_t col_bias[P];       // per lane of a column sum: 255 * the magnitude of y's negative weights
    std::uint32_t row_bias[P];       // per lane of a row sum: the magnitude of its most negative value
    std::int32_t offset[P];          // row_bias + col_bias * sum of x
    std::int32_t scale[P];           // the two common factors' product
    // One pass whose finish(sum) equals (lane + 2^(shift - 1)) >> shift for
    // every lane (chain_finish_shift): the kernel rounds both lanes of a
    // word at once. 0: finish() per sample.
    int shift;
};

// The shift k with op.finish((lane - offset) * scale) == (lane + 2^(k - 1))
// >> k for every lane value up to lane_max, or 0: where finish() is a
// rounding shift by S (Op::kRoundingShift: 8-bit Gaussians) and scale =
// 2^j (OpenCV's default-sigma weights have such common factors),
// (lane * 2^j + 2^(S - 1)) >> S = (lane + 2^(S - 1 - j)) >> (S - j). k <= 8
// and lane_max + 2^(k - 1) < 2^16, so that on a pair word the add carries
// nothing across lanes and the shifted high lane stays clear of the low
// lane's byte.
template <class Op>
int chain_finish_shift(std::int32_t offset, std::int32_t scale, std::uint32_t lane_max) {
    if constexpr (!requires { Op::kRoundingShift; }) {
        return 0;
    } else {
        if (offset != 0 || scale <= 0 || (scale & (scale - 1)) != 0) return 0;
        int k = Op::kRoundingShift;
        for (int s = scale; s > 1; s >>= 1) --k;
        return k >= 1 && k <= 8 && lane_max + (1u << (k - 1)) <= 65535 ? k : 0;
    }
}

// Ops that finish from their passes' sums as float (finish_gradients).
template <class Op>
inline constexpr bool kGradientFinish = requires(const Op& op, const float* g) {
    op.template finish_gradients<1>(g);
};

// op's ChainTaps, or none when a lane could leave 0 .. 65535 (or, for
// kGradientFinish ops, when the weights have a common factor).
template <int P, int K, class Op>
std::optional<ChainTaps<P, K>> chain_taps(const Op& op) {
    const Stream8Taps<P, K> t = stream8_taps<P, K>(op);
    ChainTaps<P, K> c{};
    std::int64_t row_span[P] = {};
    const auto common = [](const std::uint32_t* w) {
        int g = 0;
        for (int i = 0; i < K; ++i) g = std::gcd(g, static_cast<int>(w[i]));
        return g == 0 ? 1 : std::abs(g);
    };
    for (int p = 0; p < P; ++p) {
        const int gx = common(t.x[p]), gy = common(t.y[p]);
        std::int64_t col_max = 0, col_bias = 0, row_lo = 0, row_hi = 0, x_sum = 0;
        for (int i = 0; i < K; ++i) {
            const int wy = static_cast<int>(t.y[p][i]) / gy;
            c.y[p][i] = static_cast<std::uint32_t>(wy);
            col_max += 255 * std::abs(wy);
            if (wy < 0) col_bias += 255 * -wy;
        }
        for (int i = 0; i < K; ++i) {
            const int wx = static_cast<int>(t.x[p][i]) / gx;
            c.x[p][i] = static_cast<std::uint32_t>(wx);
            x_sum += wx;
            (wx < 0 ? row_lo : row_hi) += wx * col_max;  // column sums lie in 0 .. col_max
        }
        if (col_max > 65535 || row_hi - row_lo > 65535) return std::nullopt;
        row_span[p] = row_hi - row_lo;
        c.col_bias[p] = static_cast<std::uint32_t>(col_bias);
        c.row_bias[p] = static_cast<std::uint32_t>(-row_lo);
        c.offset[p] = static_cast<std::int32_t>(-row_lo + col_bias * x_sum);
        c.scale[p] = gx * gy;
        if (kGradientFinish<Op> && c.scale[p] != 1) return std::nullopt;
    }
    c.shift = P == 1 ? chain_finish_shift<Op>(c.offset[0], c.scale[0], static_cast<std::uint32_t>(row_span[0])) : 0;
    return c;
}

// A 3x3 Sobel magnitude's weight t of pass p across (x) or down (y), as
// chain_taps gives them (pass 0, gx: derivative across, smoothing down;
// pass 1, gy: the transpose), for kernels that take them as constants.
CBI_HOST_DEVICE constexpr std::uint32_t sobel3_mag_weight(bool across, int p, int t) {
    const bool smooth = across == (p == 1);
    return smooth ? (t == 1 ? 2u : 1u) : t == 0 ? ~0u : t == 1 ? 0u : 1u;
}

// The biases chain_taps gives those passes (col: ChainTaps::col_bias, else
// row_bias): gx's column sums have no negative weights and its row sums
// reach -4 * 255; gy's column sums reach -255 and its row sums none.
CBI_HOST_DEVICE constexpr std::uint32_t sobel3_mag_bias(bool col, int p) {
    return col ? (p == 1 ? 255u : 0u) : (p == 0 ? 1020u : 0u);
}

// OpenCV's 5-tap Gaussian of default sigma, (1 4 6 4 1) / 16 on each axis,
// as chain_taps gives it: weight t of either axis, and the shift that
// rounds its sums (chain_finish_shift), for kernels that take them as
// constants (multiplies by 1, 4 and 6 become adds and shifts); its
// weights are non-negative, so its biases are zero.
CBI_HOST_DEVICE constexpr std::uint32_t binomial5_weight(int t) {
    return t == 0 || t == 4 ? 1u : t == 2 ? 6u : 4u;
}
inline constexpr int kBinomial5Shift = 8;

// The shared memory of a warp: what the edge warps need.
struct ChainWarpStorage {
    // A row of the warp's samples (an input row, or the intermediate row),
    // then each stencil's border constant as 8 bytes (kChainConstant1, 2):
    // what lanes copy samples from.
    unsigned long long row[34];
    // Per lane and sample: the byte of `row` it is copied from. [0]: input
    // samples of lanes outside the image; [1]: intermediate samples (edge warps).
    std::uint16_t copy_from[2][32][kStream8Bytes];
    int fetch_offsets
        [32][kStream8Bytes];  // per lane read byte by byte: each sample's offset in its input row (-1: the constant)
};
inline constexpr int kChainConstant1 = 32 * kStream8Bytes, kChainConstant2 = 33 * kStream8Bytes;

// The lane's 8 samples copied from a warp's row (stored, and synced, by
// the caller): byte i from ws.row's byte from[i].
__device__ __forceinline__ unsigned long long chain_copy(const ChainWarpStorage& ws,
                                                         const std::uint16_t (&from)[kStream8Bytes]) {
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(ws.row);
    std::uint32_t word[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // a word at a time: few registers
        const uint2 at = reinterpret_cast<const uint2*>(from)[h];
        const std::uint32_t b0 = bytes[at.x & 0xffffu], b1 = bytes[at.x >> 16], b2 = bytes[at.y & 0xffffu],
                            b3 = bytes[at.y >> 16];
        word[h] = __byte_perm(__byte_perm(b0, b1, 0x0040), __byte_perm(b2, b3, 0x0040), 0x5410);
    }
    return word[0] | static_cast<unsigned long long>(word[1]) << 32;
}

// 8 bytes as pair words (samples 2j, 2j + 1 in word j's 16-bit lanes), and back.
__device__ __forceinline__ void to_pairs(unsigned long long v, std::uint32_t (&w)[4]) {
    const std::uint32_t lo = static_cast<std::uint32_t>(v), hi = static_cast<std::uint32_t>(v >> 32);
    w[0] = __byte_perm(lo, 0, 0x4140);
    w[1] = __byte_perm(lo, 0, 0x4342);
    w[2] = __byte_perm(hi, 0, 0x4140);
    w[3] = __byte_perm(hi, 0, 0x4342);
}
__device__ __forceinline__ unsigned long long from_pairs(const std::uint32_t (&w)[4]) {
    return __byte_perm(w[0], w[1], 0x6420) | static_cast<unsigned long long>(__byte_perm(w[2], w[3], 0x6420)) << 32;
}

// The weights of a gray conversion in units of 2^-15 (q0, q1, q2 for bytes
// B, G, R), as the 16-bit pairs that __dp2a_lo and __dp2a_hi multiply two
// bytes of a word by: a BGR pixel starts at byte 0, 3, 2 or 1 of a word, so
// its bytes meet these in four patterns.
struct ChainGray {
    std::uint32_t q01, q2_, q_0, q12;  // (q0, q1), (q2, 0), (0, q0), (q1, q2), low half first
};

// The gray conversion the kernel computes in its exact form
// (chain_gray_pairs), or none: one row of weights that are multiples of
// 2^-15, non-negative, summing to at most 1, and the offset kGrayHalfUp
// (the 8-bit `gray` preset: cv::cvtColor's weights and rounding).
inline std::optional<ChainGray> chain_gray(const StorageMatrix& m) {
    if (m.rows != 1 || m.step != 1 || m.copy || m.m[0][3] != kGrayHalfUp) return std::nullopt;
    std::uint32_t q[3];
    double sum = 0;
    for (int c = 0; c < 3; ++c) {
        const double w = static_cast<double>(m.m[0][c]) * 32768.0;
        if (w < 0 || w != std::floor(w)) return std::nullopt;
        q[c] = static_cast<std::uint32_t>(w);
        sum += w;
    }
    if (sum > 32768.0) return std::nullopt;
    return ChainGray{q[0] | q[1] << 16, q[2], q[0] << 16, q[1] | q[2] << 16};
}

// Gray of 8 BGR pixels (24 bytes, little-endian words) as pair words
// (pixels 2j, 2j + 1 in word j's 16-bit lanes), for a matrix that
// chain_gray gives: ColorOp::sample's products and sums are then
// exact (multiples of 2^-15 below 256), so the integer sum s of bytes times
// weights in 2^-15 is the same value. Two dot-product instructions a pixel
// (each two bytes times two 16-bit weights), where floats took three
// conversions and three multiplies. They start from 2^14, and a shift
// gives (s + 2^14) >> 15: s / 2^15 + 2^-16 (the matrix's kGrayHalfUp)
// rounded to nearest, which is never a tie, as saturate_round gives it.
__device__ __forceinline__ void chain_gray_pairs(const ChainGray& g, const unsigned long long (&w)[3],
                                                 std::uint32_t (&out)[4]) {
    constexpr std::uint32_t kHalf = 1u << 14;  // half of the result's unit, in 2^-15
    std::uint32_t s[8];
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // pixels 4h .. 4h + 3: bytes 12h .. 12h + 11, words a, b, c
        const unsigned long long lo = w[h == 0 ? 0 : 1], hi = w[h == 0 ? 1 : 2];
        const std::uint32_t a = static_cast<std::uint32_t>(h == 0 ? lo : lo >> 32);
        const std::uint32_t b = static_cast<std::uint32_t>(h == 0 ? lo >> 32 : hi);
        const std::uint32_t c = static_cast<std::uint32_t>(h == 0 ? hi : hi >> 32);
        s[4 * h + 0] = __dp2a_hi(g.q2_, a, __dp2a_lo(g.q01, a, kHalf));  // bytes 0 1 | 2
        s[4 * h + 1] = __dp2a_lo(g.q12, b, __dp2a_hi(g.q_0, a, kHalf));  // 3 | 4 5
        s[4 * h + 2] = __dp2a_lo(g.q2_, c, __dp2a_hi(g.q01, b, kHalf));  // 6 7 | 8
        s[4 * h + 3] = __dp2a_hi(g.q12, c, __dp2a_lo(g.q_0, c, kHalf));  // 9 | 10 11
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) s[i] >>= 15;  // gray
#pragma unroll
    for (int j = 0; j < 4; ++j) out[j] = __byte_perm(s[2 * j], s[2 * j + 1], 0x5410);  // gray < 256: bytes 1 are zero
}

// v as pair words picked from ring slot s (a run-time index: selects, not local memory).
template <int R>
__device__ __forceinline__ void chain_pick(const std::uint32_t (&ring)[R][4], int s, std::uint32_t (&v)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        v[i] = ring[0][i];
#pragma unroll
        for (int q = 1; q < R; ++q) v[i] = s == q ? ring[q][i] : v[i];
    }
}

// Row pass: each pass's row sums of the lane's 8 outputs (pair words) from
// its column sums and its neighbours' (taps C samples apart), with weights
// wx(p, t) and biases bias(p). Every lane of the warp must call it; lanes 0
// and 31 get sums of their own columns where a neighbour's belong, which no
// output reads.
template <int K, int C, int P, class WX, class B>
__device__ __forceinline__ void chain_row_sums(const std::uint32_t (&col)[P][4], const WX& wx, const B& bias,
                                               std::uint32_t (&out)[P][4]) {
    constexpr int h = K / 2, NW = (h * C + 1) / 2;  // words of each neighbour read
    static_assert(NW <= 4, "one neighbour lane on each side");
#pragma unroll
    for (int p = 0; p < P; ++p) {
        std::uint32_t ext[4 + 2 * NW];  // the left neighbour's last NW words, the lane's, the right one's first NW
#pragma unroll
        for (int n = 0; n < NW; ++n) {
            ext[n] = __shfl_up_sync(0xffffffffu, col[p][4 - NW + n], 1);
            ext[NW + 4 + n] = __shfl_down_sync(0xffffffffu, col[p][n], 1);
        }
#pragma unroll
        for (int n = 0; n < 4; ++n) ext[NW + n] = col[p][n];
        const auto pair_at = [&](int s) {  // samples s and s + 1 of the lane's (s a constant, may be negative)
            const int q = s + 2 * NW;
            return q % 2 == 0 ? ext[q / 2] : __byte_perm(ext[q / 2], ext[q / 2 + 1], 0x5432);
        };
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            std::uint32_t s = bias(p) * 0x00010001u;
#pragma unroll
            for (int t = 0; t < K; ++t) s += wx(p, t) * pair_at(2 * j + (t - h) * C);
            out[p][j] = s;
        }
    }
}

// The op's finish of the lane's 8 outputs from each pass's row sums, as 8
// bytes. Ops that finish from float sums (Sobel: chain_taps gives them
// scale 1) get each lane as 2^23 + lane, less 2^23 + offset: exact.
template <class Op, int P, int K>
__device__ __forceinline__ unsigned long long chain_finish(const Op& op, const std::uint32_t (&sums)[P][4],
                                                           const ChainTaps<P, K>& taps) {
    using Acc = typename Op::Acc;
    unsigned long long out = 0;
#pragma unroll
    for (int o = 0; o < kStream8Bytes; ++o) {
        std::uint8_t v;
        if constexpr (kGradientFinish<Op>) {
            float g[Op::kMaxPasses] = {};
#pragma unroll
            for (int p = 0; p < P; ++p) {
                const std::uint32_t w = sums[p][o / 2];  // the high lane by one shift-and-add
                const std::uint32_t bits = o % 2 == 0 ? __byte_perm(w, 0x4b000000u, 0x7610) : (w >> 16) + 0x4b000000u;
                g[p] = __uint_as_float(bits) - (8388608.f + static_cast<float>(taps.offset[p]));
            }
            v = op.template finish_gradients<P>(g);
        } else {
            Acc a[Op::kMaxPasses] = {};
#pragma unroll
            for (int p = 0; p < P; ++p) {
                const std::uint32_t w = sums[p][o / 2];
                const int lane = static_cast<int>(o % 2 == 0 ? w & 0xffffu : w >> 16);
                a[p] = static_cast<Acc>(
                    static_cast<std::int32_t>(static_cast<std::uint32_t>(lane - taps.offset[p]) *
                                              static_cast<std::uint32_t>(taps.scale[p])));  // modulo 2^32
            }
            v = op.finish(a);
        }
        out |= static_cast<unsigned long long>(v) << (8 * o);
    }
    return out;
}

// The kernel. Pre: the first stencil (K1 = 5: smaller kernels take zero
// taps at the ends); Op: the consumer, K2 x K2 with P2 passes; C:
// intermediate channels; kGray: Pre's source converts 3-channel BGR to gray.
// kSobel3: the consumer's weights and biases are sobel3_mag_weight's and
// sobel3_mag_bias's (with_chain_stream_kernel checks), constants whose zero
// and unit weights cost no multiply and zero biases no add; kBinomial5: the
// first stencil's are binomial5_weight's, its biases zero.
// Registers limit the warps an SM holds; kChainRegisters trades warps an SM
// against spills (docs/performance.md#register-caps).
template <class Pre, class Op, int K2, int C, int P2, bool kGray, bool kSobel3, bool kBinomial5>
__global__ void __maxnreg__(kChainRegisters)
    chain_stream(const __grid_constant__ Pre pre, const __grid_constant__ Op op,
                 const __grid_constant__ ChainTaps<1, kChainRing> taps1,
                 const __grid_constant__ ChainTaps<P2, K2> taps2, const ChainGray gray, int strip_h, int strips_y,
                 const TileOrder order) {
    constexpr int K1 = kChainRing, R2 = K2, G = kStream8Bytes;
    constexpr int h1 = K1 / 2, h2 = K2 / 2;
    static_assert(stream8_halo_lanes(K1, C) == 1 && stream8_halo_lanes(K2, C) == 1);
    constexpr int CI = kGray ? 3 : 1;  // input bytes per intermediate sample
    extern __shared__ __align__(16) uint4 chain_smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    ChainWarpStorage& ws = reinterpret_cast<ChainWarpStorage*>(chain_smem)[warp];
    const int width = op.dst.width, height = op.dst.height, row_bytes = width * C;
    Stream8Strips strips;
    constexpr int HL = chain_halo_lanes(K2, C), chunk = chain_chunk(K2, C);
    if (!stream8_strips(row_bytes, chunk, strips_y, order, strips)) return;  // the whole block
    // The warp's samples of a row: [b0, b0 + 256); this lane's [b, b + 8).
    const int b0 = (strips.x * (blockDim.x >> 5) + warp) * chunk - HL * G;
    if (b0 + HL * G >= row_bytes) return;  // a block's last warps may have no outputs (warps share no barrier)
    const int b = b0 + lane * G;
    const bool outputs = lane >= HL && lane < 32 - HL && b < row_bytes;
    const bool needed = b < row_bytes + (h1 + h2) * C;  // some output reads this lane's input
    const ImageView& in = [&]() -> const ImageView& {
        if constexpr (kGray)
            return pre.src.input;
        else
            return pre.src.view;
    }();
    const bool fast_load =
        b >= 0 && b + G <= row_bytes && ((reinterpret_cast<std::uintptr_t>(in.data) | in.stride) & 7) == 0;
    const bool fast_store =
        b + G <= row_bytes && ((reinterpret_cast<std::uintptr_t>(op.dst.data) | op.dst.stride) & 7) == 0;
    // Its outputs' windows reach intermediate samples outside the image (h2 * C <= G): a row's first warp, or one near its end.
    const bool edge_warp = b0 < 0 || b0 + (33 - HL) * G > row_bytes;
    const unsigned long long const1 = 0x0101010101010101ull * static_cast<std::uint8_t>(pre.src.constant);
    const unsigned long long const2 = 0x0101010101010101ull * static_cast<std::uint8_t>(op.src.constant);
    if (lane == 0)
        ws.row[kChainConstant1 / G] = const1,
                                 ws.row[kChainConstant2 / G] = const2;  // rows stored later keep to [0, 32)
    const auto w1 = [&](bool across, int t) {
        return kBinomial5 ? binomial5_weight(t) : across ? taps1.x[0][t] : taps1.y[0][t];
    };
    const int shift1 = kBinomial5 ? kBinomial5Shift : taps1.shift;
    const auto wx2 = [&](int p, int t) { return kSobel3 ? sobel3_mag_weight(true, p, t) : taps2.x[p][t]; };
    // Constant biases where the weights are (zero ones cost no add).
    const std::uint32_t col_bias1 = kBinomial5 ? 0u : taps1.col_bias[0],
                        row_bias1 = kBinomial5 ? 0u : taps1.row_bias[0];
    const auto col_bias2 = [&](int p) { return kSobel3 ? sobel3_mag_bias(true, p) : taps2.col_bias[p]; };
    const auto row_bias2 = [&](int p) { return kSobel3 ? sobel3_mag_bias(false, p) : taps2.row_bias[p]; };
    const auto wy2 = [&](int p, int t) { return kSobel3 ? sobel3_mag_weight(false, p, t) : taps2.y[p][t]; };
    int(&fetch_offsets)[G] = ws.fetch_offsets[lane];
    // Lanes of edge warps wholly outside the image copy their input samples
    // (through the first stencil's border rule) from the lanes of the warp
    // that load them, far fewer instructions than reading them byte by byte
    // (docs/performance.md#edge-warps). Other lanes without
    // 8-byte loads (a row's last bytes, unaligned rows, and a halo lane past
    // the row's end in a warp whose outputs end 8 bytes before it) read
    // byte by byte.
    bool copies = edge_warp && !fast_load && (b >= row_bytes || b + G <= 0);
    if (!fast_load)
#pragma unroll 1
        for (int i = 0; i < G; ++i) {  // through the first stencil's border rule
            const int q = b + i;
            const int px = (q + 4 * G * C) / C - 4 * G;  // floor(q / C): q >= -2 * G
            const int x = border_index(pre.src.mode, px, width);
            fetch_offsets[i] = x < 0 ? -1 : kGray ? x * 3 : x * C + (q - px * C);
            const bool read = q >= -(h1 + h2) * C && q < row_bytes + (h1 + h2) * C;  // an output reads it
            const int from = !read || x < 0 ? kChainConstant1 : x * C + (q - px * C) - b0;
            copies =
                copies && from >= 0 && from <= kChainConstant1;  // a lane inside the image holds it, or the constant
            ws.copy_from[0][lane][i] = static_cast<std::uint16_t>(from);
        }
    if (edge_warp)
#pragma unroll 1
        for (int i = 0; i < G; ++i) {  // through the consumer's border rule, from the warp's row
            const int q = b + i;
            const int px = (q + 4 * G * C) / C - 4 * G;
            const bool read = px >= -h2 && px < width + h2;  // an output reads it
            const int x = border_index(op.src.mode, px, width);
            const int from = (q >= 0 && q < row_bytes) || !read ? lane * G + i
                             : x < 0                            ? kChainConstant2
                                                                : x * C + (q - px * C) - b0;
            ws.copy_from[1][lane][i] = static_cast<std::uint16_t>(from);
        }
    // The lane's 8 samples of input row r as pair words (the gray of 8 pixels with kGray).
    const auto fetch = [&](int r, std::uint32_t(&pairs)[4]) {
        const std::uint8_t* row = pre.src.row(r);
        if (row == nullptr) return to_pairs(const1, pairs);
        if (fast_load) {
            const auto* p = reinterpret_cast<const unsigned long long*>(row + b * CI);
            if constexpr (kGray) {
                const unsigned long long w[3] = {__ldg(p), __ldg(p + 1), __ldg(p + 2)};
                return chain_gray_pairs(gray, w, pairs);
            } else {
                return to_pairs(__ldg(p), pairs);
            }
        }
        if (!needed) return to_pairs(0, pairs);
        unsigned long long v = 0;
#pragma unroll
        for (int i = 0; i < G; ++i) {
            const int at = fetch_offsets[i];
            std::uint8_t s;
            if constexpr (kGray)
                s = at < 0 ? static_cast<std::uint8_t>(pre.src.constant)
                           : ColorOp<std::uint8_t>::sample(pre.src.matrix, row + at, 0, 1);
            else
                s = at < 0 ? static_cast<std::uint8_t>(pre.src.constant) : row[at];
            v |= static_cast<unsigned long long>(s) << (8 * i);
        }
        to_pairs(v, pairs);
    };
    // Without its load ahead: fetch, or nothing for lanes that copy.
    const auto fetched = [&](int r, std::uint32_t(&pairs)[4]) {
        if (!copies) return fetch(r, pairs);
#pragma unroll
        for (int i = 0; i < 4; ++i) pairs[i] = 0;
    };
    // Every lane of an edge warp (where the lanes that copy are), after its
    // own samples of a row: the copying lanes' samples.
    const auto copy_input = [&](std::uint32_t(&pairs)[4]) {
        ws.row[lane] = from_pairs(pairs);
        __syncwarp();
        if (copies) to_pairs(chain_copy(ws, ws.copy_from[0][lane]), pairs);
        __syncwarp();
    };

    for (int sy = strips.first; sy < strips.end; sy += strips.step) {
        const int y0 = sy * strip_h, y_end = min(y0 + strip_h, height);
        // Intermediate rows m_first .. m_last; input rows from m_first - h1.
        const int m_first = max(0, y0 - h2), m_last = min(height - 1, y_end - 1 + h2);
        // The first stencil keeps no rows: part[j] holds the part of the column
        // sums of intermediate row n - h1 + 1 + j that input rows up to n
        // give (n: the last row fed), and each row fed adds its share to
        // every part, moving it down one, so no row is moved and the row loop
        // is one copy of its code (unrolled for constant ring slots, it
        // outgrew the instruction cache). Weights are non-negative
        // (kChainFirst), so every part is a partial sum of a column sum and
        // fits its 16-bit lanes as well. ring2[t] holds intermediate row
        // m - (K2 - 1) + t, oldest first (every row an output of row m reads,
        // through the border rule too, is one of these); its rows move down a
        // slot per row.
        std::uint32_t part[K1 - 1][4] = {}, ring2[R2][4] = {};
        const auto feed = [&](const std::uint32_t(&v)[4], std::uint32_t(&col)[4]) {  // col: row n - h1's column sums
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                col[i] = part[0][i] + w1(false, K1 - 1) * v[i];
#pragma unroll
                for (int j = 0; j + 2 < K1; ++j) part[j][i] = part[j + 1][i] + w1(false, K1 - 2 - j) * v[i];
                part[K1 - 2][i] = col_bias1 * 0x00010001u + w1(false, 0) * v[i];
            }
        };
        // Input rows inside the image on whole-word lanes load a row ahead.
        const auto direct = [&](int r) { return fast_load && r < height; };
        const auto load = [&](int r, unsigned long long(&words)[CI]) {
            const auto* p =
                reinterpret_cast<const unsigned long long*>(in.template row<const std::uint8_t>(r) + b * CI);
#pragma unroll
            for (int w = 0; w < CI; ++w) words[w] = __ldg(p + w);
        };
        const auto to_samples = [&](const unsigned long long(&words)[CI], std::uint32_t(&v)[4]) {
            if constexpr (kGray)
                chain_gray_pairs(gray, words, v);
            else
                to_pairs(words[0], v);
        };
        unsigned long long ahead[CI];
        std::uint32_t unused[4];
        if (m_first - h1 >= 0 && direct(m_first + h1) && !edge_warp) {
            // The rings' first rows and the loop's first row: every load in
            // flight at once, not one latency after the other.
            unsigned long long first[K1 - 1][CI];
#pragma unroll
            for (int i = 0; i < K1 - 1; ++i) load(m_first - h1 + i, first[i]);
            load(m_first + h1, ahead);
#pragma unroll
            for (int i = 0; i < K1 - 1; ++i) {
                std::uint32_t v[4];
                to_samples(first[i], v);
                feed(v, unused);
            }
        } else {
            // A row at a time, each loaded while the one before is fed. Edge
            // warps take this path with all their lanes, so that the lanes
            // that copy do it in step with the others (loading every row at
            // once here spilled registers).
            if (m_first - h1 >= 0 && direct(m_first - h1)) load(m_first - h1, ahead);
#pragma unroll 1
            for (int r = m_first - h1; r < m_first + h1; ++r) {
                std::uint32_t v[4];
                if (r >= 0 && direct(r))
                    to_samples(ahead, v);
                else
                    fetched(r, v);
                if (r + 1 >= 0 && direct(r + 1)) load(r + 1, ahead);
                if (edge_warp) copy_input(v);
                feed(v, unused);
            }
        }
#pragma unroll 1
        for (int m = m_first; m <= m_last; ++m) {
            // 1. + 2. Input row m + h1 in, intermediate row m out.
            std::uint32_t v[4], col1[1][4], row1[1][4];
            if (direct(m + h1))
                to_samples(ahead, v);
            else
                fetched(m + h1, v);
            if (edge_warp) copy_input(v);
            if (m < m_last && direct(m + 1 + h1)) load(m + 1 + h1, ahead);
            feed(v, col1[0]);
            chain_row_sums<K1, C>(
                col1, [&](int, int t) { return w1(true, t); }, [&](int) { return row_bias1; }, row1);
#pragma unroll
            for (int t = 0; t + 1 < R2; ++t)
#pragma unroll
                for (int i = 0; i < 4; ++i) ring2[t][i] = ring2[t + 1][i];
            std::uint32_t(&mid)[4] = ring2[R2 - 1];
            if (shift1) {  // both lanes of a word rounded at once
                const std::uint32_t half = (1u << (shift1 - 1)) * 0x00010001u;
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    if constexpr (kBinomial5)
                        mid[i] = __byte_perm(row1[0][i] + half, 0, 0x4341);  // a shift by 8: bytes 1 and 3
                    else
                        mid[i] = ((row1[0][i] + half) >> shift1) & 0x00ff00ffu;
            } else {
                to_pairs(chain_finish(pre, row1, taps1), mid);
            }
            // 3. The consumer's border across x.
            if (edge_warp) {
                ws.row[lane] = from_pairs(mid);
                __syncwarp();
                to_pairs(chain_copy(ws, ws.copy_from[1][lane]), mid);
                __syncwarp();
            }
            // 4. Output rows whose rows below are in: y = m - h2, and at the
            // image's last row every row left in the strip.
            const int ya = max(y0, m - h2), yb = m < height - 1 ? min(y_end, m - h2 + 1) : y_end;
#pragma unroll 1
            for (int y = ya; y < yb; ++y) {
                std::uint32_t col2[P2][4], row2[P2][4];
#pragma unroll
                for (int p = 0; p < P2; ++p)
#pragma unroll
                    for (int i = 0; i < 4; ++i) col2[p][i] = col_bias2(p) * 0x00010001u;
                if (y - h2 >= 0 && y + h2 == m) {  // rows y - h2 .. m: the ring
#pragma unroll
                    for (int t = 0; t < K2; ++t)
#pragma unroll
                        for (int p = 0; p < P2; ++p)
#pragma unroll
                            for (int i = 0; i < 4; ++i) col2[p][i] += wy2(p, t) * ring2[t][i];
                } else {  // rows through the border rule (rows m - 2 * h2 .. m, or from 0 in short images)
                    std::uint32_t c2[4];
                    to_pairs(const2, c2);
#pragma unroll
                    for (int t = 0; t < K2; ++t) {
                        const int mm = border_index(op.src.mode, y + t - h2, height);
                        std::uint32_t v[4];
                        chain_pick(ring2, R2 - 1 - (m - max(mm, 0)), v);
#pragma unroll
                        for (int p = 0; p < P2; ++p)
#pragma unroll
                            for (int i = 0; i < 4; ++i) col2[p][i] += wy2(p, t) * (mm < 0 ? c2[i] : v[i]);
                    }
                }
                chain_row_sums<K2, C>(col2, wx2, row_bias2, row2);
                if (outputs) {
                    const unsigned long long out = chain_finish(op, row2, taps2);
                    std::uint8_t* const dst = op.dst.template row<std::uint8_t>(y) + b;
                    if (fast_store) {
                        *reinterpret_cast<unsigned long long*>(dst) = out;
                    } else {
#pragma unroll
                        for (int o = 0; o < G; ++o)
                            if (b + o < row_bytes) dst[o] = static_cast<std::uint8_t>(out >> (8 * o));
                    }
                }
            }
        }
    }
}

// Whether chain_stream takes the pair: an 8-bit blur or Gaussian of at
// most 5x5 first, then an 8-bit blur, Gaussian or Sobel of 3x3 or 5x5
// (equal sizes across passes and axes), both with packed sums that fit
// 16-bit lanes (chain_taps: blurs, Sobel and Gaussians with OpenCV's
// default sigma do; other sigmas do not); 1 or 3 channels, or gray of
// 3-channel BGR before the first; not wrap.
template <class Pre, class Op>
bool chain_stream_takes(const Pre& pre, const Op& op) {
    if constexpr (!kChainFirst<Pre> || !kStream8Op<Op>) {
        return false;
    } else {
        const int k1 = square_kernel_size(pre), k2 = square_kernel_size(op);
        if (k1 < 1 || k1 > kChainRing || (k2 != 3 && k2 != 5)) return false;
        if (!chain_taps<1, kChainRing>(pre)) return false;
        bool fits = false;
        with_one_of<3, 5>(
            k2, [&](auto kc) { with_passes(op, [&](auto pc) { fits = chain_taps<pc(), kc()>(op).has_value(); }); });
        if (!fits) return false;
        const int c = op.dst.channels;
        if constexpr (!std::remove_cvref_t<decltype(pre.src)>::kStored) {
            if (c != 1 || pre.src.input.channels != 3 || !chain_gray(pre.src.matrix)) return false;
        }
        return c == 1 || c == 3;
    }
}

// Whether t's weights are wx(p, i) across and wy(p, i) down, and its
// biases bias(true, p) (column sums) and bias(false, p) (row sums), every
// pass and tap.
template <int P, int K, class WX, class WY, class B>
bool chain_taps_are(const ChainTaps<P, K>& t, const WX& wx, const WY& wy, const B& bias) {
    for (int p = 0; p < P; ++p) {
        if (t.col_bias[p] != bias(true, p) || t.row_bias[p] != bias(false, p)) return false;
        for (int i = 0; i < K; ++i)
            if (t.x[p][i] != wx(p, i) || t.y[p][i] != wy(p, i)) return false;
    }
    return true;
}

// Calls f(kernel, taps1, taps2, C, chunk) with the pair's kernel and both
// stencils' ChainTaps: its consumer's size, intermediate channels C, passes
// and weights (kSobel3 where the consumer's weights and biases are
// sobel3_mag_weight's and sobel3_mag_bias's; kBinomial5 where, before such
// a Sobel, the first stencil's are binomial5_weight's, its biases zero,
// rounded by kBinomial5Shift).
template <class Pre, class Op, class F>
void with_chain_stream_kernel(const Pre& pre, const Op& op, F&& f) {
    constexpr bool gray = !std::remove_cvref_t<decltype(pre.src)>::kStored;
    const auto taps1 = chain_taps<1, kChainRing>(pre);  // centred: zero at the ends of smaller kernels
    if (!taps1) throw std::logic_error("chain_stream: sums do not fit 16-bit lanes");
    const auto go = [&](auto kc, auto cc, auto pc) {
        constexpr int K2 = kc(), C = cc(), P2 = pc();
        const auto taps2 = chain_taps<P2, K2>(op);
        if (!taps2) throw std::logic_error("chain_stream: sums do not fit 16-bit lanes");
        const auto run = [&](auto kernel) { f(kernel, *taps1, *taps2, C, chain_chunk(K2, C)); };
        if constexpr (K2 == 3 && P2 == 2 && kGradientFinish<Op>) {
            const auto across = [](int p, int t) { return sobel3_mag_weight(true, p, t); };
            const auto down = [](int p, int t) { return sobel3_mag_weight(false, p, t); };
            if (chain_taps_are(*taps2, across, down, sobel3_mag_bias)) {
                const auto binomial = [](int, int t) { return binomial5_weight(t); };
                const auto zero = [](bool, int) { return 0u; };
                if constexpr (kGaussian8<Pre>)
                    if (taps1->shift == kBinomial5Shift && chain_taps_are(*taps1, binomial, binomial, zero))
                        return run(chain_stream<Pre, Op, K2, C, P2, gray, true, true>);
                return run(chain_stream<Pre, Op, K2, C, P2, gray, true, false>);
            }
        }
        run(chain_stream<Pre, Op, K2, C, P2, gray, false, false>);
    };
    with_one_of<3, 5>(square_kernel_size(op), [&](auto kc) {
        const auto with_c = [&](auto cc) { with_passes(op, [&](auto pc) { go(kc, cc, pc); }); };
        if constexpr (gray)
            with_c(std::integral_constant<int, 1>{});
        else
            with_one_of<1, 3>(op.dst.channels, with_c);
    });
}

template <class Pre, class Op>
void launch_chain_stream(const StreamSchedule& strip, const Pre& pre, const Op& op, cudaStream_t stream, int block,
                         const TileOrder& order) {
    if constexpr (kChainFirst<Pre> && kStream8Op<Op>) {
        if (op.dst.empty()) return;
        ChainGray gray_weights{};
        if constexpr (!std::remove_cvref_t<decltype(pre.src)>::kStored)
            gray_weights = chain_gray(pre.src.matrix).value();
        with_chain_stream_kernel(
            pre, op, [&](auto kernel, const auto& taps1, const auto& taps2, int channels, int chunk) {
                const auto s = Stream8Shape::of(strip, op.dst.width, op.dst.height, channels, chunk,
                                                sizeof(ChainWarpStorage), kChainMaxWarps, block, order);
                kernel<<<s.grid, s.threads(), s.shared_bytes(), stream>>>(pre, op, taps1, taps2, gray_weights,
                                                                          s.strip_h, s.strips_y, order);
            });
    }
}

// The strip heights a pair on the default table's schedule chooses from:
// the best measured at each size tried was among them (docs/performance.md#strip-heights).
inline constexpr int kChainStripHeights[] = {12, 16, 20, 24};

// The strip height of kChainStripHeights for the pair on strips `strip_w`
// wide (strip_height_by_waves: a strip also walks the K1 - 1 + K2 - 1 rows
// that fill both rings; `device` is the current one). 0 for pairs the
// kernel does not take.
template <class Pre, class Op>
int chain_stream_strip_height(int strip_w, const Pre& pre, const Op& op, int block, const TileOrder& order,
                              int device) {
    int best = 0;
    if constexpr (kChainFirst<Pre> && kStream8Op<Op>) {
        if (op.dst.empty() || !chain_stream_takes(pre, op)) return 0;
        const int halo = kChainRing - 1 + square_kernel_size(op) - 1;
        with_chain_stream_kernel(pre, op, [&](auto kernel, const auto&, const auto&, int channels, int chunk) {
            best = strip_height_by_waves(kChainStripHeights, halo, kernel, device, [&](int h) {
                return Stream8Shape::of(stream_schedule(strip_w, h), op.dst.width, op.dst.height, channels, chunk,
                                        sizeof(ChainWarpStorage), kChainMaxWarps, block, order);
            });
        });
    }
    return best;
}

}  // namespace cbi::cuda
