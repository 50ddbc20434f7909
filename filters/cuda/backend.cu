#include "filters/cuda/backend.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "filters/cuda/check.hpp"
#include "filters/cuda/lanes.cuh"
#include "filters/cuda/launch.cuh"
#include "filters/cuda/order.cuh"
#include "filters/cuda/strip.cuh"
#include "filters/cuda/strip8.cuh"
#include "filters/dispatch.hpp"
#include "filters/error.hpp"
#include "filters/kernel_path.hpp"
#include "filters/then.hpp"

namespace cbi {
namespace {

using cuda::load_run;
using cuda::store_run;
using cuda::with_channels;

// Threads per block for Kernel: `block`, or fewer where the kernel's
// registers allow fewer (sep:WxH and vec:N results do not depend on it).
template <auto Kernel>
int block_threads(int block) {
    const int most = cuda::max_threads_per_block<Kernel>();
    if (most < 1) throw std::runtime_error("cannot read a CUDA kernel's attributes");
    return std::min(block, most);
}

// "sep:64x32 (halo 4)": a tile strategy's block, for messages.
inline std::string tile_text(const char* strategy, int w, int h, int halo) {
    return std::string(strategy) + ":" + std::to_string(w) + "x" + std::to_string(h) + " (halo " +
           std::to_string(halo) + ")";
}

// Ops that expose separable passes (blur, gaussian, sobel).
template <class Op>
concept SeparableOp = requires(const Op& op) {
    op.passes();
    op.finish(nullptr);
};

// The smem:WxH schedule: block (bx, by) computes the tile_w x tile_h output
// tile at (tx*tile_w, ty*tile_h), (tx, ty) = (bx, by) or, in an order, its
// tile (cuda/order.cuh). Per channel it stages the tile plus a
// halo of border-resolved samples in shared memory (consecutive threads
// read consecutive samples), computes each pass's row sums for every staged
// row into shared memory, then combines them down the columns. Sums use
// weighted_sum in the same order as the per-pixel path: bit-identical.
template <class Op>
__global__ void smem_stencil(Op op, int tile_w, int tile_h, int halo, const TileOrder order) {
    using T = typename Op::Sample;
    using Acc = typename Op::Acc;
    extern __shared__ __align__(16) unsigned char smem[];
    const int stage_w = tile_w + 2 * halo, stage_h = tile_h + 2 * halo;
    T* stage = reinterpret_cast<T*>(smem);
    Acc* rows = reinterpret_cast<Acc*>(smem + round_up<std::size_t>(stage_w * stage_h * sizeof(T), 16));
    const Pixel tile = cuda::grid_tile(order);
    const int x0 = tile.x * tile_w, y0 = tile.y * tile_h;
    const int width = op.dst.width, height = op.dst.height, channels = op.src.view.channels;
    const int passes = op.passes();
    for (int c = 0; c < channels; ++c) {
        for (int k = threadIdx.x; k < stage_w * stage_h; k += blockDim.x) {
            const int sy = k / stage_w, sx = k - sy * stage_w;
            stage[k] = op.src.at(op.src.row(y0 - halo + sy), x0 - halo + sx, c);
        }
        __syncthreads();
        for (int p = 0; p < passes; ++p) {
            const int kw = op.kw(p);
            const auto* wx = op.wx(p);
            for (int k = threadIdx.x; k < stage_h * tile_w; k += blockDim.x) {
                const int r = k / tile_w, x = k - r * tile_w;
                const T* line = stage + r * stage_w + x + halo - kw / 2;
                rows[(p * stage_h + r) * tile_w + x] =
                    weighted_sum<Acc>(wx, kw, [&](int i) { return to_acc<Acc>(line[i]); });
            }
        }
        __syncthreads();
        for (int k = threadIdx.x; k < tile_w * tile_h; k += blockDim.x) {
            const int ty = k / tile_w, tx = k - ty * tile_w;
            const int x = x0 + tx, y = y0 + ty;
            if (x >= width || y >= height) continue;
            Acc sums[Op::kMaxPasses] = {};
            for (int p = 0; p < passes; ++p) {
                const int kh = op.kh(p);
                const Acc* column = rows + (p * stage_h + ty + halo - kh / 2) * tile_w + tx;
                sums[p] = weighted_sum<Acc>(op.wy(p), kh, [&](int j) { return column[j * tile_w]; });
            }
            op.dst.template row<T>(y)[x * channels + c] = op.finish(sums);
        }
        __syncthreads();  // the next channel reuses the stage
    }
}

template <class Op>
void launch_smem(const SmemTileSchedule& tile, const TileOrder& order, const Op& op, cudaStream_t stream, int block) {
    using T = typename Op::Sample;
    using Acc = typename Op::Acc;
    const int halo = stencil_halo(op);
    const int tw = tile.tile_width, th = tile.tile_height;
    const std::size_t stage_w = tw + 2 * halo, stage_h = th + 2 * halo;
    const std::size_t bytes =
        round_up<std::size_t>(stage_w * stage_h * sizeof(T), 16) + op.passes() * stage_h * tw * sizeof(Acc);
    const int device = cuda::current_device();
    cuda::require_shared_memory(bytes, device, tile_text("smem", tw, th, halo), "use a smaller tile");
    if (bytes > 48 * 1024) cuda::allow_shared_memory<smem_stencil<Op>>(device);
    const dim3 grid((op.dst.width + tw - 1) / tw, (op.dst.height + th - 1) / th);
    smem_stencil<<<grid, block, bytes, stream>>>(op, tw, th, halo, order);
}

// ------------------------------------------------------------------ sep:WxH
// A block computes a tile_w x tile_h output tile in four named steps, with a
// block barrier between them:
//  1. sep_stage_tile: the tile plus a halo of border-resolved input samples
//     into shared memory: a flat loop with 8 loads in flight per thread
//     before the first store (a tile is latency-bound otherwise: one DRAM
//     round trip per row); interior tiles load aligned 4-byte words with
//     consecutive threads on consecutive words (coalesced), others go
//     sample by sample through the border rule;
//  2. sep_row_pass: each thread takes a run of kSepRun consecutive outputs of
//     one channel in one staged row and computes each pass's row sums from a
//     register window (R + k - 1 shared-memory reads for R outputs, not R*k);
//  3. sep_column_pass: each thread takes a run of kSepRun outputs down one
//     sample column and sums the row sums the same way (sep_column_sums);
//  4. sep_finish: the op's finish of the run, stored (lanes along the row:
//     coalesced stores), through SepStore: a blend with the staged source
//     sample first, where the kernel computes a BlendRun.
// Weighted sums add their taps through weighted_step in weighted_sum's order,
// so results are bit-identical to the per-pixel path. Box filters slide
// running sums instead (cost independent of k): integer sums are exact; float
// (double) sums differ from the direct sum by rounding only, and an output
// whose running sum is not finite (an Inf or NaN in or near its window) is
// recomputed directly from the stage, so non-finite inputs behave as in the
// per-pixel path.
constexpr int kSepRun = 8;

// What sep:WxH does to each output as it stores it: in the kernels made
// with kBlend, the blend of the output (weight `stencil_weight`) and the
// source sample at the same place (a BlendRun of one stencil and its input:
// an unsharp mask, an adaptive threshold's difference); then `then`
// (FilterRun::then, BlendRun::then). blend(x, s) with (alpha, beta) is
// blend(s, x) with (beta, alpha) bit for bit: the two products are added
// first. The blend is a template argument: a run-time test in every
// kernel slowed the 8-bit ones (docs/performance.md#sep-blend).
template <class T>
struct SepStore {
    ThenSamples<T> then{};
    float stencil_weight = 0, source_weight = 0, gamma = 0;

    __device__ T blend(T out, T source) const {
        return BlendOp<T>{{}, {}, {}, stencil_weight, source_weight, gamma}.sample(out, source);
    }
};

// n / d for a tile's unit and element indices. A run-time integer division
// costs about 20 instructions; with magic = ceil(2^32 / d) it is
// __umulhi(n, magic), exact while n * (d - 1) < 2^32 (the error of magic
// times n stays below n / d's distance to the next integer), which holds for
// every n < largest_n when divisor_for gives a magic; else n / d.
struct Divisor {
    unsigned d, magic;
};
__host__ __device__ inline Divisor divisor_for(unsigned d, unsigned long long largest_n) {
    const bool fits = d > 1 && largest_n * (d - 1) < (1ull << 32);
    return {d, fits ? 0xffffffffu / d + 1 : 0u};
}
__device__ __forceinline__ int divide(int n, Divisor q) {
    if (q.magic != 0) return static_cast<int>(__umulhi(static_cast<unsigned>(n), q.magic));
    return q.d == 1 ? n : n / static_cast<int>(q.d);
}

// Where a sep:WxH block's shared-memory regions start, in bytes from the
// stage at 0 (each 16-byte aligned), and the block's total (SepStorage::offsets).
struct SepSmemOffsets {
    unsigned sums, weights, row_ptrs, bytes;
};

// Shape of one sep:WxH block and of its launch, computed on the host (sep_layout).
struct SepLayout {
    int tile_w, tile_h;    // outputs per block: the schedule's W x H
    int tw, th;            // rounded up to whole runs
    int halo;              // largest kernel radius over the passes
    int rows;              // staged rows: th + 2 halo
    int row_samples;       // staged samples per row: (tw + 2 halo) * channels
    int stage_stride;      // samples from one staged row to the next (an odd number of 4-byte words: no bank conflicts)
    int sum_stride;        // Acc from one row-sum row to the next (odd)
    int kmax;              // 2 halo + 1: room for each weight vector
    int tiles_x, tiles_y;  // tiles of the image (row-major: blocks loop down the rows when the grid's y is capped)
    TileOrder order;       // the order blocks take tiles in (cuda/order.cuh)
    int per_block;  // tiles per block: row-major, tile rows by, by + the grid's y, ...; in an order, consecutive tiles of it
    Divisor rows_div, cols_div;  // for the unit index / rows, / (tw * channels)
    SepSmemOffsets smem;

    // The launch's grid: row-major, tile columns across and tile rows
    // (per_block per block) down, capped; in an order, per_block
    // consecutive tiles of it per block.
    dim3 grid() const {
        if (order.row_major()) return dim3(tiles_x, std::min((tiles_y + per_block - 1) / per_block, 65535));
        const std::uint64_t units = static_cast<std::uint64_t>(tiles_x) * tiles_y;
        return cuda::ordered_grid((units + per_block - 1) / per_block);
    }
};

// The shared memory of one sep:WxH block as typed regions. Their sizes
// follow the tile, a run-time value, so they are carved from the dynamic
// allocation at offsets the host computes once.
template <class Op>
struct SepStorage {
    using T = typename Op::Sample;
    using Acc = typename Op::Acc;
    using W = typename Op::W;
    using RowPtr = decltype(std::declval<const Op&>().src.row(0));
    T* stage;          // [rows][stage_stride]: the tile and its halo, border-resolved
    Acc* sums;         // [pass][rows][sum_stride]: each pass's row sums
    W* weights;        // [pass][x, y][kmax]: each pass's weights, zero past its size (unit weights: none)
    RowPtr* row_ptrs;  // [rows]: the tile's source rows, border-resolved once per tile (null: a constant border's row)

    static SepSmemOffsets offsets(const SepLayout& L, int passes) {
        const auto align16 = [](std::size_t b) { return round_up<std::size_t>(b, 16); };
        const std::size_t stage_bytes = align16(static_cast<std::size_t>(L.rows) * L.stage_stride * sizeof(T));
        const std::size_t sums_bytes = align16(static_cast<std::size_t>(passes) * L.rows * L.sum_stride * sizeof(Acc));
        const std::size_t weight_bytes = align16(UnitWeightOp<Op> ? 0 : std::size_t{2} * passes * L.kmax * sizeof(W));
        const std::size_t row_ptr_bytes = static_cast<std::size_t>(L.rows) * sizeof(RowPtr);
        const std::size_t bytes = stage_bytes + sums_bytes + weight_bytes + row_ptr_bytes;
        if (bytes > (1u << 30))
            throw Unsupported(tile_text("sep", L.tile_w, L.tile_h, L.halo),
                              "needs over 1 GiB of shared memory; use a smaller tile");
        return {static_cast<unsigned>(stage_bytes), static_cast<unsigned>(stage_bytes + sums_bytes),
                static_cast<unsigned>(stage_bytes + sums_bytes + weight_bytes), static_cast<unsigned>(bytes)};
    }
    __device__ __forceinline__ static SepStorage carve(unsigned char* smem, const SepSmemOffsets& at) {
        return {reinterpret_cast<T*>(smem), reinterpret_cast<Acc*>(smem + at.sums),
                reinterpret_cast<W*>(smem + at.weights), reinterpret_cast<RowPtr*>(smem + at.row_ptrs)};
    }
};

__device__ __forceinline__ int div_channels(int j, int channels) {
    return channels == 1 ? j : channels == 3 ? j / 3 : channels == 4 ? j >> 2 : j / channels;
}

// acc[o] = sum over i < k of w[i] * load(o + i), for o < R, each accumulated
// in weighted_sum's order and rounding (w not null). The values pass through a register
// window of 2R, refilled R at a time.
template <int R, class Acc, class W, class Load>
__device__ __forceinline__ void run_sums(Acc (&acc)[R], const W* w, int k, Load&& load) {
    const int n = R + k - 1;
    Acc win[2 * R];
#pragma unroll
    for (int o = 0; o < R; ++o) {
        acc[o] = Acc(0);
        win[o] = o < n ? load(o) : Acc(0);
    }
    for (int g = 0; g < k; g += R) {
#pragma unroll
        for (int o = 0; o < R; ++o) win[R + o] = g + R + o < n ? load(g + R + o) : Acc(0);
#pragma unroll
        for (int ii = 0; ii < R; ++ii) {
            if (g + ii < k) {            // uniform across the block
                const W wi = w[g + ii];  // never null here: unit weights take run_running_sums
#pragma unroll
                for (int o = 0; o < R; ++o) acc[o] = weighted_add<Acc>(acc[o], wi, win[o + ii]);
            }
        }
#pragma unroll
        for (int o = 0; o < R; ++o) win[o] = win[R + o];
    }
}

// run_sums for k <= K: fully unrolled, so the window needs no shifting and
// each tap is one weighted_add on registers (the weights w[0..k) already in
// registers). Taps are added in weighted_sum's order: bit-identical.
template <int R, int K, class Acc, class W, class Load>
__device__ __forceinline__ void run_sums_unrolled(Acc (&acc)[R], const W (&w)[K], int k, Load&& load) {
    Acc win[R + K - 1];
#pragma unroll
    for (int i = 0; i < R + K - 1; ++i) win[i] = i < R + k - 1 ? load(i) : Acc(0);
#pragma unroll
    for (int o = 0; o < R; ++o) acc[o] = Acc(0);
#pragma unroll
    for (int t = 0; t < K; ++t) {
        if (t < k) {  // uniform across the block
#pragma unroll
            for (int o = 0; o < R; ++o) acc[o] = weighted_add<Acc>(acc[o], w[t], win[o + t]);
        }
    }
}

// The largest kernel size that run_sums_unrolled takes.
constexpr int kSepUnrolledTaps = 9;

// Unit weights: the first sum directly, then each next output adds the value
// entering the window and subtracts the one leaving it.
template <int R, class Acc, class Load>
__device__ __forceinline__ void run_running_sums(Acc (&acc)[R], int k, Load&& load) {
    Acc s = 0;
    for (int i = 0; i < k; ++i) s += load(i);
    acc[0] = s;
#pragma unroll
    for (int o = 1; o < R; ++o) {
        s = s + load(o + k - 1) - load(o - 1);
        acc[o] = s;
    }
}

// Where a tile's staged rows start in the image row and whether they load
// as whole words: set per tile column.
struct SepColumn {
    long long a_off;  // bytes into the image row
    bool words;
    int lead, row_words;
    Divisor by_row_words;
};

// Interior tiles (in x) load whole aligned 4-byte words of each staged row:
// fewer, wider loads, all of a thread's loads in flight before its first
// store. A staged row then starts `lead` samples into its shared-memory row.
template <class Op>
__device__ __forceinline__ SepColumn sep_column(const Op& op, const SepLayout& L, int x0) {
    using T = typename Op::Sample;
    const std::size_t sz = sizeof(T);
    const int C = op.src.view.channels, width = op.dst.width;
    SepColumn k;
    k.a_off = static_cast<long long>(x0 - L.halo) * C * sz;
    const long long e_off = static_cast<long long>(x0 + L.tw + L.halo) * C * sz;
    // Raw words only from stored images (not from a fused colour source).
    k.words = std::remove_cvref_t<decltype(op.src)>::kStored && k.a_off >= 0 &&
              ((e_off + 3) & ~3ll) <= static_cast<long long>(width) * C * sz && (op.src.view.stride & 3) == 0 &&
              (reinterpret_cast<std::uintptr_t>(op.src.view.data) & 3) == 0;
    k.lead = k.words ? static_cast<int>((k.a_off & 3) / sz) : 0;
    k.row_words = k.words ? static_cast<int>(((k.a_off & 3) + L.row_samples * sz + 3) / 4) : 0;
    k.by_row_words = divisor_for(k.row_words, static_cast<unsigned long long>(L.rows) * k.row_words);
    return k;
}

// Each pass's weights into shared memory, read by every run: [pass][x, y][kmax].
template <class Op>
__device__ __forceinline__ void sep_load_weights(const Op& op, const SepLayout& L, const SepStorage<Op>& st) {
    using W = typename Op::W;
    for (int p = 0; p < op.passes(); ++p)
        for (int i = threadIdx.x; i < L.kmax; i += blockDim.x) {
            st.weights[(2 * p) * L.kmax + i] = i < op.kw(p) ? op.wx(p)[i] : W(0);
            st.weights[(2 * p + 1) * L.kmax + i] = i < op.kh(p) ? op.wy(p)[i] : W(0);
        }
}

// The tile's staged source rows y0 - halo .., border-resolved once per tile.
template <class Op>
__device__ __forceinline__ void sep_resolve_rows(const Op& op, const SepLayout& L, const SepStorage<Op>& st, int y0) {
    for (int r = threadIdx.x; r < L.rows; r += blockDim.x) st.row_ptrs[r] = op.src.row(y0 - L.halo + r);
}

// A block's flat copy of `total` items: load(i, v) reads item i into v and
// returns where it goes, store(at, v) puts it there; each thread issues kU
// loads before it stores any (one DRAM round trip for kU items).
template <int kU, class V, class Load, class Store>
__device__ __forceinline__ void copy_in_flight(int total, Load load, Store store) {
    const int tid = threadIdx.x, nthreads = blockDim.x;
    for (int base = tid; base < total; base += kU * nthreads) {
        V v[kU];
        int at[kU];
#pragma unroll
        for (int u = 0; u < kU; ++u) {
            const int idx = base + u * nthreads;
            at[u] = idx < total ? load(idx, v[u]) : -1;
        }
#pragma unroll
        for (int u = 0; u < kU; ++u)
            if (at[u] >= 0) store(at[u], v[u]);
    }
}

// Step 1: the tile at x0 and its halo into the stage from st.row_ptrs, a
// flat loop over the tile's words (or samples), kU loads per thread issued
// before any is stored.
template <class Op>
__device__ __forceinline__ void sep_stage_tile(const Op& op, const SepLayout& L, const SepStorage<Op>& st,
                                               const SepColumn& column, int x0, std::uint32_t const_word,
                                               Divisor by_row_samples) {
    using T = typename Op::Sample;
    constexpr int kU = 8;
    const std::size_t sz = sizeof(T);
    const int C = op.src.view.channels;
    if (column.words) {
        std::uint32_t* const stage_words = reinterpret_cast<std::uint32_t*>(st.stage);
        const int stride_words = static_cast<int>(L.stage_stride * sz / 4);
        const int row_words = column.row_words;
        const long long first_word = (column.a_off & ~3ll) / 4;
        copy_in_flight<kU, std::uint32_t>(
            L.rows * row_words,
            [&](int idx, std::uint32_t& v) {
                const int r = divide(idx, column.by_row_words);
                const int w = idx - r * row_words;
                const T* row = st.row_ptrs[r];
                v = row == nullptr ? const_word : __ldg(reinterpret_cast<const std::uint32_t*>(row) + first_word + w);
                return r * stride_words + w;
            },
            [&](int at, std::uint32_t v) { stage_words[at] = v; });
    } else {
        copy_in_flight<kU, T>(
            L.rows * L.row_samples,
            [&](int idx, T& v) {
                const int r = divide(idx, by_row_samples);
                const int s = idx - r * L.row_samples;
                const int px = div_channels(s, C);
                v = op.src.at(st.row_ptrs[r], x0 - L.halo + px, s - px * C);
                return r * L.stage_stride + s;
            },
            [&](int at, T v) { st.stage[at] = v; });
    }
}

// Step 2: each pass's row sums of every staged row into st.sums. Units
// (row, run of R outputs, channel), rows fastest so that the lanes of a warp
// read different banks; `lead`: where a staged row starts in its stage row.
template <class Op>
__device__ __forceinline__ void sep_row_pass(const Op& op, const SepLayout& L, const SepStorage<Op>& st, int lead) {
    using T = typename Op::Sample;
    using Acc = typename Op::Acc;
    using W = typename Op::W;
    constexpr int R = kSepRun;
    constexpr bool unit = UnitWeightOp<Op>;
    const int C = op.src.view.channels;
    const int tid = threadIdx.x, nthreads = blockDim.x;
    const int cols_x = L.tw / R * C;
    const int units_x = cols_x * L.rows;
    for (int p = 0; p < op.passes(); ++p) {
        const int kw = op.kw(p);
        const W* wx = unit ? nullptr : st.weights + 2 * p * L.kmax;
        const int off = L.halo - kw / 2;
        Acc* const psums = st.sums + p * L.rows * L.sum_stride;
        W wx_taps[kSepUnrolledTaps] = {};
        if constexpr (!unit)
#pragma unroll
            for (int i = 0; i < kSepUnrolledTaps; ++i) wx_taps[i] = i < kw ? wx[i] : W(0);
        for (int u = tid; u < units_x; u += nthreads) {
            const int j = divide(u, L.rows_div), r = u - j * L.rows;
            const int run = div_channels(j, C), c = j - run * C;
            const T* line = st.stage + r * L.stage_stride + lead + (run * R + off) * C + c;
            auto load = [&](int i) { return to_acc<Acc>(line[i * C]); };
            Acc acc[R];
            if constexpr (unit)
                run_running_sums<R>(acc, kw, load);
            else if (kw <= kSepUnrolledTaps)
                run_sums_unrolled<R>(acc, wx_taps, kw, load);
            else
                run_sums<R>(acc, wx, kw, load);
            Acc* out = psums + r * L.sum_stride + run * R * C + c;
#pragma unroll
            for (int o = 0; o < R; ++o) out[o * C] = acc[o];
        }
    }
}

// Each pass's column sums of the R outputs from tile row ty0 down sample
// column sc of st.sums (passes past the op's: 0).
template <class Op>
__device__ __forceinline__ void sep_column_sums(const Op& op, const SepLayout& L, const SepStorage<Op>& st, int sc,
                                                int ty0, typename Op::Acc (&acc)[Op::kMaxPasses][kSepRun]) {
    using Acc = typename Op::Acc;
    using W = typename Op::W;
    constexpr int R = kSepRun;
    constexpr bool unit = UnitWeightOp<Op>;
    const int passes = op.passes();
#pragma unroll
    for (int p = 0; p < Op::kMaxPasses; ++p) {
        if (p < passes) {
            const int kh = op.kh(p);
            const W* wy = unit ? nullptr : st.weights + (2 * p + 1) * L.kmax;
            const Acc* col = st.sums + (p * L.rows + ty0 + L.halo - kh / 2) * L.sum_stride + sc;
            auto load = [&](int i) { return col[i * L.sum_stride]; };
            if constexpr (unit) {
                run_running_sums<R>(acc[p], kh, load);
            } else if (kh <= kSepUnrolledTaps) {
                W wy_taps[kSepUnrolledTaps];
#pragma unroll
                for (int i = 0; i < kSepUnrolledTaps; ++i) wy_taps[i] = i < kh ? wy[i] : W(0);
                run_sums_unrolled<R>(acc[p], wy_taps, kh, load);
            } else {
                run_sums<R>(acc[p], wy, kh, load);
            }
        } else {
#pragma unroll
            for (int o = 0; o < R; ++o) acc[p][o] = Acc(0);
        }
    }
}

// Step 4: the op's finish of each of the run's first `outputs` outputs
// (tile rows ty0 .., tile column tx, channel c), stored.
template <bool kBlend, class Op>
__device__ __forceinline__ void sep_finish(const Op& op, const SepLayout& L, const SepStorage<Op>& st,
                                           const typename Op::Acc (&acc)[Op::kMaxPasses][kSepRun], int x0, int y0,
                                           int tx, int c, int ty0, int outputs, int lead,
                                           const SepStore<typename Op::Sample>& store) {
    using T = typename Op::Sample;
    using Acc = typename Op::Acc;
    using W = typename Op::W;
    constexpr int R = kSepRun;
    constexpr bool unit = UnitWeightOp<Op>;
    const int C = op.src.view.channels;
    // Output rows one stride apart: the address moves by an add, not a multiply per row.
    unsigned char* out = reinterpret_cast<unsigned char*>(op.dst.template row<T>(y0 + ty0) + (x0 + tx) * C + c);
#pragma unroll
    for (int o = 0; o < R; ++o, out += op.dst.stride) {
        if (o >= outputs) break;
        const int ty = ty0 + o;
        Acc v[Op::kMaxPasses];
#pragma unroll
        for (int p = 0; p < Op::kMaxPasses; ++p) v[p] = acc[p][o];
        if constexpr (unit && std::is_floating_point_v<Acc>) {
            if (!isfinite(v[0])) {  // the per-pixel path's direct sum, from the stage
                const int kw = op.kw(0), kh = op.kh(0);
                v[0] = weighted_sum<Acc>(static_cast<const W*>(nullptr), kh, [&](int j) {
                    const T* line =
                        st.stage + (ty + L.halo - kh / 2 + j) * L.stage_stride + lead + (tx + L.halo - kw / 2) * C + c;
                    return weighted_sum<Acc>(static_cast<const W*>(nullptr), kw,
                                             [&](int i) { return to_acc<Acc>(line[i * C]); });
                });
            }
        }
        T result = op.finish(v);
        if constexpr (kBlend)  // with the source sample under the output: the stage's centre tap
            result = store.blend(result, st.stage[(ty + L.halo) * L.stage_stride + lead + (tx + L.halo) * C + c]);
        *reinterpret_cast<T*>(out) = store.then(result);
    }
}

// Step 3: units (run of R rows, sample column), sample columns fastest
// (coalesced stores); each unit inside the tile and the image sums its
// columns and finishes.
template <bool kBlend, class Op>
__device__ __forceinline__ void sep_column_pass(const Op& op, const SepLayout& L, const SepStorage<Op>& st, int x0,
                                                int y0, int lead, const SepStore<typename Op::Sample>& store) {
    using Acc = typename Op::Acc;
    constexpr int R = kSepRun;
    const int C = op.src.view.channels;
    const int width = op.dst.width, height = op.dst.height;
    const int tid = threadIdx.x, nthreads = blockDim.x;
    const int cols = L.tw * C;
    const int units_y = cols * (L.th / R);
    for (int u = tid; u < units_y; u += nthreads) {
        const int ry = divide(u, L.cols_div), sc = u - ry * cols;
        const int tx = div_channels(sc, C), c = sc - tx * C;
        const int ty0 = ry * R;
        const int outputs = min(R, min(L.tile_h - ty0, height - (y0 + ty0)));  // rows of the run inside tile and image
        if (tx >= L.tile_w || x0 + tx >= width || outputs <= 0) continue;
        Acc acc[Op::kMaxPasses][R];
        sep_column_sums(op, L, st, sc, ty0, acc);
        sep_finish<kBlend>(op, L, st, acc, x0, y0, tx, c, ty0, outputs, lead, store);
    }
}

// kOrdered (a template argument, so the row-major kernel is the one it was:
// a run-time branch on the order cost it 4 to 9 registers, 64 -> 68 for
// gaussian 32f, one block fewer per SM): blocks take L.per_block
// consecutive tiles of L.order from their linear index instead of tile
// column blockIdx.x, tile rows blockIdx.y, + gridDim.y, ...
template <class Op, bool kOrdered, bool kBlend>
__device__ __forceinline__ void sep_tiles(const Op& op, const SepLayout& L,
                                          const SepStore<typename Op::Sample>& store) {
    extern __shared__ __align__(16) unsigned char smem[];
    const SepStorage<Op> st = SepStorage<Op>::carve(smem, L.smem);
    if constexpr (!UnitWeightOp<Op>) sep_load_weights(op, L, st);
    int x0 = blockIdx.x * L.tile_w;
    SepColumn column = sep_column(op, L, x0);                             // row-major: the block's one tile column
    const std::uint32_t const_word = cuda::repeat_word(op.src.constant);  // a row of a constant border, as words
    const Divisor by_row_samples = divisor_for(L.row_samples, static_cast<unsigned long long>(L.rows) * L.row_samples);
    using Work = std::conditional_t<kOrdered, std::uint32_t, int>;        // ordered: up to 2^32 - 1 tiles
    Work work = blockIdx.y, work_end = L.tiles_y, work_step = gridDim.y;  // row-major: tile rows
    if constexpr (kOrdered) {
        const std::uint64_t units = static_cast<std::uint64_t>(L.tiles_x) * L.tiles_y;
        const std::uint64_t first = cuda::linear_block() * L.per_block;
        if (first >= units) return;  // the whole block, before any barrier
        work = static_cast<std::uint32_t>(first);
        work_end = static_cast<std::uint32_t>(min(first + L.per_block, units));
        work_step = 1;
    }
    for (; work < work_end; work += work_step) {
        int by = static_cast<int>(work);
        if constexpr (kOrdered) {
            const Pixel t = L.order.map(work, L.tiles_x, L.tiles_y);
            x0 = t.x * L.tile_w, by = t.y;
            column = sep_column(op, L, x0);
        }
        const int y0 = by * L.tile_h;
        sep_resolve_rows(op, L, st, y0);
        __syncthreads();
        sep_stage_tile(op, L, st, column, x0, const_word, by_row_samples);
        __syncthreads();
        sep_row_pass(op, L, st, column.lead);
        __syncthreads();
        sep_column_pass<kBlend>(op, L, st, x0, y0, column.lead, store);
        __syncthreads();  // the next tile reuses the stage and the sums
    }
}

// `store`: a per-sample node (and with kBlend a blend) applied as each output is stored (SepStore).
template <class Op, bool kOrdered, bool kBlend = false>
__global__ void sep_stencil(const __grid_constant__ Op op, const SepLayout L,
                            const __grid_constant__ SepStore<typename Op::Sample> store) {
    sep_tiles<Op, kOrdered, kBlend>(op, L, store);
}

// 8-bit box filters keep their running sums in 48 registers, room for five
// blocks of the default 256 threads per SM; left to itself ptxas gave the
// row-major kernel 56 (four blocks) once the kernel was split into steps,
// measurably slower (docs/performance.md#sep-registers). A bound
// on every sep kernel would change the others' registers too.
template <class Op, bool kOrdered>
__global__ void __launch_bounds__(256, 5)
    sep_stencil_five_blocks(const __grid_constant__ Op op, const SepLayout L,
                            const __grid_constant__ SepStore<typename Op::Sample> store) {
    sep_tiles<Op, kOrdered, false>(op, L, store);
}

template <class Op, bool kOrdered, bool kBlend = false>
constexpr auto sep_kernel() {
    if constexpr (kBlend)
        return sep_stencil<Op, false, true>;
    else if constexpr (UnitWeightOp<Op> && sizeof(typename Op::Sample) == 1)
        return sep_stencil_five_blocks<Op, kOrdered>;
    else
        return sep_stencil<Op, kOrdered>;
}

template <class Op>
SepLayout sep_layout(const SepTileSchedule& tile, const TileOrder& order, const Op& op) {
    using T = typename Op::Sample;
    SepLayout L{};
    const int halo = stencil_halo(op);
    const int channels = op.src.view.channels;
    L.tile_w = tile.tile_width;
    L.tile_h = tile.tile_height;
    L.tw = round_up(L.tile_w, kSepRun);
    L.th = round_up(L.tile_h, kSepRun);
    L.halo = halo;
    L.rows = L.th + 2 * halo;
    L.row_samples = (L.tw + 2 * halo) * channels;
    std::size_t words = (static_cast<std::size_t>(L.row_samples) * sizeof(T) + 3 + 3) / 4;  // + the lead of word loads
    if (words % 2 == 0) ++words;
    L.stage_stride = static_cast<int>(words * 4 / sizeof(T));
    L.sum_stride = (L.tw * channels) | 1;
    L.kmax = 2 * halo + 1;
    L.tiles_x = (op.dst.width + L.tile_w - 1) / L.tile_w;
    L.tiles_y = (op.dst.height + L.tile_h - 1) / L.tile_h;
    // Blocks take two tiles each where there are many tile rows, so a block's
    // set-up (layout, divisors, weights) is paid once for two
    // (docs/performance.md#sep-tiles-per-block).
    L.order = order;
    L.per_block = L.tiles_y >= 64 ? 2 : 1;
    const unsigned runs_x = L.tw / kSepRun * channels, cols = L.tw * channels;
    L.rows_div = divisor_for(L.rows, static_cast<unsigned long long>(runs_x) * L.rows);
    L.cols_div = divisor_for(cols, static_cast<unsigned long long>(cols) * (L.th / kSepRun));
    L.smem = SepStorage<Op>::offsets(L, op.passes());
    return L;
}

// kBlend: the kernel that blends each output with its source (SepStore),
// made for the row-major order only (an order moves tiles, not results).
template <bool kBlend = false, class Op>
void launch_sep(const SepTileSchedule& tile, const TileOrder& order, const Op& op, cudaStream_t stream, int block,
                const SepStore<typename Op::Sample>& store) {
    if (op.dst.width <= 0 || op.dst.height <= 0) return;
    const SepLayout L = sep_layout(tile, kBlend ? TileOrder{} : order, op);
    const int device = cuda::current_device();
    cuda::require_shared_memory(L.smem.bytes, device, tile_text("sep", L.tile_w, L.tile_h, L.halo),
                                "use a smaller tile");
    constexpr auto row_major_kernel = sep_kernel<Op, false, kBlend>();
    if (kBlend || order.row_major()) {
        if (L.smem.bytes > 48 * 1024) cuda::allow_shared_memory<row_major_kernel>(device);
        row_major_kernel<<<L.grid(), block_threads<row_major_kernel>(block), L.smem.bytes, stream>>>(op, L, store);
        return;
    }
    if constexpr (!kBlend) {
        constexpr auto ordered_kernel = sep_kernel<Op, true>();
        if (L.smem.bytes > 48 * 1024) cuda::allow_shared_memory<ordered_kernel>(device);
        ordered_kernel<<<L.grid(), block_threads<ordered_kernel>(block), L.smem.bytes, stream>>>(op, L, store);
    }
}

// ------------------------------------------------------------------- vec:N
// Pointwise ops, N pixels per thread: the pixels' samples are loaded as
// whole words, computed in registers by the op's per-sample arithmetic
// (ColorOp::sample, BlendOp::sample: the same functions the per-pixel path
// calls) and stored as whole words. Rows are blockIdx.y (looping when the
// grid's y is capped), runs of N pixels across x. Colour on a 1-channel
// image (CI 1) runs vec_color: sample's step 0 reads it as R = G = B.
template <int N, int CI, int CO, class T>
__global__ void vec_color(const __grid_constant__ ColorOp<T> op) {
    const int width = op.dst.width, height = op.dst.height;
    const int x0 = (blockIdx.x * blockDim.x + threadIdx.x) * N;
    if (x0 >= width) return;
    const int count = min(N, width - x0);
    for (int y = blockIdx.y; y < height; y += gridDim.y) {
        T in[N * CI], out[N * CO];
        load_run(op.src.template row<const T>(y) + x0 * CI, in, count * CI);
#pragma unroll
        for (int p = 0; p < N; ++p) {
#pragma unroll
            for (int r = 0; r < (CO < 3 ? CO : 3); ++r)
                out[p * CO + r] = ColorOp<T>::sample(op.matrix, in + p * CI, r, color_step(CI));
            if constexpr (CO == 4) out[p * CO + 3] = in[p * CI + 3];  // alpha is copied
        }
        store_run(op.dst.template row<T>(y) + x0 * CO, out, count * CO);
    }
}

// 3-channel images: a thread's N pixels are 3N samples, so its words lie
// 3N samples apart and each load or store instruction of a warp touches
// every other 16 bytes of its sectors, which kept the L2 busier than DRAM
// (docs/performance.md#vec-staging). Here a block moves its segment of the row between global and shared memory as
// consecutive 16-byte words (a warp: 512 contiguous bytes per instruction),
// and each thread computes its pixels from shared memory.
__device__ __forceinline__ void block_copy(unsigned char* dst, const unsigned char* src, int bytes, bool words) {
    int done = 0;
    if (words) {  // both ends 16-byte aligned
        const int n = bytes / 16;
        for (int i = threadIdx.x; i < n; i += blockDim.x)
            reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
        done = n * 16;
    }
    for (int i = done + threadIdx.x; i < bytes; i += blockDim.x) dst[i] = src[i];
}

template <int N, int CI, int CO, class T>
__global__ void vec_color_staged(const __grid_constant__ ColorOp<T> op) {
    extern __shared__ __align__(16) unsigned char vec_stage[];
    T* const stage = reinterpret_cast<T*>(vec_stage);
    const int width = op.dst.width, height = op.dst.height;
    const int px0 = blockIdx.x * blockDim.x * N;  // the block's segment of each row
    if (px0 >= width) return;                     // the whole block: no barrier is skipped
    const int seg = min(static_cast<int>(blockDim.x) * N, width - px0);
    const int in_bytes = seg * CI * static_cast<int>(sizeof(T)), out_bytes = seg * CO * static_cast<int>(sizeof(T));
    for (int y = blockIdx.y; y < height; y += gridDim.y) {
        const auto* src = reinterpret_cast<const unsigned char*>(op.src.template row<const T>(y) + px0 * CI);
        auto* dst = reinterpret_cast<unsigned char*>(op.dst.template row<T>(y) + px0 * CO);
        block_copy(vec_stage, src, in_bytes, (reinterpret_cast<std::uintptr_t>(src) & 15) == 0);
        __syncthreads();
        // Threads past the segment's end compute on stale samples; their outputs are not copied out.
        T in[N * CI], out[N * CO];
        load_run<false>(stage + threadIdx.x * N * CI, in, N * CI);
#pragma unroll
        for (int p = 0; p < N; ++p) {
#pragma unroll
            for (int r = 0; r < (CO < 3 ? CO : 3); ++r)
                out[p * CO + r] = ColorOp<T>::sample(op.matrix, in + p * CI, r, color_step(CI));
            if constexpr (CO == 4) out[p * CO + 3] = in[p * CI + 3];  // alpha is copied
        }
        __syncthreads();  // every thread has its samples: the stage takes the outputs
        store_run(stage + threadIdx.x * N * CO, out, N * CO);
        __syncthreads();
        block_copy(dst, vec_stage, out_bytes, (reinterpret_cast<std::uintptr_t>(dst) & 15) == 0);
        __syncthreads();  // the next row reuses the stage
    }
}

// `then`: a per-sample node applied as each output is stored (FilterRun::then).
template <int N, int C, class T>
__global__ void vec_blend(const __grid_constant__ BlendOp<T> op, const __grid_constant__ ThenSamples<T> then) {
    const int width = op.dst.width, height = op.dst.height;
    const int x0 = (blockIdx.x * blockDim.x + threadIdx.x) * N;
    if (x0 >= width) return;
    const int count = min(N, width - x0);
    for (int y = blockIdx.y; y < height; y += gridDim.y) {
        T a[N * C], b[N * C], out[N * C];
        load_run(op.a.template row<const T>(y) + x0 * C, a, count * C);
        load_run(op.b.template row<const T>(y) + x0 * C, b, count * C);
#pragma unroll
        for (int i = 0; i < N * C; ++i) out[i] = then(op.sample(a[i], b[i]));
        store_run(op.dst.template row<T>(y) + x0 * C, out, count * C);
    }
}

// Calls f(std::integral_constant<int, N>) for the schedule's N (the parser allows 1, 2, 4, 8, 16).
template <class F>
void with_vec_pixels(int n, F&& f) {
    if (!cuda::with_one_of<1, 2, 4, 8, 16>(n, f))
        throw std::invalid_argument("vec:" + std::to_string(n) + ": N must be 1, 2, 4, 8 or 16");
}

inline dim3 vec_grid(int width, int height, int pixels, int threads) {
    const int runs = (width + pixels - 1) / pixels;
    return dim3((runs + threads - 1) / threads, std::min(height, 65535));
}

template <class T>
void launch_vec(const VecSchedule& vec, const ColorOp<T>& op, cudaStream_t stream, int block) {
    if (op.dst.empty()) return;
    with_vec_pixels(vec.pixels, [&](auto n) {
        with_channels(op.src.channels, [&](auto ci) {
            with_channels(op.dst.channels, [&](auto co) {
                // 1 channel in: gray (a copy) or 3 channels out, read as R = G = B.
                if constexpr ((ci() >= 3 && (co() == 1 || co() == ci())) || (ci() == 1 && (co() == 1 || co() == 3))) {
                    // Staged for float only: docs/performance.md#vec-staging.
                    if constexpr (ci() == 3 && sizeof(T) == 4) {
                        constexpr auto kernel = vec_color_staged<n(), ci(), co(), T>;
                        const int per_thread = n() * std::max(ci(), co()) * static_cast<int>(sizeof(T));
                        const int threads =
                            std::min(block_threads<kernel>(block), 48 * 1024 / per_thread);  // stage <= 48 KiB
                        kernel<<<vec_grid(op.dst.width, op.dst.height, n(), threads), threads,
                                 static_cast<std::size_t>(threads) * per_thread, stream>>>(op);
                    } else {
                        constexpr auto kernel = vec_color<n(), ci(), co(), T>;
                        const int threads = block_threads<kernel>(block);
                        kernel<<<vec_grid(op.dst.width, op.dst.height, n(), threads), threads, 0, stream>>>(op);
                    }
                } else
                    throw std::logic_error("colour matrix from " + std::to_string(ci()) + " to " +
                                           std::to_string(co()) + " channels");
            });
        });
    });
}

template <class T>
void launch_vec(const VecSchedule& vec, const BlendOp<T>& op, cudaStream_t stream, int block,
                const ThenSamples<T>& then = {}) {
    if (op.dst.empty()) return;
    with_vec_pixels(vec.pixels, [&](auto n) {
        with_channels(op.dst.channels, [&](auto c) {
            constexpr auto kernel = vec_blend<n(), c(), T>;
            const int threads = block_threads<kernel>(block);
            kernel<<<vec_grid(op.dst.width, op.dst.height, n(), threads), threads, 0, stream>>>(op, then);
        });
    });
}

// vec:N for the kinds that map samples one by one (threshold, scale,
// gamma): a thread's N pixels are N*C samples, loaded and stored as whole
// words and mapped by the op's sample(), the function the per-pixel path calls.
// 8-bit ops that carry their 256 results (gamma's double pow, scale) look
// them up from shared memory, as the CPU does: the same values by construction.
template <int N, int C, class Op>
__global__ void vec_samples(const __grid_constant__ Op op) {
    using T = typename Op::Sample;
    constexpr bool kTable = std::is_same_v<T, std::uint8_t> && requires(const Op& o) {
        o.table[255];
    };
    __shared__ std::uint8_t table[kTable ? 256 : 1];
    if constexpr (kTable) {
        for (int i = threadIdx.x; i < 256; i += blockDim.x) table[i] = op.table[i];
        __syncthreads();
    }
    const int width = op.dst.width, height = op.dst.height;
    const int x0 = (blockIdx.x * blockDim.x + threadIdx.x) * N;
    if (x0 >= width) return;
    const int count = min(N, width - x0) * C;
    for (int y = blockIdx.y; y < height; y += gridDim.y) {
        T v[N * C];
        load_run(op.src.template row<const T>(y) + x0 * C, v, count);
#pragma unroll
        for (int i = 0; i < N * C; ++i) {
            if constexpr (kTable)
                v[i] = table[v[i]];
            else
                v[i] = op.sample(v[i]);
        }
        store_run(op.dst.template row<T>(y) + x0 * C, v, count);
    }
}

template <class Op>
requires PerSampleOpType<Op>
void launch_vec(const VecSchedule& vec, const Op& op, cudaStream_t stream, int block) {
    if (op.dst.empty()) return;
    with_vec_pixels(vec.pixels, [&](auto n) {
        with_channels(op.dst.channels, [&](auto c) {
            constexpr auto kernel = vec_samples<n(), c(), Op>;
            const int threads = block_threads<kernel>(block);
            kernel<<<vec_grid(op.dst.width, op.dst.height, n(), threads), threads, 0, stream>>>(op);
        });
    });
}

// vec:N for the other pointwise kinds (hsv, hls): a thread computes a run of
// N pixels of a row with the op's per-pixel operator().
template <int N, class Op>
__global__ void vec_pixels(const __grid_constant__ Op op, int width, int height) {
    const int x0 = (blockIdx.x * blockDim.x + threadIdx.x) * N;
    if (x0 >= width) return;
    const int count = min(N, width - x0);
    for (int y = blockIdx.y; y < height; y += gridDim.y)
        for (int p = 0; p < count; ++p) op(x0 + p, y);
}

template <class Op>
requires(!SeparableOp<Op> && !PerSampleOpType<Op>)  // stencils never take vec:N (cbi::supports)
    void launch_vec(const VecSchedule& vec, const Op& op, cudaStream_t stream, int block) {
    if (op.dst.empty()) return;
    with_vec_pixels(vec.pixels, [&](auto n) {
        constexpr auto kernel = vec_pixels<n(), Op>;
        const int threads = block_threads<kernel>(block);
        kernel<<<vec_grid(op.dst.width, op.dst.height, n(), threads), threads, 0, stream>>>(op, op.dst.width,
                                                                                            op.dst.height);
    });
}

const std::optional<Filter> kNoThen{};

template <class Op>
constexpr bool kIsBlendOp = false;
template <class T>
constexpr bool kIsBlendOp<BlendOp<T>> = true;
template <class T>
ThenSamples<T> then_of(const BlendOp<T>& op, const std::optional<Filter>& then) {
    return then_samples<T>(then, op.dst);
}

struct CudaLaunch {
    int width, height;
    cudaStream_t stream;
    int block;
    const char* what;  // for error messages
    TileOrder order;   // the order smem, sep and stream blocks take tiles in
    const std::optional<Filter>& then;  // applied as outputs are stored: sep and stream only (cuda_applies_then)
    const BlendRun* blend = nullptr;    // a blend of the stencil and its source, applied before `then`: sep only

    template <class Schedule, class Op>
    void operator()(Schedule schedule, const Op& op) const {
        constexpr bool kThen = ((std::is_same_v<Schedule, SepTileSchedule> ||
                                 std::is_same_v<Schedule, StreamSchedule>)&&SeparableOp<Op>) ||
                               (std::is_same_v<Schedule, VecSchedule> && kIsBlendOp<Op>);
        if constexpr (!kThen)
            if (then) throw std::logic_error(std::string(what) + ": this kernel does not apply a per-sample node");
        constexpr bool kSep = std::is_same_v<Schedule, SepTileSchedule> && SeparableOp<Op>;
        if constexpr (!kSep)
            if (blend) throw std::logic_error(std::string(what) + ": only sep:WxH blends a stencil with its source");
        // One kernel per (schedule family, op): the generic index-map kernel is
        // not instantiated for the tiled families' stencils.
        if constexpr (std::is_same_v<Schedule, SmemTileSchedule> && SeparableOp<Op>) {
            note_kernel_path(KernelPath::cuda_smem);
            launch_smem(schedule, order, op, stream, block);
            CBI_CUDA_CHECK(cudaGetLastError(), std::string("launch ") + what + " (smem)");
        } else if constexpr (kSep) {
            note_kernel_path(KernelPath::cuda_sep);
            SepStore<typename Op::Sample> store{then_samples<typename Op::Sample>(then, op.dst)};
            if (!blend) {
                launch_sep(schedule, order, op, stream, block, store);
            } else if constexpr (std::remove_cvref_t<decltype(op.src)>::kStored) {
                const auto w = [](double v) { return static_cast<float>(v); };  // as BlendOp's weights
                store.stencil_weight = w(blend->a ? blend->blend.alpha : blend->blend.beta);
                store.source_weight = w(blend->a ? blend->blend.beta : blend->blend.alpha);
                store.gamma = w(blend->blend.gamma);
                // One kernel for all borders (the source's rule a run-time value, as stream's).
                launch_sep<true>(schedule, order, cuda::any_border(op), stream, block, store);
            } else {
                throw std::logic_error("a fused blend reads a stored image");
            }
            CBI_CUDA_CHECK(cudaGetLastError(), std::string("launch ") + what + " (sep)");
        } else if constexpr (std::is_same_v<Schedule, StreamSchedule> && SeparableOp<Op>) {
            // The executor fuses colour nodes into smem and sep only: stream reads stored images.
            if constexpr (std::remove_cvref_t<decltype(op.src)>::kStored) {
                const auto any = cuda::any_border(op);
                // The 8-bit kernel takes what it can (equal sizes up to 9, lanes that cannot overflow).
                const auto samples = then_samples<typename Op::Sample>(then, op.dst);
                const bool eight_bit = cuda::launch_stream8(schedule, any, stream, block, order, samples);
                if (!eight_bit) cuda::launch_stream(schedule, any, stream, block, order, samples);
                note_kernel_path(eight_bit ? KernelPath::cuda_stream8 : KernelPath::cuda_stream);
            } else {
                throw std::logic_error("stream:WxH does not take fused colour nodes");
            }
            CBI_CUDA_CHECK(cudaGetLastError(), std::string("launch ") + what + " (stream)");
        } else if constexpr (std::is_same_v<Schedule, VecSchedule>) {
            note_kernel_path(KernelPath::cuda_vec);
            if constexpr (kIsBlendOp<Op>)
                launch_vec(schedule, op, stream, block, then_of(op, then));
            else if constexpr (requires { launch_vec(schedule, op, stream, block); })
                launch_vec(schedule, op, stream, block);
            else
                throw std::logic_error("vec:N runs pointwise filters only");
            CBI_CUDA_CHECK(cudaGetLastError(), std::string("launch ") + what + " (vec)");
        } else {
            cuda::launch_per_pixel(schedule, op, width, height, stream, block, what);
        }
    }
};

// dispatch_node's launch for cuda_strip_height: asks the 8-bit stream
// kernel for its strip height instead of launching it.
struct StreamStripHeight {
    int block, device;
    TileOrder order;
    int* height;

    template <class Schedule, class Op>
    void operator()(Schedule schedule, const Op& op) const {
        if constexpr (std::is_same_v<Schedule, StreamSchedule> && SeparableOp<Op>) {
            if constexpr (std::remove_cvref_t<decltype(op.src)>::kStored)
                *height = cuda::stream8_strip_height(schedule.tile_width, cuda::any_border(op), block, order, device);
        }
    }
};

// Otsu's threshold on the device, on the node's stream and without a host
// synchronisation: the histogram of the whole input (each warp's bins in
// shared memory, rows read as 16-byte words, each block's bins then added
// into the scratch's); the last block to finish computes the level from it
// (otsu_level_of's steps, the host's arithmetic: the sums that carry from bin
// to bin in one thread, each bin's variance in a thread of its own); then the
// threshold, every thread reading the level the kernel before wrote.
struct OtsuScratch {
    std::uint32_t hist[kOtsuBins];
    int level;
    unsigned blocks_done;
};

struct OtsuApplyOp {
    ImageView src, dst;
    const int* level;
    std::uint8_t hi, lo;  // above the level / not: binary or binary_inv's values

    __device__ void operator()(int x, int y) const {
        dst.row<std::uint8_t>(y)[x] = src.row<const std::uint8_t>(y)[x] > *level ? hi : lo;
    }
};

constexpr int kOtsuThreads = 256, kOtsuWarps = kOtsuThreads / 32;

__global__ void __launch_bounds__(kOtsuThreads)
    otsu_histogram(const ImageView src, OtsuScratch* scratch, double pixels, unsigned blocks) {
    __shared__ std::uint32_t bins[kOtsuWarps][kOtsuBins];  // a warp's own bins: fewer lanes on one address
    __shared__ bool last;
    for (int i = threadIdx.x; i < kOtsuWarps * kOtsuBins; i += blockDim.x) bins[i / kOtsuBins][i % kOtsuBins] = 0;
    __syncthreads();
    std::uint32_t* const mine = bins[threadIdx.x / 32];
    const bool words = (src.stride & 15) == 0 && (reinterpret_cast<std::uintptr_t>(src.data) & 15) == 0;
    const int across = gridDim.x * blockDim.x, first = blockIdx.x * blockDim.x + threadIdx.x;
    for (int y = blockIdx.y; y < src.height; y += gridDim.y) {
        const std::uint8_t* row = src.row<const std::uint8_t>(y);
        int done = 0;
        if (words) {
            const int n = src.width / 16;
            for (int i = first; i < n; i += across) {
                const uint4 w = __ldg(reinterpret_cast<const uint4*>(row) + i);
                const std::uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
                for (int q = 0; q < 16; ++q) atomicAdd(&mine[(ws[q / 4] >> (8 * (q % 4))) & 0xFF], 1u);
            }
            done = n * 16;
        }
        for (int x = done + first; x < src.width; x += across) atomicAdd(&mine[row[x]], 1u);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < kOtsuBins; i += blockDim.x) {
        std::uint32_t sum = 0;
#pragma unroll
        for (int w = 0; w < kOtsuWarps; ++w) sum += bins[w][i];
        if (sum != 0) atomicAdd(&scratch->hist[i], sum);
    }
    // The last block computes the level (the threadFenceReduction pattern):
    // every block's adds are visible before its count is.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&scratch->blocks_done, 1u) == blocks - 1;
    __syncthreads();
    if (!last) return;
    std::uint32_t* const hist = bins[0];
    for (int i = threadIdx.x; i < kOtsuBins; i += blockDim.x) hist[i] = __ldcg(&scratch->hist[i]);  // not L1's copy
    __syncthreads();
    // otsu_level_of's steps: what carries from bin to bin in one thread, each
    // bin's variance in its own, the first largest kept in one thread.
    using namespace otsu_detail;
    __shared__ Carry carry[kOtsuBins];
    __shared__ double sigmas[kOtsuBins], mu;
    if (threadIdx.x == 0) {
        const double scale = div(1.0, pixels);
        mu = mean_level(hist, scale);
        Carry c;
        for (int i = 0; i < kOtsuBins; ++i) {
            step(c, mul(static_cast<double>(hist[i]), scale), i);
            carry[i] = c;
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < kOtsuBins; i += blockDim.x) sigmas[i] = carry[i].skip ? 0.0 : sigma(carry[i], mu);
    __syncthreads();
    if (threadIdx.x == 0) {
        double max_sigma = 0;
        int level = 0;
        for (int i = 0; i < kOtsuBins; ++i)
            if (sigmas[i] > max_sigma) {  // a skipped bin's 0 never is
                max_sigma = sigmas[i];
                level = i;
            }
        scratch->level = level;
    }
}

// vec:N's threshold at the level: N samples a thread, moved as whole words,
// compared four at a time.
template <int N>
__global__ void otsu_apply(const ImageView src, const ImageView dst, const int* level, std::uint8_t hi,
                           std::uint8_t lo) {
    const int x0 = (blockIdx.x * blockDim.x + threadIdx.x) * N;
    if (x0 >= dst.width) return;
    const int count = min(N, dst.width - x0);
    const std::uint32_t at = cuda::splat<std::uint32_t>(static_cast<std::uint8_t>(*level)),
                        hi4 = cuda::splat<std::uint32_t>(hi), lo4 = cuda::splat<std::uint32_t>(lo);
    for (int y = blockIdx.y; y < dst.height; y += gridDim.y) {
        std::uint8_t v[N];
        load_run(src.row<const std::uint8_t>(y) + x0, v, count);
#pragma unroll
        for (int i = 0; i < N; i += 4) {
            std::uint32_t w = 0;
            memcpy(&w, v + i, min(4, N - i));
            const std::uint32_t above = __vcmpgtu4(w, at);  // 0xFF in each byte above the level
            w = (above & hi4) | (~above & lo4);
            memcpy(v + i, &w, min(4, N - i));
        }
        store_run(dst.row<std::uint8_t>(y) + x0, v, count);
    }
}

bool is_otsu(const Filter& f) {
    const auto* t = std::get_if<ThresholdFilter>(&f);
    return t && t->otsu;
}

// Scratch for a caller that passes none (a direct run_node_cuda): allocated
// and freed in stream order, so still no host synchronisation.
struct StreamScratch {
    void* data = nullptr;
    cudaStream_t stream;
    StreamScratch(std::size_t bytes, cudaStream_t s) : stream(s) {
        CBI_CUDA_CHECK(cudaMallocAsync(&data, bytes, stream), "cudaMallocAsync of a node's scratch");
    }
    ~StreamScratch() { cudaFreeAsync(data, stream); }
};

void run_otsu_cuda(const FilterRun& node, const ImageView& src, const ImageView& dst, cudaStream_t stream, int block,
                   void* scratch) {
    if (dst.empty()) return;
    std::optional<StreamScratch> owned;
    if (scratch == nullptr) scratch = owned.emplace(sizeof(OtsuScratch), stream).data;
    auto* s = static_cast<OtsuScratch*>(scratch);
    CBI_CUDA_CHECK(cudaMemsetAsync(s, 0, sizeof(OtsuScratch), stream), "cudaMemsetAsync of Otsu's histogram");
    // A few blocks across a row (a thread a 16-byte word), up to 512 in all: each adds its 256 bins once.
    const int gx = std::min((src.width + 16 * kOtsuThreads - 1) / (16 * kOtsuThreads), 4);
    const int gy = std::min(src.height, std::max(1, 512 / gx));
    otsu_histogram<<<dim3(gx, gy), kOtsuThreads, 0, stream>>>(src, s, static_cast<double>(src.pixels()),
                                                              static_cast<unsigned>(gx * gy));
    CBI_CUDA_CHECK(cudaGetLastError(), "launch Otsu's histogram kernel");
    const auto& f = std::get<ThresholdFilter>(node.filter);
    const ThresholdOp<std::uint8_t> at = threshold_op<std::uint8_t>(at_otsu_level(f, 0), src, dst);
    if (node.schedule.family == ScheduleFamily::vec) {
        with_vec_pixels(node.schedule.width, [&](auto n) {
            constexpr auto kernel = otsu_apply<n()>;
            const int threads = block_threads<kernel>(block);
            kernel<<<vec_grid(dst.width, dst.height, n(), threads), threads, 0, stream>>>(src, dst, &s->level, at.hi,
                                                                                          at.lo);
        });
        note_kernel_path(KernelPath::cuda_vec);
        CBI_CUDA_CHECK(cudaGetLastError(), "launch Otsu's threshold kernel (vec)");
        return;
    }
    const OtsuApplyOp op{src, dst, &s->level, at.hi, at.lo};
    const CudaLaunch launch{dst.width,           dst.height, stream, block, "otsu threshold kernel",
                            node.schedule.order, kNoThen};
    with_schedule(node.schedule, [&](auto schedule) {
        if constexpr (kStagesTiles<decltype(schedule)>)
            launch(NaiveSchedule{}, op);  // tile-staging schedules take stencils only (cbi::supports)
        else
            launch(schedule, op);
    });
}

void check_block(int block) {
    if (block < 1 || block > 1024) throw std::invalid_argument("--block must be from 1 to 1024");
}

}  // namespace

std::size_t cuda_scratch_bytes(const FilterRun& node) {
    return is_otsu(node.filter) ? sizeof(OtsuScratch) : 0;
}

void run_node_cuda(const FilterRun& node, const ImageView& src, const ImageView& dst, cudaStream_t stream, int block) {
    run_node_cuda(node, src, dst, stream, block, nullptr);
}

void run_node_cuda(const FilterRun& node, const ImageView& src, const ImageView& dst, cudaStream_t stream, int block,
                   void* scratch) {
    check_block(block);
    if (node.then && !cuda_applies_then(node, src.depth))
        throw std::logic_error(to_string(node.filter) + "@" + node.schedule.to_string() +
                               ": this kernel does not apply a per-sample node as it stores");
    if (category_of(node.filter) == Category::window) return run_window_cuda(node, src, dst, stream, block);
    if (node.fused_stencil) return run_chain_cuda(node, src, dst, stream, block);
    const bool otsu = is_otsu(node.filter);
    if (otsu)
        if (const std::string why = refuses_input(node.filter, src.depth, src.channels); !why.empty())
            throw Error(to_string(node.filter), why);
    try {
        if (otsu)
            run_otsu_cuda(node, src, dst, stream, block, scratch);
        else
            dispatch_node(
                node, src, dst,
                CudaLaunch{dst.width, dst.height, stream, block, "filter kernel", node.schedule.order, node.then});
    } catch (const Unsupported& e) {  // name the node, keeping the kind of error; built only on this path
        throw Unsupported(to_string(node.filter) + "@" + node.schedule.to_string(), e.what());
    } catch (const DeviceLost& e) {
        throw DeviceLost(to_string(node.filter) + "@" + node.schedule.to_string(), e.what());
    } catch (const Error& e) {
        throw Error(to_string(node.filter) + "@" + node.schedule.to_string(), e.what());
    }
}

bool cuda_applies_then(const FilterRun& node, Depth depth) {
    const ScheduleFamily f = node.schedule.family;
    return is_stencil(node.filter) && !node.fused_stencil &&
           (f == ScheduleFamily::sep || f == ScheduleFamily::stream) &&
           !(node.then && depth == Depth::u8 && looks_up_8bit(*node.then));
}

int cuda_strip_height(const FilterRun& node, Depth depth, int src_channels, int channels, int width, int height,
                      int device, int block) {
    if (node.fused_stencil)
        return cuda_chain_strip_height(node, depth, src_channels, channels, width, height, device, block);
    if (node.schedule.family != ScheduleFamily::stream || depth != Depth::u8) return 0;
    const ImageView src{nullptr, width, height, src_channels, depth, 0},
        dst{nullptr, width, height, channels, depth, 0};
    int h = 0;
    dispatch_node(node, src, dst, StreamStripHeight{block, device, node.schedule.order, &h});
    return h;
}

bool cuda_blend_applies_then(const ScheduleSpec& schedule, Depth depth, const Filter& then) {
    return schedule.family == ScheduleFamily::vec && !(depth == Depth::u8 && looks_up_8bit(then));
}

bool cuda_sep_blend_fits(const BlendRun& node) {
    return node.schedule.family == ScheduleFamily::sep && node.a.has_value() != node.b.has_value() &&
           is_stencil(node.a ? *node.a : *node.b);
}

void run_blend_of_stencil_cuda(const BlendRun& node, const ImageView& src, const ImageView& dst, cudaStream_t stream,
                               int block) {
    if (!cuda_sep_blend_fits(node)) throw std::logic_error("sep:WxH blends one stencil with its source only");
    check_block(block);
    const FilterRun stencil{node.a ? *node.a : *node.b, node.border, node.schedule, {}, {}, node.then};
    dispatch_node(
        stencil, src, dst,
        CudaLaunch{dst.width, dst.height, stream, block, "fused blend kernel", node.schedule.order, node.then, &node});
}

void run_blend_cuda(const BlendFilter& blend, const ScheduleSpec& schedule, const ImageView& a, const ImageView& b,
                    const ImageView& dst, cudaStream_t stream, int block, const std::optional<Filter>& then) {
    if (then && !cuda_blend_applies_then(schedule, a.depth, *then))
        throw std::logic_error("blend@" + schedule.to_string() + ": this kernel does not apply a per-sample node");
    check_block(block);
    dispatch_blend(blend, schedule, a, b, dst,
                   CudaLaunch{dst.width, dst.height, stream, block, "blend kernel", schedule.order, then});
}

}  // namespace cbi
