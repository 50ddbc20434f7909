#pragma once
// stream:WxH for 8-bit box, Gaussian and Sobel filters. The
// generic stream and sep kernels spend 69 (box 9x9) to 94 (Gaussian 9x9)
// thread instructions per 8-bit sample (Nsight Compute, H100); 1.5x the
// floor allows about 27. This kernel does the same sums in about a third:
//  - columns first: each lane owns 8 consecutive bytes of a row (any
//    channels) and walks down its strip; the vertical sums of two samples
//    share one 32-bit register as 16-bit lanes (bytes 0 and 2 of a word, and
//    1 and 3), so one integer add or multiply serves two samples. A pass
//    with negative weights (Sobel's derivative) adds a bias of 255 times
//    their magnitude, so every lane stays in 0 .. 255 * sum |w| < 2^16
//    (checked on launch: box 9 * 255, Gaussian 255 * 256); 32-bit arithmetic
//    is linear modulo 2^32, so lanes that end in range are exact;
//  - the lane's column sums go to shared memory in sample order, and after
//    a __syncwarp each lane forms its 8 outputs' row sums from its
//    neighbours' columns: a warp is independent of the others (no block
//    barriers), its outer lanes supply the halo columns only;
//  - rows stream through a ring of the last K rows in registers (the row
//    loop unrolled K times, so ring slots are constants), with a batch of K
//    rows' loads in flight; lanes at the image edges load byte by byte
//    through offsets resolved once per kernel.
// Integer sums are exact in any order, so outputs equal the per-pixel path
// (rows first) bit for bit; finish() is the op's own.
// The kernel's steps per batch of K rows: stream8_fetch (stage a row),
// stream8_column_sums and stream8_store_columns (column pass), then per row
// stream8_row_sums (row pass) and stream8_finish.
// Blends of 8-bit Gaussians (kStream8PairRows: unsharp masks, differences of
// Gaussians) sum rows two taps an instruction: their column sums are stored
// as words (col[q], col[q + C]) and dp2a weighs both halves (byte weights,
// checked on launch), skipping a smaller second Gaussian's zero weights
// (KB); and a blend with binary-fraction weights finishes two samples a
// register in integers (Stream8IntBlend).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "filters/cuda/launch.cuh"
#include "filters/cuda/strip.cuh"  // with_one_of, with_channels
#include "filters/kinds/all.hpp"
#include "filters/ops.hpp"
#include "filters/then.hpp"
#include "schedules/schedule.hpp"

namespace cbi::cuda {

// Stencil ops that opt in (Op::kStream8, ops.hpp).
template <class Op>
inline constexpr bool kStream8Op = op_trait_stream8<Op>();
// A blend of stream8 stencils of one source, or of one and the source (ops.hpp).
template <class A, class B>
inline constexpr bool kStream8Op<BlendedStencils<A, B>> = kStream8Op<A> &&
                                                          (std::is_same_v<B, SourceSample> || kStream8Op<B>);

// Ops with negative vertical weights (Op::kSignedWeights): their column sums carry a bias.
template <class Op>
inline constexpr bool kStream8Biased = op_trait_signed_weights<Op>();
template <class A, class B>
inline constexpr bool kStream8Biased<BlendedStencils<A, B>> = kStream8Biased<A> || kStream8Biased<B>;

inline constexpr int kStream8Bytes = 8;  // bytes of a row per lane: one 8-byte load

// Lanes at each end of a warp that only supply halo columns.
constexpr int stream8_halo_lanes(int k, int channels) {
    return ((k / 2) * channels + kStream8Bytes - 1) / kStream8Bytes;
}
// Bytes of a row that one warp outputs.
constexpr int stream8_chunk_bytes(int k, int channels) {
    return (32 - 2 * stream8_halo_lanes(k, channels)) * kStream8Bytes;
}

// Strip columns of a row of row_bytes: `warps` chunks of it each (host and device).
CBI_HOST_DEVICE constexpr int stream8_strips_x(int row_bytes, int chunk, int warps) {
    return ((row_bytes + chunk - 1) / chunk + warps - 1) / warps;
}

template <class Op>
inline constexpr bool kGaussian8 = false;
template <BorderMode B, class Src>
inline constexpr bool kGaussian8<GaussianOp<std::uint8_t, B, Src>> = true;
// Ops whose rows are summed over pairs of column sums (see above).
template <class Op>
inline constexpr bool kStream8PairRows = false;
template <class A, class B>
inline constexpr bool kStream8PairRows<BlendedStencils<A, B>> = kGaussian8<A>;

// The shared memory of one warp; a block's warps take consecutive ones.
// A row of column sums per lane: samples 0..7, two per word (at [lane]);
// pair rows: samples q = 0..7 as (col[q], col[q + C]), 0..3 at [lane] and
// 4..7 at [32 + lane] (stream8_store_pairs). Row slot j of a batch is
// stored in row j % kRows.
template <int K, int P, bool kPairs>
struct Stream8WarpStorage {
    static constexpr int kRowWords = kPairs ? 64 : 32;  // uint4 words of a row
    // Rows a turn of the walk stores: pair rows of two passes, twice the
    // words each, take a batch of K rows in turns of 3, so that shared
    // memory holds as many warps as registers do.
    static constexpr int kRows = kPairs && P == 2 ? std::min(K, 3) : K;
    uint4 sums[P][kRows][kRowWords];  // each pass's rows
    int edge_offsets[32]
                    [kStream8Bytes];  // per lane: each byte's offset in its row (-1: the constant), see stream8_fetch
};
template <class Op, int K, int P>
using Stream8Storage = Stream8WarpStorage<K, P, kStream8PairRows<Op>>;

// A blend whose weights are binary fractions, alpha = p / 2^s, beta = q / 2^s,
// gamma = r / 2^s, small enough that BlendOp::sample's float arithmetic is
// exact: its result is then (p a + q b + r) / 2^s rounded half to even and
// clamped, which this computes two samples a register as 16-bit lanes,
// biased by B 2^s so that every lane lies in 0 .. 2^16 (B even: the parity
// that rounding half to even reads is kept). Set by stream8_int_blend.
struct Stream8IntBlend {
    std::uint32_t on;            // 0: the op's own (float) finish
    std::uint32_t row_init;      // row sums start here: 2^15 (the Gaussians' rounding) when on
    std::uint32_t a_mul, b_mul;  // p and q (modulo 2^32)
    std::uint32_t add;           // r + B 2^s, in both lanes
    std::uint32_t shift;         // s
    std::uint32_t round_add;     // 2^(s - 1) - 1, in both lanes (s = 0: 0)
    std::uint32_t odd;           // bit 0 of both lanes (s = 0: 0)
    std::uint32_t mask;          // 0xffff >> s, in both lanes (s = 0: all bits)
    std::uint32_t neg_bias;      // -B as signed 16-bit lanes
};

// Each pass's weights (unused by box), as kernel parameters: constant
// indices after unrolling. Arithmetic is modulo 2^32 (see above).
template <int P, int K>
struct Stream8Taps {
    std::uint32_t x[P][K], y[P][K];
    std::uint32_t bias[P];                  // added to each column sum: 255 * the magnitude of y's negative weights
    std::uint32_t bias_out[P];              // what the bias adds to a row sum of column sums: bias * sum of x
    std::uint32_t x_pairs[P][(K + 1) / 2];  // pair rows: x weights 2m and 2m + 1 as bytes 0 and 1 (dp2a)
    Stream8IntBlend blend;                  // pair rows: the integer finish
    ThenSamples<std::uint8_t> then{};       // a per-sample node applied as outputs are stored (FilterRun::then)
};

// Bytes 0 and 2 of w as 16-bit lanes, and bytes 1 and 3.
__device__ __forceinline__ std::uint32_t even_bytes(std::uint32_t w) {
    return w & 0x00ff00ffu;
}
__device__ __forceinline__ std::uint32_t odd_bytes(std::uint32_t w) {
    return (w >> 8) & 0x00ff00ffu;
}
// 8 bytes as four words of 16-bit lanes: bytes 0 and 2, 1 and 3, 4 and 6, 5 and 7.
__device__ __forceinline__ void to_lanes(unsigned long long v, std::uint32_t (&lanes)[4]) {
    const std::uint32_t lo = static_cast<std::uint32_t>(v), hi = static_cast<std::uint32_t>(v >> 32);
    lanes[0] = even_bytes(lo);
    lanes[1] = odd_bytes(lo);
    lanes[2] = even_bytes(hi);
    lanes[3] = odd_bytes(hi);
}

// f(integral_constant<int, j>) for j = 0 .. K - 1: the ring slots as constants.
template <int K, class F>
__device__ __forceinline__ void with_slots(F&& f) {
    [&]<int... J>(std::integer_sequence<int, J...>) {
        (f(std::integral_constant<int, J>{}), ...);
    }
    (std::make_integer_sequence<int, K>{});
}

// One lane's share of a row: bytes [b, b + 8).
struct Stream8Lane {
    int b;
    bool outputs;     // not a halo lane, and inside the row
    bool needed;      // some output reads this lane's columns
    bool fast_load;   // one aligned 8-byte load per row
    bool fast_store;  // one aligned 8-byte store per row
};

// The strips a block's warps walk: strip column x (the warps' chunks of
// `chunk` bytes) and strip rows first, first + step, ... below end.
// Row-major: block (bx, by) takes column bx and rows by, + the grid's rows,
// ...; in a TileOrder, the one strip order.map(b) of its linear index b
// (cuda/order.cuh). False: none for this block.
struct Stream8Strips {
    int x, first, end, step;
};
__device__ __forceinline__ bool stream8_strips(int row_bytes, int chunk, int strips_y, const TileOrder& order,
                                               Stream8Strips& s) {
    s = {static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y), strips_y, static_cast<int>(gridDim.y)};
    if (order.row_major()) return true;
    const int strips_x = stream8_strips_x(row_bytes, chunk, blockDim.x >> 5);
    const std::uint64_t work = linear_block();
    if (work >= static_cast<std::uint64_t>(strips_x) * strips_y) return false;
    const Pixel t = order.map(static_cast<std::uint32_t>(work), strips_x, strips_y);
    s = {t.x, t.y, t.y + 1, 1};
    return true;
}

// Lanes without 8-byte loads (at the image's left and right edges, or on
// unaligned rows) read byte by byte: the border rule across x is the same
// for every row, so each byte's offset in its row (-1: the constant) is
// resolved once, kept in shared memory, and the 8 loads of a row are
// independent (one after another, they made the edge warps 8 memory
// round trips per row slower than the rest).
template <int K, int C, class Op>
__device__ __forceinline__ void stream8_resolve_edges(const Op& op, const Stream8Lane& ln,
                                                      int (&offsets)[kStream8Bytes]) {
    constexpr int HL = stream8_halo_lanes(K, C);
#pragma unroll 1
    for (int i = 0; i < kStream8Bytes; ++i) {
        const int q = ln.b + i;
        const int px = (q + HL * kStream8Bytes * C) / C - HL * kStream8Bytes;  // floor(q / C): q >= -HL * 8
        const int x = border_index(op.src.mode, px, op.src.view.width);
        offsets[i] = x < 0 ? -1 : x * C + (q - px * C);
    }
}

// Stage: the lane's 8 bytes of row r, border-resolved.
template <class Op>
__device__ __forceinline__ unsigned long long stream8_fetch(const Op& op, const Stream8Lane& ln,
                                                            const int (&offsets)[kStream8Bytes],
                                                            unsigned long long const_bytes, int r) {
    constexpr int G = kStream8Bytes;
    const std::uint8_t* row = op.src.row(r);
    if (row == nullptr) return const_bytes;
    if (ln.fast_load) return __ldg(reinterpret_cast<const unsigned long long*>(row + ln.b));
    if (!ln.needed) return 0;
    int at[G];
    *reinterpret_cast<int4*>(at) = reinterpret_cast<const int4*>(offsets)[0];
    *reinterpret_cast<int4*>(at + 4) = reinterpret_cast<const int4*>(offsets)[1];
    unsigned long long v = 0;
#pragma unroll
    for (int i = 0; i < G; ++i)
        v |= static_cast<unsigned long long>(at[i] < 0 ? static_cast<std::uint8_t>(op.src.constant) : row[at[i]])
             << (8 * i);
    return v;
}

// A lane's last K rows in registers. Row r lives in ring slot
// (r - y0 - h) mod K. Gaussian and Sobel: lanes[slot][i], the rows as
// 16-bit lanes (i: even and odd bytes of word 0, then of word 1). Box: the
// rows' bytes in `bytes` (half the registers) and their column sums in
// `running`.
template <int K, bool kBox>
struct Stream8Ring {
    std::uint32_t lanes[kBox ? 1 : K][4];
    unsigned long long bytes[kBox ? K : 1];
    std::uint32_t running[4];
};

// Column pass: row `bytes` into slot J, and each pass's column sums of the
// K-row window ending at it as 16-bit lanes.
// kSymmetric: every pass's y weights are symmetric (y[h - k] = y[h + k]),
// and none is biased; a second pass is KB x KB (KB <= K: its weights
// beyond are zero, and cost nothing).
template <int J, bool kBiased, bool kSymmetric, int KB, int K, int P, bool kBox>
__device__ __forceinline__ void stream8_column_sums(Stream8Ring<K, kBox>& ring, unsigned long long bytes,
                                                    const Stream8Taps<P, K>& taps, std::uint32_t (&col)[P][4]) {
    std::uint32_t lanes[4];
    to_lanes(bytes, lanes);
    if constexpr (kBox) {
        std::uint32_t leaving[4];
        to_lanes(ring.bytes[J], leaving);
        ring.bytes[J] = bytes;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            ring.running[i] = ring.running[i] + lanes[i] - leaving[i];  // per lane non-negative: exact
            col[0][i] = ring.running[i];
        }
    } else if constexpr (kSymmetric) {
#pragma unroll
        for (int i = 0; i < 4; ++i) ring.lanes[J][i] = lanes[i];
        // Rows h - k and h + k added first (each lane <= 2 * 255), then each
        // pass weighs the h + 1 sums: two passes share the additions.
        constexpr int h = K / 2;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            std::uint32_t folded[h + 1];
            folded[0] = ring.lanes[(J + 1 + h) % K][i];
#pragma unroll
            for (int k = 1; k <= h; ++k)
                folded[k] = ring.lanes[(J + 1 + h - k) % K][i] + ring.lanes[(J + 1 + h + k) % K][i];
#pragma unroll
            for (int p = 0; p < P; ++p) {
                std::uint32_t s = 0;
#pragma unroll
                for (int k = 0; k <= (p == 1 ? KB : K) / 2; ++k) s += taps.y[p][h + k] * folded[k];
                col[p][i] = s;
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) ring.lanes[J][i] = lanes[i];
            // Slot (J + 1 + t) % K holds tap t (the oldest row first).
#pragma unroll
        for (int p = 0; p < P; ++p)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                std::uint32_t s = kBiased ? taps.bias[p] * 0x00010001u : 0u;
#pragma unroll
                for (int t = 0; t < K; ++t) s += taps.y[p][t] * ring.lanes[(J + 1 + t) % K][i];
                col[p][i] = s;
            }
    }
}

// The lane's column sums into a shared-memory row: samples 0..7 in order,
// two per word; pass p's row at row + p * pass_stride, the lane's word at
// [lane].
template <int P>
__device__ __forceinline__ void stream8_store_columns(uint4* row, int pass_stride, int lane,
                                                      const std::uint32_t (&col)[P][4]) {
#pragma unroll
    for (int p = 0; p < P; ++p)
        row[p * pass_stride + lane] =
            make_uint4(__byte_perm(col[p][0], col[p][1], 0x5410), __byte_perm(col[p][0], col[p][1], 0x7632),
                       __byte_perm(col[p][2], col[p][3], 0x5410), __byte_perm(col[p][2], col[p][3], 0x7632));
}

// Row pass: each pass's row sums of the lane's 8 outputs from the column
// sums of samples b - HL * 8 .. b + 8 + HL * 8 in a row stored by
// stream8_store_columns (lanes lane - HL .. lane + HL).
template <bool kBox, bool kBiased, int K, int C, int P>
__device__ __forceinline__ void stream8_row_sums(const uint4* row, int pass_stride, int lane,
                                                 const Stream8Taps<P, K>& taps,
                                                 std::uint32_t (&acc)[P][kStream8Bytes]) {
    constexpr int G = kStream8Bytes;
    constexpr int h = K / 2;
    constexpr int HL = stream8_halo_lanes(K, C);
#pragma unroll
    for (int p = 0; p < P; ++p) {
        uint4 near[2 * HL + 1];
#pragma unroll
        for (int n = 0; n < 2 * HL + 1; ++n) near[n] = row[p * pass_stride + lane - HL + n];
        const auto column = [&](int at) -> std::uint32_t {  // sample b + at, `at` a constant
            const int q = at + HL * G;
            const uint4& v = near[q / G];
            const std::uint32_t w = (q / 2) % 4 == 0 ? v.x : (q / 2) % 4 == 1 ? v.y : (q / 2) % 4 == 2 ? v.z : v.w;
            return q % 2 == 0 ? (w & 0xffffu) : (w >> 16);
        };
#pragma unroll
        for (int o = 0; o < G; ++o) {
            if (kBox && o >= C) {  // slide: one column enters, one leaves
                acc[p][o] = acc[p][o - C] + column(o + h * C) - column(o - C - h * C);
            } else {
                std::uint32_t s = kBiased ? 0u - taps.bias_out[p] : 0u;
#pragma unroll
                for (int i = 0; i < K; ++i) s += (kBox ? 1u : taps.x[p][i]) * column(o + (i - h) * C);
                acc[p][o] = s;
            }
        }
    }
}

// Pair rows: the lane's column sums (as stream8_column_sums leaves them:
// samples 0 and 2, 1 and 3, 4 and 6, 5 and 7 a word) as words
// (col[q], col[q + C]) for its samples q = 0..7. The second halves of its
// last C words are the next lane's first C samples: each lane writes them
// into its left neighbour's words, 16 bits each, so every byte has one
// writer and no lane waits for another (shuffles here made the compiler
// keep a batch's column sums live, and spill). Lane 31's last C second
// halves are left as they were: no output weighs them.
template <int C, int P>
__device__ __forceinline__ void stream8_store_pairs(uint4* row, int pass_stride, int lane,
                                                    const std::uint32_t (&col)[P][4]) {
    static_assert(C >= 1 && C <= 4, "a lane's last C words need the next lane's first C samples");
    constexpr int kFull = 8 - C;  // words whose both halves are this lane's
#pragma unroll
    for (int p = 0; p < P; ++p) {
        const auto word = [&](int i) { return col[p][(i / 4) * 2 + i % 2]; };  // sample i is half (i % 4) / 2 of it
        const auto sample = [&](int i) { return static_cast<std::uint16_t>((i % 4) / 2 ? word(i) >> 16 : word(i)); };
        std::uint32_t w[8];
#pragma unroll
        for (int q = 0; q < kFull; ++q)
            w[q] = __byte_perm(word(q), word(q + C),
                               ((q % 4) / 2 ? 0x32u : 0x10u) | (((q + C) % 4) / 2 ? 0x7600u : 0x5400u));
        uint4* const first = row + p * pass_stride + lane;                           // words 0..3
        std::uint32_t* const second = reinterpret_cast<std::uint32_t*>(first + 32);  // words 4..7
        *first = make_uint4(w[0], w[1], w[2], w[3]);
#pragma unroll
        for (int q = 4; q < 8; ++q) {
            if (q < kFull)
                second[q - 4] = w[q];
            else
                reinterpret_cast<std::uint16_t*>(second + q - 4)[0] = sample(q);
        }
        // The left neighbour's last C words' second halves: this lane's samples 0 .. C - 1.
        if (lane > 0) {
            std::uint16_t* const left = reinterpret_cast<std::uint16_t*>(second - 4);  // lane - 1's words 4..7
#pragma unroll
            for (int i = 0; i < C; ++i) left[2 * (kFull - 4 + i) + 1] = sample(i);
        }
    }
}

// Pair rows: each pass's row sums of the lane's 8 outputs (from
// blend.row_init): output b + o weighs the pairs of samples
// b + o + C (2m - h), m = 0 .. h (K odd: the last pair's second weight is
// 0), one dp2a each, but for the pairs of a second pass of KB x KB
// (KB <= K, centred) whose weights are both zero. Each loaded word goes at
// once to the outputs that weigh it (integer sums: the order does not matter).
template <int K, int C, int KB, int P>
__device__ __forceinline__ void stream8_pair_row_sums(const uint4* row, int pass_stride, int lane,
                                                      const Stream8Taps<P, K>& taps,
                                                      std::uint32_t (&acc)[P][kStream8Bytes]) {
    constexpr int G = kStream8Bytes;
    constexpr int h = K / 2;
    constexpr int HL = stream8_halo_lanes(K, C);
#pragma unroll
    for (int p = 0; p < P; ++p) {
#pragma unroll
        for (int o = 0; o < G; ++o) acc[p][o] = taps.blend.row_init;
            // The pairs of samples b + at, at = -HL * G .. (HL + 1) * G - 1: half k of lane lane - HL + n
            // (the compiler drops the loads of words no output weighs).
#pragma unroll
        for (int n = 0; n < 2 * HL + 1; ++n)
#pragma unroll
            for (int k = 0; k < 2; ++k) {
                const int first = (n - HL) * G + 4 * k;  // `at` of the uint4's first word
                const uint4 v = row[p * pass_stride + 32 * k + lane - HL + n];
                const std::uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int o = 0; o < G; ++o)
#pragma unroll
                    for (int m = 0; m <= h; ++m) {
                        const int at = o + C * (2 * m - h), lead = (K - (p == 1 ? KB : K)) / 2;  // the pass's first tap
                        const bool weighs = 2 * m + 1 >= lead && 2 * m < K - lead;
                        if (weighs && at >= first && at < first + 4)
                            acc[p][o] = __dp2a_lo(words[at - first], taps.x_pairs[p][m], acc[p][o]);
                    }
            }
    }
}

// Pair rows with the integer finish (Stream8IntBlend): the 8 output bytes
// from the row sums (each 2^15 above the sum, so byte 2 is the Gaussian's
// rounded sample and byte 3 is 0) and, for a blend with the source, the
// source's bytes. Samples pair as to_lanes pairs them.
template <bool kReadsSource, int P>
__device__ __forceinline__ unsigned long long stream8_int_blend_bytes(const Stream8IntBlend& f,
                                                                      const std::uint32_t (&acc)[P][kStream8Bytes],
                                                                      unsigned long long source) {
    std::uint32_t src[4] = {};
    if constexpr (kReadsSource) to_lanes(source, src);
    std::uint32_t y[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int o = (i / 2) * 4 + i % 2;  // samples o and o + 2
        const std::uint32_t a = __byte_perm(acc[0][o], acc[0][o + 2], 0x7632);
        const std::uint32_t b = kReadsSource ? src[i] : __byte_perm(acc[P - 1][o], acc[P - 1][o + 2], 0x7632);
        std::uint32_t u = b * f.b_mul + (a * f.a_mul + f.add);  // each lane in 0 .. 2^16: exact
        // Divided by 2^s, rounded half to even: 2^(s-1) - 1 added, and 1 more where bit s is set (s = 0: no change).
        u = ((u + f.round_add + ((u >> f.shift) & f.odd)) >> f.shift) & f.mask;
        y[i] = __viaddmin_s16x2_relu(u, f.neg_bias, 0x00ff00ffu);  // clamp(u - B, 0, 255) per lane
    }
    const std::uint32_t lo = __byte_perm(y[0], y[1], 0x6240), hi = __byte_perm(y[2], y[3], 0x6240);
    return static_cast<unsigned long long>(hi) << 32 | lo;
}

// The lane's 8 bytes of source row y (inside the image) at the lane's
// outputs: a row the warp read a few rows ago, so mostly from L1.
template <class Op>
__device__ __forceinline__ unsigned long long stream8_source_bytes(const Op& op, const Stream8Lane& ln, int y,
                                                                   int row_bytes) {
    const std::uint8_t* row = op.src.view.template row<const std::uint8_t>(y) + ln.b;
    if (ln.fast_load) return __ldg(reinterpret_cast<const unsigned long long*>(row));
    unsigned long long v = 0;
#pragma unroll
    for (int o = 0; o < kStream8Bytes; ++o)
        if (ln.b + o < row_bytes) v |= static_cast<unsigned long long>(row[o]) << (8 * o);
    return v;
}

// Finish: the op's finish of the lane's 8 outputs of row y, stored (a blend
// with the source: with `source`, the source's bytes at the outputs, which
// the caller loads before the row pass so that its latency hides behind it).
// Row sums start at blend.row_init (0 but for the integer finish, which
// kInt picks: Stream8IntBlend).
template <bool kInt, class Op, int P, int K>
__device__ __forceinline__ void stream8_finish(const Op& op, const Stream8Taps<P, K>& taps, const Stream8Lane& ln,
                                               const std::uint32_t (&acc)[P][kStream8Bytes], unsigned long long source,
                                               int y, int row_bytes) {
    constexpr int G = kStream8Bytes;
    constexpr bool reads_source = requires {
        requires Op::kReadsSource;
    };
    unsigned long long out = 0;
    if constexpr (kInt) {
        out = stream8_int_blend_bytes<reads_source>(taps.blend, acc, source);
    } else {
#pragma unroll
        for (int o = 0; o < G; ++o) {
            typename Op::Acc a[Op::kMaxPasses] = {};
#pragma unroll
            for (int p = 0; p < P; ++p)
                a[p] = static_cast<typename Op::Acc>(acc[p][o] - (kStream8PairRows<Op> ? taps.blend.row_init : 0u));
            std::uint8_t v;
            if constexpr (reads_source)
                v = op.finish(a, static_cast<std::uint8_t>(source >> (8 * o)));
            else
                v = op.finish(a);
            out |= static_cast<unsigned long long>(v) << (8 * o);
        }
    }
    if (taps.then.active()) out = taps.then.bytes8(out);
    std::uint8_t* const dst = op.dst.template row<std::uint8_t>(y) + ln.b;
    if (ln.fast_store) {
        *reinterpret_cast<unsigned long long*>(dst) = out;
    } else {
#pragma unroll
        for (int o = 0; o < G; ++o)
            if (ln.b + o < row_bytes) dst[o] = static_cast<std::uint8_t>(out >> (8 * o));
    }
}

// The kernel's walk (its two entries follow). Strips: see stream8_strips.
template <class Op, int K, int C, int P, int KB>
__device__ __forceinline__ void stream8_walk(const Op& op, const Stream8Taps<P, K>& taps, int strip_h, int strips_y,
                                             const TileOrder& order) {
    constexpr int h = K / 2;
    constexpr bool box = UnitWeightOp<Op>;
    constexpr bool biased = kStream8Biased<Op>;
    constexpr bool reads_source = requires {
        requires Op::kReadsSource;
    };
    extern __shared__ __align__(16) uint4 stream8_smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    // The warp's storage; its offset and the sums' indices in int
    // arithmetic, as 64-bit subscripts cost the kernel registers.
    using Storage = Stream8Storage<Op, K, P>;
    constexpr int warp_words = sizeof(Storage) / sizeof(uint4);
    constexpr int W = Storage::kRowWords, R = Storage::kRows;
    Storage& ws = *reinterpret_cast<Storage*>(stream8_smem + warp * warp_words);
    uint4* const sums = &ws.sums[0][0][0];  // [pass][K rows][W], flat
    int(&edge_offsets)[kStream8Bytes] = ws.edge_offsets[lane];
    const int height = op.dst.height;
    const int row_bytes = op.dst.width * C;
    Stream8Strips strips;
    if (!stream8_strips(row_bytes, stream8_chunk_bytes(K, C), strips_y, order, strips)) return;  // the whole block
    // This lane's bytes of a row: [b, b + 8); the warp outputs [b of lane HL, + chunk).
    constexpr int HL = stream8_halo_lanes(K, C);
    const int warp_first =
        (strips.x * (blockDim.x >> 5) + warp) * stream8_chunk_bytes(K, C);  // the warp's first output byte
    if (warp_first >= row_bytes) return;  // a block's last warps may have no outputs (warps share no barrier)
    const int b = warp_first + (lane - HL) * kStream8Bytes;
    const bool outputs = lane >= HL && lane < 32 - HL && b < row_bytes;
    const bool needed = b < row_bytes + h * C;  // some output reads this lane's columns
    const auto& src = op.src.view;
    const bool fast_load = b >= 0 && b + kStream8Bytes <= row_bytes &&
                           ((reinterpret_cast<std::uintptr_t>(src.data) | src.stride) & 7) == 0;
    const bool fast_store =
        b + kStream8Bytes <= row_bytes && ((reinterpret_cast<std::uintptr_t>(op.dst.data) | op.dst.stride) & 7) == 0;
    const Stream8Lane ln{b, outputs, needed, fast_load, fast_store};
    const unsigned long long const_bytes = 0x0101010101010101ull * static_cast<std::uint8_t>(op.src.constant);
    if (!ln.fast_load && ln.needed) stream8_resolve_edges<K, C>(op, ln, edge_offsets);
    // A lane's bytes of row r inside the image, for strips whose rows are all inside.
    const unsigned char* const direct =
        ln.fast_load ? reinterpret_cast<const unsigned char*>(op.src.view.data) + ln.b : nullptr;

    for (int sy = strips.first; sy < strips.end; sy += strips.step) {
        const int y0 = sy * strip_h, y_end = min(y0 + strip_h, height);
        const int r_end = y_end + h;  // input rows y0 - h .. r_end - 1
        const bool rows_inside = y0 - h >= 0 && r_end <= height;
        // The K - 1 rows before the first output's centre row take slots
        // 1 .. K - 1, and every batch of K rows from y0 + h on starts at slot 0.
        Stream8Ring<K, box> ring{};
        // Row bytes into slot j; with `output`, also the column sums of the
        // row's K-row window into the warp's shared-memory row j.
        const auto push = [&](auto slot, unsigned long long bytes, bool output) {
            std::uint32_t col[P][4];  // each pass's column sums as 16-bit lanes
            stream8_column_sums<slot(), biased, kStream8PairRows<Op>, KB>(ring, bytes, taps, col);
            if constexpr (kStream8PairRows<Op>) {
                if (output) stream8_store_pairs<C>(sums + (slot() % R) * W, R * W, lane, col);
            } else {
                if (output) stream8_store_columns(sums + (slot() % R) * W, R * W, lane, col);
            }
        };
        // Warm-up: rows y0 - h .. y0 + h - 1 (all below r_end).
        with_slots<K>([&](auto slot) {
            if constexpr (slot() > 0)
                push(slot, stream8_fetch(op, ln, edge_offsets, const_bytes, y0 - h + slot() - 1), false);
        });
        for (int base = y0 + h; base < r_end; base += K) {
            // Rows base .. base + K - 1, in turns of R rows: stage and column
            // pass into the warp's rows, then the row pass and finish of each.
            const bool fast =
                base + K <= r_end && rows_inside && ln.fast_load;  // the common case: no checks, loads in flight
            unsigned long long rows[K];
            // Loads of slots [from, to): the first turn's, then each turn the
            // next one's, in flight during this one (a batch's all at once
            // held them live through the turns' row passes, and spilled).
            const auto load = [&](int from, int to) {
                with_slots<K>([&](auto slot) {
                    if (slot() >= from && slot() < to)
                        rows[slot()] = __ldg(reinterpret_cast<const unsigned long long*>(
                            direct + static_cast<std::size_t>(base + slot()) * op.src.view.stride));
                });
            };
            if (fast) load(0, R == K ? K : R);
            with_slots<(K + R - 1) / R>([&](auto turn) {
                constexpr int first = turn() * R, end = std::min(K, first + R);
                if (fast) {
                    if constexpr (end < K) load(end, std::min(K, end + R));
                    with_slots<K>([&](auto slot) {
                        if constexpr (slot() >= first && slot() < end) push(slot, rows[slot()], true);
                    });
                } else {
                    with_slots<K>([&](auto slot) {
                        if constexpr (slot() >= first && slot() < end)
                            if (base + slot() < r_end)
                                push(slot, stream8_fetch(op, ln, edge_offsets, const_bytes, base + slot()), true);
                    });
                }
                __syncwarp();
                // One output row per slot (a rolled loop: one copy of this code
                // a turn and finish).
                const auto row_pass = [&](auto int_finish) {
#pragma unroll 1
                    for (int j = first; j < end && base + j < r_end; ++j) {
                        unsigned long long source = 0;
                        if constexpr (reads_source) source = stream8_source_bytes(op, ln, base + j - h, row_bytes);
                        std::uint32_t acc[P][kStream8Bytes];
                        if constexpr (kStream8PairRows<Op>)
                            stream8_pair_row_sums<K, C, KB>(sums + (j - first) * W, R * W, lane, taps, acc);
                        else
                            stream8_row_sums<box, biased, K, C>(sums + (j - first) * W, R * W, lane, taps, acc);
                        stream8_finish<int_finish()>(op, taps, ln, acc, source, base + j - h, row_bytes);
                    }
                };
                if (ln.outputs) {
                    if (kStream8PairRows<Op> && taps.blend.on)
                        row_pass(std::true_type{});
                    else
                        row_pass(std::false_type{});
                }
                __syncwarp();  // the next rows reuse the warp's shared-memory rows
            });
        }
    }
}

// The kernel, with the registers the compiler chooses; and capped
// (kStream8RegisterCap) for blends of 8-bit Gaussians with K = 9 on 3
// channels: 88 registers for a blend with the source (the unsharp mask),
// 80 for a blend of two Gaussians. Unforced, they hold fewer warps an SM;
// capped they ran faster though they spill a little; the cap made the other
// kernels it was tried on slower or spill, so they keep the compiler's
// choice (docs/performance.md#register-caps).
template <class Op, int K, int C, int P, int KB>
__global__ void stream8_stencil(const __grid_constant__ Op op, const __grid_constant__ Stream8Taps<P, K> taps,
                                int strip_h, int strips_y, const TileOrder order) {
    stream8_walk<Op, K, C, P, KB>(op, taps, strip_h, strips_y, order);
}
template <class Op, int K, int C, int P, int KB, int kRegisters>
__global__ void __maxnreg__(kRegisters)
    stream8_stencil_capped(const __grid_constant__ Op op, const __grid_constant__ Stream8Taps<P, K> taps, int strip_h,
                           int strips_y, const TileOrder order) {
    stream8_walk<Op, K, C, P, KB>(op, taps, strip_h, strips_y, order);
}
template <class Op, int K, int C>
inline constexpr int kStream8RegisterCap = 0;  // none
template <class A, class B>
inline constexpr int kStream8RegisterCap<BlendedStencils<A, B>, 9, 3> = !kGaussian8<A>                    ? 0
                                                                        : std::is_same_v<B, SourceSample> ? 88
                                                                                                          : 80;
// The entry that runs op with K taps on C channels (a second pass of KB
// taps: pair rows and the symmetric column pass skip its zero weights).
template <class Op, int K, int C, int P, int KB = K>
constexpr auto stream8_kernel() {
    static_assert(KB <= K && (KB == K || (P == 2 && kStream8PairRows<Op>)),
                  "a smaller second pass: blends of two Gaussians");
    constexpr int cap = kStream8RegisterCap<Op, K, C>;
    if constexpr (cap > 0)
        return stream8_stencil_capped<Op, K, C, P, KB, cap>;
    else
        return stream8_stencil<Op, K, C, P, KB>;
}

// The launch shape of a kernel on warp chunks (stream8_stencil, and the
// fused pairs of cuda/pair_strip.cuh): warps per block (each a chunk of
// `chunk` bytes of the row, `warp_bytes` of shared memory; results do not
// depend on their number), strips and grid.
struct Stream8Shape {
    int warps, strip_h, strips_x, strips_y;
    std::size_t warp_bytes;
    dim3 grid;

    static Stream8Shape of(const StreamSchedule& strip, int width, int height, int channels, int chunk,
                           std::size_t warp_bytes, int max_warps, int block, const TileOrder& order) {
        const int chunks = (width * channels + chunk - 1) / chunk;
        // At most 48 KiB of shared memory per block (more needs an opt-in per kernel).
        const int limit =
            std::clamp(std::min({block / 32, static_cast<int>(48 * 1024 / warp_bytes), max_warps}), 1, 16);
        Stream8Shape s;
        s.warps = std::clamp((strip.tile_width * channels + chunk - 1) / chunk, 1, std::min(limit, chunks));
        // Warps of a row's last block beyond its end would hold their slots
        // idle while the others walk: as many a block as divide the row's chunks.
        while (chunks % s.warps != 0) --s.warps;
        s.strip_h = std::min(strip.tile_height, height);
        s.strips_y = (height + s.strip_h - 1) / s.strip_h;
        s.warp_bytes = warp_bytes;
        s.strips_x = stream8_strips_x(width * channels, chunk, s.warps);
        s.grid = order.row_major() ? dim3(s.strips_x, std::min(s.strips_y, 65535)) : ordered_grid(s.blocks());
        return s;
    }
    std::uint64_t blocks() const { return static_cast<std::uint64_t>(strips_x) * strips_y; }  // strips to walk
    int threads() const { return warps * 32; }
    std::size_t shared_bytes() const { return static_cast<std::size_t>(warps) * warp_bytes; }
};

// Of `heights`, the strip height at which `kernel` finishes soonest by a
// model of waves: a block walks its strip's rows plus the `halo` rows that
// fill its ring, and a launch takes ceil(blocks / wave) such walks, where a
// wave is the blocks all SMs of `device` (the current one) hold at once
// (blocks_per_wave; a block's threads and shared memory do not depend on
// the height). Shorter strips fill more of the GPU when the image gives few
// blocks; taller ones walk fewer halo rows. shape_of(h): the launch's
// Stream8Shape at height h. Ties: the shorter.
template <class Kernel, class F>
int strip_height_by_waves(std::span<const int> heights, int halo, Kernel* kernel, int device, F&& shape_of) {
    const Stream8Shape first = shape_of(heights.front());
    const auto wave =
        static_cast<std::uint64_t>(blocks_per_wave(kernel, first.threads(), first.shared_bytes(), device));
    int best = 0;
    std::uint64_t best_cost = 0;
    for (const int h : heights) {
        const Stream8Shape s = shape_of(h);
        const std::uint64_t cost = (s.blocks() + wave - 1) / wave * static_cast<std::uint64_t>(s.strip_h + halo);
        if (best == 0 || cost < best_cost) best = h, best_cost = cost;
    }
    return best;
}

// Whether each pass's column sums fit 16-bit lanes: 255 * the magnitude of
// its vertical weights below 2^16 (unit weights: k <= 257).
template <class Op>
bool stream8_lanes_fit(const Op& op) {
    for (int p = 0; p < op.passes(); ++p) {
        unsigned magnitude = 0;
        for (int i = 0; i < op.kh(p); ++i)
            magnitude += op.wy(p) ? static_cast<unsigned>(std::abs(static_cast<int>(op.wy(p)[i]))) : 1u;
        if (magnitude > 257) return false;
    }
    return true;
}

// The K of a kernel for op's passes: the largest, when each is square and
// odd (smaller passes get zero taps at both ends); 0 otherwise.
template <class Op>
int stream8_kernel_size(const Op& op) {
    int k = 0;
    for (int p = 0; p < op.passes(); ++p) {
        if (op.kw(p) != op.kh(p) || op.kw(p) % 2 == 0) return 0;
        k = std::max(k, op.kw(p));
    }
    return k;
}

// The integer finish of a blend of weights alpha, beta, gamma where it is
// exact (Stream8IntBlend); off otherwise.
inline Stream8IntBlend stream8_int_blend(float alpha, float beta, float gamma) {
    for (int s = 0; s <= 8; ++s) {
        const double scale = std::ldexp(1.0, s);
        const double p = alpha * scale, q = beta * scale, r = gamma * scale;  // exact: powers of two
        if (p != std::nearbyint(p) || q != std::nearbyint(q) || r != std::nearbyint(r)) continue;
        // |p a|, |q b| < 2^20 and |r| <= 2^16: every float step of BlendOp::sample is exact.
        if (std::abs(p) > 4096 || std::abs(q) > 4096 || std::abs(r) > 65536) break;
        const long long pi = std::llround(p), qi = std::llround(q), ri = std::llround(r);
        const long long t_min = ri + 255 * (std::min(pi, 0LL) + std::min(qi, 0LL));
        const long long t_max = ri + 255 * (std::max(pi, 0LL) + std::max(qi, 0LL));
        long long b = t_min < 0 ? (-t_min + (1LL << s) - 1) >> s : 0;  // B: ceil(-t_min / 2^s), even
        b += b & 1;
        const long long u_max = t_max + (b << s);
        // Lanes stay below 2^16 through the rounding, and signed 16-bit for the clamp.
        if (s == 0 ? u_max >= (1LL << 15) : u_max + (1LL << (s - 1)) >= (1LL << 16)) break;
        const auto lanes = [](long long v) { return (static_cast<std::uint32_t>(v) & 0xffffu) * 0x00010001u; };
        return {1,
                1u << 15,
                static_cast<std::uint32_t>(pi),
                static_cast<std::uint32_t>(qi),
                static_cast<std::uint32_t>(ri + (b << s)) * 0x00010001u,
                static_cast<std::uint32_t>(s),
                s == 0 ? 0u : lanes((1LL << (s - 1)) - 1),
                s == 0 ? 0u : 0x00010001u,
                s == 0 ? ~0u : lanes(0xffff >> s),
                lanes(-b)};
    }
    return {};
}

// Each pass's weights as Stream8Taps (1 for unit weights), centred in K
// taps, and the bias that keeps a pass with negative vertical weights in
// range.
template <int P, int K, class Op>
Stream8Taps<P, K> stream8_taps(const Op& op) {
    Stream8Taps<P, K> taps{};
    for (int p = 0; p < P; ++p) {
        std::uint32_t negative = 0, x_sum = 0;
        const int lead_x = (K - op.kw(p)) / 2, lead_y = (K - op.kh(p)) / 2;
        for (int i = 0; i < op.kw(p); ++i) {
            const int wx = op.wx(p) ? static_cast<int>(op.wx(p)[i]) : 1;
            taps.x[p][lead_x + i] = static_cast<std::uint32_t>(wx);
            x_sum += static_cast<std::uint32_t>(wx);
        }
        for (int i = 0; i < op.kh(p); ++i) {
            const int wy = op.wy(p) ? static_cast<int>(op.wy(p)[i]) : 1;
            taps.y[p][lead_y + i] = static_cast<std::uint32_t>(wy);
            if (wy < 0) negative += static_cast<std::uint32_t>(-wy);
        }
        taps.bias[p] = 255 * negative;
        taps.bias_out[p] = taps.bias[p] * x_sum;
        for (int m = 0; m < (K + 1) / 2; ++m)
            taps.x_pairs[p][m] =
                (taps.x[p][2 * m] & 0xffu) | (2 * m + 1 < K ? (taps.x[p][2 * m + 1] & 0xffu) << 8 : 0u);
    }
    if constexpr (kStream8PairRows<Op>) {
        static_assert(decltype(op.a)::kRoundingShift == 16,
                      "the integer finish reads byte 2 of a Gaussian's rounded sum");
        for (int p = 0; p < P; ++p)  // the column pass folds them (kSymmetric): Gaussians' are, by construction
            for (int t = 0; t < K; ++t)
                if (taps.y[p][t] != taps.y[p][K - 1 - t])
                    throw std::logic_error("stream8: a Gaussian's weights are not symmetric");
        taps.blend = stream8_int_blend(op.blend.alpha, op.blend.beta, op.blend.gamma);
    }
    return taps;
}

// Whether pair rows take op's x weights: each one byte (dp2a).
template <class Op>
bool stream8_pair_weights_fit(const Op& op) {
    for (int p = 0; p < op.passes(); ++p)
        for (int i = 0; i < op.kw(p); ++i)
            if (op.wx(p) && (static_cast<long>(op.wx(p)[i]) < 0 || static_cast<long>(op.wx(p)[i]) > 255)) return false;
    return true;
}

// Launches stream8_kernel<Op, K, C, P, KB>() for op over the strips of `strip`.
template <int K, int C, int P, int KB = K, class Op>
void launch_stream8_kernel(const StreamSchedule& strip, const Op& op, cudaStream_t stream, int block,
                           const TileOrder& order, const ThenSamples<std::uint8_t>& then = {}) {
    auto taps = stream8_taps<P, K>(op);
    taps.then = then;
    const auto s = Stream8Shape::of(strip, op.dst.width, op.dst.height, C, stream8_chunk_bytes(K, C),
                                    sizeof(Stream8Storage<Op, K, P>), 16, block, order);
    const auto kernel = stream8_kernel<Op, K, C, P, KB>();
    kernel<<<s.grid, s.threads(), s.shared_bytes(), stream>>>(op, taps, s.strip_h, s.strips_y, order);
}

// The strip heights this kernel chooses from on the default table's stream
// schedule: one stencil 8 or 12 (the model picked taller strips badly), a
// blend with its stencils 8 to 24 (docs/performance.md#strip-heights).
inline constexpr int kStream8StripHeights[] = {8, 12};
inline constexpr int kBlendStripHeights[] = {8, 12, 16, 20, 24};

// The strip height of `heights` for stream8_kernel<Op, K, C, P, KB>() on
// strips `strip_w` wide (strip_height_by_waves; `device` is the current one).
template <int K, int C, int P, int KB = K, class Op>
int stream8_kernel_strip_height(std::span<const int> heights, int strip_w, const Op& op, int block,
                                const TileOrder& order, int device) {
    return strip_height_by_waves(heights, K - 1, stream8_kernel<Op, K, C, P, KB>(), device, [&](int h) {
        return Stream8Shape::of(stream_schedule(strip_w, h), op.dst.width, op.dst.height, C, stream8_chunk_bytes(K, C),
                                sizeof(Stream8Storage<Op, K, P>), 16, block, order);
    });
}

// Calls f(K, C, P) (integral constants) for the instantiation of this kernel
// that runs op, and returns true, when the kernel takes op (false: the
// caller runs the generic stream kernel): kernel sizes 1..9, equal across
// passes and axes, with column sums that fit 16-bit lanes.
template <class Op, class F>
bool with_stream8_kernel(const Op& op, F&& f) {
    if constexpr (!kStream8Op<Op>) {
        return false;
    } else {
        if (!stream8_lanes_fit(op)) return false;
        bool takes = false;
        with_one_of<1, 3, 5, 7, 9>(stream8_kernel_size(op), [&](auto kc) {
            with_channels(op.src.view.channels, [&](auto cc) {
                with_passes(op, [&](auto pc) { f(kc, cc, pc); });
                takes = true;
            });
        });
        return takes;
    }
}

// Runs op on this kernel when it takes it (with_stream8_kernel).
template <class Op>
bool launch_stream8(const StreamSchedule& strip, const Op& op, cudaStream_t stream, int block,
                    const TileOrder& order = {}, const ThenSamples<typename Op::Sample>& then = {}) {
    return with_stream8_kernel(op, [&](auto kc, auto cc, auto pc) {
        launch_stream8_kernel<decltype(kc)::value, decltype(cc)::value, decltype(pc)::value>(strip, op, stream, block,
                                                                                             order, then);
    });
}

// The strip height op runs best at on this kernel (stream8_kernel_strip_height); 0 where it does not take op.
template <class Op>
int stream8_strip_height(int strip_w, const Op& op, int block, const TileOrder& order, int device) {
    int h = 0;
    if (!op.dst.empty())
        with_stream8_kernel(op, [&](auto kc, auto cc, auto pc) {
            h = stream8_kernel_strip_height<decltype(kc)::value, decltype(cc)::value, decltype(pc)::value>(
                kStream8StripHeights, strip_w, op, block, order, device);
        });
    return h;
}

}  // namespace cbi::cuda
