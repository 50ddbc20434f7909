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
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>

#include "filters/cuda_launch.cuh"
#include "filters/cuda_stream.cuh"  // with_one_of, with_channels
#include "filters/ops.hpp"
#include "schedules/schedule.hpp"

namespace cbi::cuda {

template <class Op>
inline constexpr bool kStream8Op = false;
template <BorderMode B, class Src>
inline constexpr bool kStream8Op<BoxOp<std::uint8_t, B, Src>> = true;
template <BorderMode B, class Src>
inline constexpr bool kStream8Op<GaussianOp<std::uint8_t, B, Src>> = true;
template <BorderMode B, class Src>
inline constexpr bool kStream8Op<SobelOp<std::uint8_t, B, Src>> = true;
// A blend of stream8 stencils of one source, or of one and the source (ops.hpp).
template <class A, class B>
inline constexpr bool kStream8Op<BlendedStencils<A, B>> = kStream8Op<A> && (std::is_same_v<B, SourceSample> || kStream8Op<B>);

// Ops with negative vertical weights (Sobel's derivative): their column sums carry a bias.
template <class Op>
inline constexpr bool kStream8Biased = requires(Op op) { op.mode; };
template <class A, class B>
inline constexpr bool kStream8Biased<BlendedStencils<A, B>> = kStream8Biased<A> || kStream8Biased<B>;

inline constexpr int kStream8Bytes = 8;  // bytes of a row per lane: one 8-byte load

// Lanes at each end of a warp that only supply halo columns.
constexpr int stream8_halo_lanes(int k, int channels) {
    return ((k / 2) * channels + kStream8Bytes - 1) / kStream8Bytes;
}
// Bytes of a row that one warp outputs.
constexpr int stream8_chunk_bytes(int k, int channels) { return (32 - 2 * stream8_halo_lanes(k, channels)) * kStream8Bytes; }

// Strip columns of a row of row_bytes: `warps` chunks of it each (host and device).
CBI_HOST_DEVICE constexpr int stream8_strips_x(int row_bytes, int chunk, int warps) {
    return ((row_bytes + chunk - 1) / chunk + warps - 1) / warps;
}

// The shared memory of one warp; a block's warps take consecutive ones.
template <int K, int P>
struct Stream8WarpStorage {
    uint4 sums[P][K][32];                 // each pass's column sums of K rows per lane: samples 0..7, two per word
    int edge_offsets[32][kStream8Bytes];  // per lane: each byte's offset in its row (-1: the constant), see stream8_fetch
};

// Each pass's weights (unused by box), as kernel parameters: constant
// indices after unrolling. Arithmetic is modulo 2^32 (see above).
template <int P, int K>
struct Stream8Taps {
    std::uint32_t x[P][K], y[P][K];
    std::uint32_t bias[P];        // added to each column sum: 255 * the magnitude of y's negative weights
    std::uint32_t bias_out[P];    // what the bias adds to a row sum of column sums: bias * sum of x
};

// Bytes 0 and 2 of w as 16-bit lanes, and bytes 1 and 3.
__device__ __forceinline__ std::uint32_t even_bytes(std::uint32_t w) { return w & 0x00ff00ffu; }
__device__ __forceinline__ std::uint32_t odd_bytes(std::uint32_t w) { return (w >> 8) & 0x00ff00ffu; }
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
    [&]<int... J>(std::integer_sequence<int, J...>) { (f(std::integral_constant<int, J>{}), ...); }(std::make_integer_sequence<int, K>{});
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
// (cuda_order.cuh). False: none for this block.
struct Stream8Strips {
    int x, first, end, step;
};
__device__ __forceinline__ bool stream8_strips(int row_bytes, int chunk, int strips_y, const TileOrder& order, Stream8Strips& s) {
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
__device__ __forceinline__ void stream8_resolve_edges(const Op& op, const Stream8Lane& ln, int (&offsets)[kStream8Bytes]) {
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
__device__ __forceinline__ unsigned long long stream8_fetch(const Op& op, const Stream8Lane& ln, const int (&offsets)[kStream8Bytes],
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
        v |= static_cast<unsigned long long>(at[i] < 0 ? static_cast<std::uint8_t>(op.src.constant) : row[at[i]]) << (8 * i);
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
template <int J, bool kBiased, int K, int P, bool kBox>
__device__ __forceinline__ void stream8_column_sums(Stream8Ring<K, kBox>& ring, unsigned long long bytes, const Stream8Taps<P, K>& taps,
                                                    std::uint32_t (&col)[P][4]) {
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
__device__ __forceinline__ void stream8_store_columns(uint4* row, int pass_stride, int lane, const std::uint32_t (&col)[P][4]) {
#pragma unroll
    for (int p = 0; p < P; ++p)
        row[p * pass_stride + lane] = make_uint4(__byte_perm(col[p][0], col[p][1], 0x5410), __byte_perm(col[p][0], col[p][1], 0x7632),
                                         __byte_perm(col[p][2], col[p][3], 0x5410), __byte_perm(col[p][2], col[p][3], 0x7632));
}

// Row pass: each pass's row sums of the lane's 8 outputs from the column
// sums of samples b - HL * 8 .. b + 8 + HL * 8 in a row stored by
// stream8_store_columns (lanes lane - HL .. lane + HL).
template <bool kBox, bool kBiased, int K, int C, int P>
__device__ __forceinline__ void stream8_row_sums(const uint4* row, int pass_stride, int lane, const Stream8Taps<P, K>& taps,
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

// The lane's 8 bytes of source row y (inside the image) at the lane's
// outputs: a row the warp read a few rows ago, so mostly from L1.
template <class Op>
__device__ __forceinline__ unsigned long long stream8_source_bytes(const Op& op, const Stream8Lane& ln, int y, int row_bytes) {
    const std::uint8_t* row = op.src.view.template row<const std::uint8_t>(y) + ln.b;
    if (ln.fast_load) return __ldg(reinterpret_cast<const unsigned long long*>(row));
    unsigned long long v = 0;
#pragma unroll
    for (int o = 0; o < kStream8Bytes; ++o)
        if (ln.b + o < row_bytes) v |= static_cast<unsigned long long>(row[o]) << (8 * o);
    return v;
}

// Finish: the op's finish of the lane's 8 outputs of row y, stored (a blend
// with the source: with the source's samples).
template <class Op, int P>
__device__ __forceinline__ void stream8_finish(const Op& op, const Stream8Lane& ln, const std::uint32_t (&acc)[P][kStream8Bytes], int y,
                                               int row_bytes) {
    constexpr int G = kStream8Bytes;
    constexpr bool reads_source = requires { requires Op::kReadsSource; };
    unsigned long long source = 0;
    if constexpr (reads_source) source = stream8_source_bytes(op, ln, y, row_bytes);
    unsigned long long out = 0;
#pragma unroll
    for (int o = 0; o < G; ++o) {
        typename Op::Acc a[Op::kMaxPasses] = {};
#pragma unroll
        for (int p = 0; p < P; ++p) a[p] = static_cast<typename Op::Acc>(acc[p][o]);
        std::uint8_t v;
        if constexpr (reads_source) v = op.finish(a, static_cast<std::uint8_t>(source >> (8 * o)));
        else v = op.finish(a);
        out |= static_cast<unsigned long long>(v) << (8 * o);
    }
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
template <class Op, int K, int C, int P>
__device__ __forceinline__ void stream8_walk(const Op& op, const Stream8Taps<P, K>& taps, int strip_h, int strips_y,
                                             const TileOrder& order) {
    constexpr int h = K / 2;
    constexpr bool box = UnitWeightOp<Op>;
    constexpr bool biased = kStream8Biased<Op>;
    extern __shared__ __align__(16) uint4 stream8_smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    // The warp's storage; its offset and the sums' indices in int
    // arithmetic, as 64-bit subscripts cost the kernel registers.
    constexpr int warp_words = sizeof(Stream8WarpStorage<K, P>) / sizeof(uint4);
    Stream8WarpStorage<K, P>& ws = *reinterpret_cast<Stream8WarpStorage<K, P>*>(stream8_smem + warp * warp_words);
    uint4* const sums = &ws.sums[0][0][0];  // [pass][K rows][lane], flat
    int (&edge_offsets)[kStream8Bytes] = ws.edge_offsets[lane];
    const int height = op.dst.height;
    const int row_bytes = op.dst.width * C;
    Stream8Strips strips;
    if (!stream8_strips(row_bytes, stream8_chunk_bytes(K, C), strips_y, order, strips)) return;  // the whole block
    // This lane's bytes of a row: [b, b + 8); the warp outputs [b of lane HL, + chunk).
    constexpr int HL = stream8_halo_lanes(K, C);
    const int warp_first = (strips.x * (blockDim.x >> 5) + warp) * stream8_chunk_bytes(K, C);  // the warp's first output byte
    if (warp_first >= row_bytes) return;  // a block's last warps may have no outputs (warps share no barrier)
    const int b = warp_first + (lane - HL) * kStream8Bytes;
    const bool outputs = lane >= HL && lane < 32 - HL && b < row_bytes;
    const bool needed = b < row_bytes + h * C;  // some output reads this lane's columns
    const auto& src = op.src.view;
    const bool fast_load = b >= 0 && b + kStream8Bytes <= row_bytes && ((reinterpret_cast<std::uintptr_t>(src.data) | src.stride) & 7) == 0;
    const bool fast_store = b + kStream8Bytes <= row_bytes && ((reinterpret_cast<std::uintptr_t>(op.dst.data) | op.dst.stride) & 7) == 0;
    const Stream8Lane ln{b, outputs, needed, fast_load, fast_store};
    const unsigned long long const_bytes = 0x0101010101010101ull * static_cast<std::uint8_t>(op.src.constant);
    if (!ln.fast_load && ln.needed) stream8_resolve_edges<K, C>(op, ln, edge_offsets);
    // A lane's bytes of row r inside the image, for strips whose rows are all inside.
    const unsigned char* const direct = ln.fast_load ? reinterpret_cast<const unsigned char*>(op.src.view.data) + ln.b : nullptr;

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
            stream8_column_sums<slot(), biased>(ring, bytes, taps, col);
            if (output) stream8_store_columns(sums + slot() * 32, K * 32, lane, col);
        };
        // Warm-up: rows y0 - h .. y0 + h - 1 (all below r_end).
        with_slots<K>([&](auto slot) {
            if constexpr (slot() > 0) push(slot, stream8_fetch(op, ln, edge_offsets, const_bytes, y0 - h + slot() - 1), false);
        });
        for (int base = y0 + h; base < r_end; base += K) {
            // Stage and column pass: rows base .. base + K - 1 into the warp's rows.
            if (base + K <= r_end && rows_inside && ln.fast_load) {  // the common case: no checks, K loads in flight
                unsigned long long rows[K];
                with_slots<K>([&](auto slot) {
                    rows[slot()] = __ldg(reinterpret_cast<const unsigned long long*>(direct + static_cast<std::size_t>(base + slot()) * op.src.view.stride));
                });
                with_slots<K>([&](auto slot) { push(slot, rows[slot()], true); });
            } else {
                with_slots<K>([&](auto slot) {
                    if (base + slot() < r_end) push(slot, stream8_fetch(op, ln, edge_offsets, const_bytes, base + slot()), true);
                });
            }
            __syncwarp();
            // Row pass and finish: one output row per slot (a rolled loop: one copy of this code).
            if (ln.outputs) {
#pragma unroll 1
                for (int j = 0; j < K && base + j < r_end; ++j) {
                    std::uint32_t acc[P][kStream8Bytes];
                    stream8_row_sums<box, biased, K, C>(sums + j * 32, K * 32, lane, taps, acc);
                    stream8_finish(op, ln, acc, base + j - h, row_bytes);
                }
            }
            __syncwarp();  // the next rows reuse the warp's shared-memory rows
        }
    }
}

// The kernel, with the registers the compiler chooses; and capped at
// kStream8CappedRegisters for blends of 8-bit Gaussians with K = 9 on 3
// channels (kStream8Capped): unforced, they hold a block fewer an SM, and
// capped they ran faster without spilling. The cap made the other kernels
// it was tried on slower or spill, so they keep the compiler's choice
// (apps/bench/README.md, "Fused blends at 80 registers").
template <class Op, int K, int C, int P>
__global__ void stream8_stencil(const __grid_constant__ Op op, const __grid_constant__ Stream8Taps<P, K> taps, int strip_h,
                                int strips_y, const TileOrder order) {
    stream8_walk<Op, K, C, P>(op, taps, strip_h, strips_y, order);
}
inline constexpr int kStream8CappedRegisters = 80;
template <class Op, int K, int C, int P>
__global__ void __maxnreg__(kStream8CappedRegisters) stream8_stencil_capped(const __grid_constant__ Op op,
                                                                            const __grid_constant__ Stream8Taps<P, K> taps,
                                                                            int strip_h, int strips_y, const TileOrder order) {
    stream8_walk<Op, K, C, P>(op, taps, strip_h, strips_y, order);
}
template <class Op>
inline constexpr bool kGaussian8 = false;
template <BorderMode B, class Src>
inline constexpr bool kGaussian8<GaussianOp<std::uint8_t, B, Src>> = true;
template <class Op, int K, int C>
inline constexpr bool kStream8Capped = false;
template <class A, class B>
inline constexpr bool kStream8Capped<BlendedStencils<A, B>, 9, 3> = kGaussian8<A>;
// The entry that runs op with K taps on C channels.
template <class Op, int K, int C, int P>
constexpr auto stream8_kernel() {
    if constexpr (kStream8Capped<Op, K, C>) return stream8_stencil_capped<Op, K, C, P>;
    else return stream8_stencil<Op, K, C, P>;
}

// The launch shape of a kernel on warp chunks (stream8_stencil, and the
// fused pairs of cuda_chain_stream.cuh): warps per block (each a chunk of
// `chunk` bytes of the row, `warp_bytes` of shared memory; results do not
// depend on their number), strips and grid.
struct Stream8Shape {
    int warps, strip_h, strips_x, strips_y;
    std::size_t warp_bytes;
    dim3 grid;

    static Stream8Shape of(const StreamSchedule& strip, int width, int height, int channels, int chunk, std::size_t warp_bytes,
                           int max_warps, int block, const TileOrder& order) {
        const int chunks = (width * channels + chunk - 1) / chunk;
        // At most 48 KiB of shared memory per block (more needs an opt-in per kernel).
        const int limit = std::clamp(std::min({block / 32, static_cast<int>(48 * 1024 / warp_bytes), max_warps}), 1, 16);
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
    const auto wave = static_cast<std::uint64_t>(blocks_per_wave(kernel, first.threads(), first.shared_bytes(), device));
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
        for (int i = 0; i < op.kh(p); ++i) magnitude += op.wy(p) ? static_cast<unsigned>(std::abs(static_cast<int>(op.wy(p)[i]))) : 1u;
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
    }
    return taps;
}

// Launches stream8_kernel<Op, K, C, P>() for op over the strips of `strip`.
template <int K, int C, int P, class Op>
void launch_stream8_kernel(const StreamSchedule& strip, const Op& op, cudaStream_t stream, int block, const TileOrder& order) {
    const auto taps = stream8_taps<P, K>(op);
    const auto s = Stream8Shape::of(strip, op.dst.width, op.dst.height, C, stream8_chunk_bytes(K, C), sizeof(Stream8WarpStorage<K, P>), 16,
                                    block, order);
    const auto kernel = stream8_kernel<Op, K, C, P>();
    kernel<<<s.grid, s.threads(), s.shared_bytes(), stream>>>(op, taps, s.strip_h, s.strips_y, order);
}

// The strip heights this kernel chooses from on the default table's stream
// schedule (apps/bench/README.md, "Strip heights by waves"). One stencil:
// 8 or 12; 12 was as fast as 16 or faster at every size measured, and the
// model picked taller strips badly. A blend with its stencils: 8 to 24, the
// best measured at each size among them.
inline constexpr int kStream8StripHeights[] = {8, 12};
inline constexpr int kBlendStripHeights[] = {8, 12, 16, 20, 24};

// The strip height of `heights` for stream8_kernel<Op, K, C, P>() on strips
// `strip_w` wide (strip_height_by_waves; `device` is the current one).
template <int K, int C, int P, class Op>
int stream8_kernel_strip_height(std::span<const int> heights, int strip_w, const Op& op, int block, const TileOrder& order,
                                int device) {
    return strip_height_by_waves(heights, K - 1, stream8_kernel<Op, K, C, P>(), device, [&](int h) {
        return Stream8Shape::of(stream_schedule(strip_w, h), op.dst.width, op.dst.height, C, stream8_chunk_bytes(K, C),
                                sizeof(Stream8WarpStorage<K, P>), 16, block, order);
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
bool launch_stream8(const StreamSchedule& strip, const Op& op, cudaStream_t stream, int block, const TileOrder& order = {}) {
    return with_stream8_kernel(op, [&](auto kc, auto cc, auto pc) {
        launch_stream8_kernel<decltype(kc)::value, decltype(cc)::value, decltype(pc)::value>(strip, op, stream, block, order);
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
