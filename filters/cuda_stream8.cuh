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
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstdint>
#include <type_traits>
#include <utility>

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

inline constexpr int kStream8Bytes = 8;  // bytes of a row per lane: one 8-byte load

// Lanes at each end of a warp that only supply halo columns.
constexpr int stream8_halo_lanes(int k, int channels) {
    return ((k / 2) * channels + kStream8Bytes - 1) / kStream8Bytes;
}
// Bytes of a row that one warp outputs.
constexpr int stream8_chunk_bytes(int k, int channels) { return (32 - 2 * stream8_halo_lanes(k, channels)) * kStream8Bytes; }

// Shared memory per warp, in 16-byte words: K rows of 32 lanes' column sums
// per pass, and 8 byte offsets per lane for the edge lanes' loads.
constexpr int stream8_warp_words(int k, int passes) { return 32 * k * passes + 32 * kStream8Bytes * 4 / 16; }

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

// Strips: row-major, block (bx, by) walks strip column bx (its warps' chunks)
// and strip rows by, + the grid's rows, ...; in a TileOrder, the one strip
// order.map(b) of its linear index b (cuda_order.cuh).
template <class Op, int K, int C, int P>
__global__ void stream8_stencil(const __grid_constant__ Op op, const __grid_constant__ Stream8Taps<P, K> taps, int strip_h,
                                int strips_y, const TileOrder order) {
    constexpr int G = kStream8Bytes;
    constexpr int h = K / 2;
    constexpr int HL = stream8_halo_lanes(K, C);
    constexpr int chunk = stream8_chunk_bytes(K, C);
    constexpr bool box = UnitWeightOp<Op>;
    constexpr bool biased = requires { op.mode; };  // Sobel: negative weights
    extern __shared__ __align__(16) uint4 stream8_smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    uint4* const sums = stream8_smem + warp * stream8_warp_words(K, P);  // [pass][K rows][lane]: column sums
    int* const edge_offsets = reinterpret_cast<int*>(sums + 32 * K * P) + lane * kStream8Bytes;  // see fetch
    const int height = op.dst.height;
    const int row_bytes = op.dst.width * C;
    int strip_x = blockIdx.x, sy_first = blockIdx.y, sy_end = strips_y, sy_step = gridDim.y;
    if (!order.row_major()) {
        const int warps = blockDim.x >> 5;
        const int strips_x = ((row_bytes + chunk - 1) / chunk + warps - 1) / warps;
        const std::uint64_t work = linear_block();
        if (work >= static_cast<std::uint64_t>(strips_x) * strips_y) return;  // the whole block
        const Pixel t = order.map(static_cast<std::uint32_t>(work), strips_x, strips_y);
        strip_x = t.x, sy_first = t.y, sy_end = t.y + 1;
    }
    // This lane's bytes of a row: [b, b + 8); the warp outputs [b of lane HL, + chunk).
    const int b = (strip_x * (blockDim.x >> 5) + warp) * chunk + (lane - HL) * G;
    const bool outputs = lane >= HL && lane < 32 - HL && b < row_bytes;
    const bool needed = b < row_bytes + h * C;  // some output reads this lane's columns
    const auto& src = op.src.view;
    const bool fast_load = b >= 0 && b + G <= row_bytes && ((reinterpret_cast<std::uintptr_t>(src.data) | src.stride) & 7) == 0;
    const bool fast_store = b + G <= row_bytes && ((reinterpret_cast<std::uintptr_t>(op.dst.data) | op.dst.stride) & 7) == 0;
    const unsigned long long const_bytes = 0x0101010101010101ull * static_cast<std::uint8_t>(op.src.constant);

    // Lanes without 8-byte loads (at the image's left and right edges, or on
    // unaligned rows) read byte by byte: the border rule across x is the same
    // for every row, so each byte's offset in its row (-1: the constant) is
    // resolved once, kept in shared memory, and the 8 loads of a row are
    // independent (one after another, they made the edge warps 8 memory
    // round trips per row slower than the rest).
    if (!fast_load && needed)
#pragma unroll 1
        for (int i = 0; i < G; ++i) {
            const int q = b + i;
            const int px = (q + HL * G * C) / C - HL * G;  // floor(q / C): q >= -HL * G
            const int x = border_index(op.src.mode, px, op.src.view.width);
            edge_offsets[i] = x < 0 ? -1 : x * C + (q - px * C);
        }
    // Row r's 8 bytes, border-resolved.
    const auto fetch = [&](int r) -> unsigned long long {
        const std::uint8_t* row = op.src.row(r);
        if (row == nullptr) return const_bytes;
        if (fast_load) return __ldg(reinterpret_cast<const unsigned long long*>(row + b));
        if (!needed) return 0;
        int at[G];
        *reinterpret_cast<int4*>(at) = reinterpret_cast<const int4*>(edge_offsets)[0];
        *reinterpret_cast<int4*>(at + 4) = reinterpret_cast<const int4*>(edge_offsets)[1];
        unsigned long long v = 0;
#pragma unroll
        for (int i = 0; i < G; ++i)
            v |= static_cast<unsigned long long>(at[i] < 0 ? static_cast<std::uint8_t>(op.src.constant) : row[at[i]]) << (8 * i);
        return v;
    };

    // A lane's bytes of row r inside the image, for strips whose rows are all inside.
    const unsigned char* const direct = fast_load ? reinterpret_cast<const unsigned char*>(src.data) + b : nullptr;

    for (int sy = sy_first; sy < sy_end; sy += sy_step) {
        const int y0 = sy * strip_h, y_end = min(y0 + strip_h, height);
        const int r_end = y_end + h;  // input rows y0 - h .. r_end - 1
        const bool rows_inside = y0 - h >= 0 && r_end <= height;
        // Row r lives in ring slot (r - y0 - h) mod K: the K - 1 rows before
        // the first output's centre row take slots 1 .. K - 1, and every batch
        // of K rows from y0 + h on starts at slot 0.
        // Gaussian: ring[slot][i], the last K rows as 16-bit lanes (i: even and
        // odd bytes of word 0, then of word 1). Box: the last K rows' bytes in
        // ring_bytes (half the registers) and their column sums in running.
        std::uint32_t ring[box ? 1 : K][4];
        unsigned long long ring_bytes[box ? K : 1];
        std::uint32_t running[4] = {};
#pragma unroll
        for (int s = 0; s < K; ++s) {
            if constexpr (box) ring_bytes[s] = 0;
            else
#pragma unroll
                for (int i = 0; i < 4; ++i) ring[s][i] = 0;
        }
        // Row bytes into slot j; with `output`, also the column sums of the
        // row's K-row window into the warp's shared-memory row j.
        const auto push = [&](auto slot, unsigned long long bytes, bool output) {
            constexpr int j = slot();
            std::uint32_t lanes[4], col[P][4];  // a row's samples and each pass's column sums as 16-bit lanes
            to_lanes(bytes, lanes);
            if constexpr (box) {
                std::uint32_t leaving[4];
                to_lanes(ring_bytes[j], leaving);
                ring_bytes[j] = bytes;
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    running[i] = running[i] + lanes[i] - leaving[i];  // per lane non-negative: exact
                    col[0][i] = running[i];
                }
            } else {
#pragma unroll
                for (int i = 0; i < 4; ++i) ring[j][i] = lanes[i];
                // Slot (j + 1 + t) % K holds tap t (the oldest row first).
#pragma unroll
                for (int p = 0; p < P; ++p)
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        std::uint32_t s = biased ? taps.bias[p] * 0x00010001u : 0u;
#pragma unroll
                        for (int t = 0; t < K; ++t) s += taps.y[p][t] * ring[(j + 1 + t) % K][i];
                        col[p][i] = s;
                    }
            }
            // Samples 0..7 of the lane's columns in order, two per word.
            if (output)
#pragma unroll
                for (int p = 0; p < P; ++p)
                    sums[(p * K + j) * 32 + lane] =
                        make_uint4(__byte_perm(col[p][0], col[p][1], 0x5410), __byte_perm(col[p][0], col[p][1], 0x7632),
                                   __byte_perm(col[p][2], col[p][3], 0x5410), __byte_perm(col[p][2], col[p][3], 0x7632));
        };
        // Warm-up: rows y0 - h .. y0 + h - 1 (all below r_end).
        with_slots<K>([&](auto slot) {
            if constexpr (slot() > 0) push(slot, fetch(y0 - h + slot() - 1), false);
        });
        for (int base = y0 + h; base < r_end; base += K) {
            // 1. Column sums of rows base .. base + K - 1 into the warp's rows.
            if (base + K <= r_end && rows_inside && fast_load) {  // the common case: no checks, K loads in flight
                unsigned long long rows[K];
                with_slots<K>([&](auto slot) {
                    rows[slot()] = __ldg(reinterpret_cast<const unsigned long long*>(direct + static_cast<std::size_t>(base + slot()) * src.stride));
                });
                with_slots<K>([&](auto slot) { push(slot, rows[slot()], true); });
            } else {
                with_slots<K>([&](auto slot) {
                    if (base + slot() < r_end) push(slot, fetch(base + slot()), true);
                });
            }
            __syncwarp();
            // 2. Row sums from the neighbours' columns, finish, store: one output row per slot
            // (a rolled loop: one copy of this code).
            if (outputs) {
#pragma unroll 1
                for (int j = 0; j < K && base + j < r_end; ++j) {
                    // Each pass's row sums of the column sums of samples b - HL * 8 .. b + 8 + HL * 8
                    // (lanes lane - HL .. lane + HL).
                    std::uint32_t acc[P][G];
#pragma unroll
                    for (int p = 0; p < P; ++p) {
                        uint4 near[2 * HL + 1];
#pragma unroll
                        for (int n = 0; n < 2 * HL + 1; ++n) near[n] = sums[(p * K + j) * 32 + lane - HL + n];
                        const auto column = [&](int at) -> std::uint32_t {  // sample b + at, `at` a constant
                            const int q = at + HL * G;
                            const uint4& v = near[q / G];
                            const std::uint32_t w = (q / 2) % 4 == 0 ? v.x : (q / 2) % 4 == 1 ? v.y : (q / 2) % 4 == 2 ? v.z : v.w;
                            return q % 2 == 0 ? (w & 0xffffu) : (w >> 16);
                        };
#pragma unroll
                        for (int o = 0; o < G; ++o) {
                            if (box && o >= C) {  // slide: one column enters, one leaves
                                acc[p][o] = acc[p][o - C] + column(o + h * C) - column(o - C - h * C);
                            } else {
                                std::uint32_t s = biased ? 0u - taps.bias_out[p] : 0u;
#pragma unroll
                                for (int i = 0; i < K; ++i) s += (box ? 1u : taps.x[p][i]) * column(o + (i - h) * C);
                                acc[p][o] = s;
                            }
                        }
                    }
                    unsigned long long out = 0;
#pragma unroll
                    for (int o = 0; o < G; ++o) {
                        typename Op::Acc a[Op::kMaxPasses] = {};
#pragma unroll
                        for (int p = 0; p < P; ++p) a[p] = static_cast<typename Op::Acc>(acc[p][o]);
                        out |= static_cast<unsigned long long>(op.finish(a)) << (8 * o);
                    }
                    std::uint8_t* const dst = op.dst.template row<std::uint8_t>(base + j - h) + b;
                    if (fast_store) {
                        *reinterpret_cast<unsigned long long*>(dst) = out;
                    } else {
#pragma unroll
                        for (int o = 0; o < G; ++o)
                            if (b + o < row_bytes) dst[o] = static_cast<std::uint8_t>(out >> (8 * o));
                    }
                }
            }
            __syncwarp();  // the next rows reuse the warp's shared-memory rows
        }
    }
}

// Runs op on this kernel when it can take it (false: the caller runs the
// generic stream kernel): kernel sizes 1..9, equal across passes and axes,
// with column sums that fit 16-bit lanes.
template <class Op>
bool launch_stream8(const StreamSchedule& strip, const Op& op, cudaStream_t stream, int block, const TileOrder& order = {}) {
    if constexpr (!kStream8Op<Op>) {
        return false;
    } else {
        constexpr bool box = UnitWeightOp<Op>;
        const int k = square_kernel_size(op);
        for (int p = 0; p < op.passes() && !box; ++p) {
            unsigned magnitude = 0;
            for (int i = 0; i < k; ++i) magnitude += static_cast<unsigned>(std::abs(static_cast<int>(op.wy(p)[i])));
            if (magnitude > 257) return false;  // 255 * magnitude must stay below 2^16
        }
        bool launched = false;
        with_one_of<1, 3, 5, 7, 9>(k, [&](auto kc) {
            constexpr int K = kc();
            with_channels(op.src.view.channels, [&](auto cc) {
                constexpr int C = cc();
                const auto go = [&](auto pc) {
                    constexpr int P = pc();
                    constexpr int chunk = stream8_chunk_bytes(K, C);
                    Stream8Taps<P, K> taps{};
                    if constexpr (!box) {
                        for (int p = 0; p < P; ++p) {
                            std::uint32_t negative = 0, x_sum = 0;
                            for (int i = 0; i < K; ++i) {
                                const int wx = static_cast<int>(op.wx(p)[i]), wy = static_cast<int>(op.wy(p)[i]);
                                taps.x[p][i] = static_cast<std::uint32_t>(wx);
                                taps.y[p][i] = static_cast<std::uint32_t>(wy);
                                if (wy < 0) negative += static_cast<std::uint32_t>(-wy);
                                x_sum += static_cast<std::uint32_t>(wx);
                            }
                            taps.bias[p] = 255 * negative;
                            taps.bias_out[p] = taps.bias[p] * x_sum;
                        }
                    }
                    const int row_bytes = op.dst.width * C;
                    const int chunks = (row_bytes + chunk - 1) / chunk;
                    // The strip width sets the warps per block (each warp a chunk of the row); results do not depend on it.
                    // At most 48 KiB of shared memory per block (more needs an opt-in per kernel).
                    const int max_warps = std::clamp(std::min(block / 32, 48 * 1024 / (stream8_warp_words(K, P) * 16)), 1, 16);
                    const int warps = std::clamp((strip.tile_width * C + chunk - 1) / chunk, 1, std::min(max_warps, chunks));
                    const int strip_h = std::min(strip.tile_height, op.dst.height);
                    const int strips_y = (op.dst.height + strip_h - 1) / strip_h;
                    const int strips_x = (chunks + warps - 1) / warps;
                    const dim3 grid = order.row_major() ? dim3(strips_x, std::min(strips_y, 65535))
                                                        : ordered_grid(static_cast<std::uint64_t>(strips_x) * strips_y);
                    const std::size_t smem = static_cast<std::size_t>(warps) * stream8_warp_words(K, P) * sizeof(uint4);
                    stream8_stencil<Op, K, C, P><<<grid, warps * 32, smem, stream>>>(op, taps, strip_h, strips_y, order);
                    launched = true;
                };
                with_passes(op, go);
            });
        });
        return launched;
    }
}

}  // namespace cbi::cuda
