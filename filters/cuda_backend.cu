#include "filters/cuda_backend.hpp"

#include <algorithm>
#include <atomic>
#include <type_traits>
#include <string>

#include "filters/dispatch.hpp"
#include "pipeline/cuda_runtime.hpp"
#include "pipeline/error.hpp"

namespace cbi {
namespace {

// Thesis listing 5 generalised: the global thread index goes through the
// node's schedule to find the pixel; the op computes it.
template <class Schedule, class Op>
__global__ void apply_schedule(Schedule schedule, Op op, std::uint32_t n, int width, int height) {
    const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const Pixel p = schedule.map(i, width, height);
    op(p.x, p.y);
}

// Ops that expose separable passes (blur, gaussian, sobel).
template <class Op>
concept SeparableOp = requires(const Op& op) { op.passes(); op.finish(nullptr); };

// The smem:WxH schedule: block (bx, by) computes the tile_w x tile_h output
// tile at (bx*tile_w, by*tile_h). Per channel it stages the tile plus a
// halo of border-resolved samples in shared memory (consecutive threads
// read consecutive samples), computes each pass's row sums for every staged
// row into shared memory, then combines them down the columns. Sums use
// weighted_sum in the same order as the per-pixel path: bit-identical.
template <class Op>
__global__ void smem_stencil(Op op, int tile_w, int tile_h, int halo) {
    using T = typename Op::Sample;
    using Acc = typename Op::Acc;
    extern __shared__ __align__(16) unsigned char smem[];
    const int stage_w = tile_w + 2 * halo, stage_h = tile_h + 2 * halo;
    T* stage = reinterpret_cast<T*>(smem);
    Acc* rows = reinterpret_cast<Acc*>(smem + (stage_w * stage_h * sizeof(T) + 15) / 16 * 16);
    const int x0 = blockIdx.x * tile_w, y0 = blockIdx.y * tile_h;
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
                    weighted_sum<Acc>(wx, kw, [&](int i) { return static_cast<Acc>(line[i]); });
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
void launch_smem(const SmemTileSchedule& tile, const Op& op, cudaStream_t stream, int block) {
    using T = typename Op::Sample;
    using Acc = typename Op::Acc;
    int halo = 0;
    for (int p = 0; p < op.passes(); ++p) halo = std::max({halo, op.kw(p) / 2, op.kh(p) / 2});
    const int tw = tile.tile_width, th = tile.tile_height;
    const std::size_t stage_w = tw + 2 * halo, stage_h = th + 2 * halo;
    const std::size_t bytes = (stage_w * stage_h * sizeof(T) + 15) / 16 * 16 + op.passes() * stage_h * tw * sizeof(Acc);
    int device = 0, limit = 0;
    CBI_CUDA_CHECK(cudaGetDevice(&device), "cudaGetDevice");
    CBI_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "cudaDeviceGetAttribute");
    if (bytes > static_cast<std::size_t>(limit))
        throw std::invalid_argument("smem:" + std::to_string(tw) + "x" + std::to_string(th) + ": the tile plus its halo of " +
                                    std::to_string(halo) + " needs " + std::to_string(bytes / 1024) +
                                    " KiB of shared memory, more than this GPU's " + std::to_string(limit / 1024) +
                                    " KiB; use a smaller tile");
    if (bytes > 48 * 1024)
        CBI_CUDA_CHECK(cudaFuncSetAttribute(smem_stencil<Op>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(bytes)),
                       "cudaFuncSetAttribute(smem)");
    const dim3 grid((op.dst.width + tw - 1) / tw, (op.dst.height + th - 1) / th);
    smem_stencil<<<grid, block, bytes, stream>>>(op, tw, th, halo);
}

// ------------------------------------------------------------------ sep:WxH
// Issue 7. A block computes a tile_w x tile_h output tile in three steps:
//  1. stage the tile plus a halo of border-resolved input samples in shared
//     memory: a flat loop with 8 loads in flight per thread before the first
//     store (a tile is latency-bound otherwise: one DRAM round trip per row
//     made 8u:3 gaussian:9 10x the floor); interior tiles load aligned 4-byte
//     words with consecutive threads on consecutive words (coalesced), others
//     go sample by sample through the border rule;
//  2. row pass: each thread takes a run of kSepRun consecutive outputs of one
//     channel in one staged row and computes each pass's row sums from a
//     register window (R + k - 1 shared-memory reads for R outputs, not R*k);
//  3. column pass: each thread takes a run of kSepRun outputs down one sample
//     column, sums the row sums the same way, finishes and stores (lanes
//     along the row: coalesced stores).
// Weighted sums add their taps through weighted_step in weighted_sum's order,
// so results are bit-identical to the per-pixel path. Box filters slide
// running sums instead (cost independent of k): integer sums are exact; float
// (double) sums differ from the direct sum by rounding only, and an output
// whose running sum is not finite (an Inf or NaN in or near its window) is
// recomputed directly from the stage, so non-finite inputs behave as in the
// per-pixel path.
constexpr int kSepRun = 8;

template <class Op>
concept UnitWeightOp = requires { requires Op::kUnitWeights; };

// Shared-memory layout of one sep:WxH block, computed on the host.
struct SepLayout {
    int tile_w, tile_h;  // outputs per block: the schedule's W x H
    int tw, th;          // rounded up to whole runs
    int halo;            // largest kernel radius over the passes
    int rows;            // staged rows: th + 2 halo
    int row_samples;     // staged samples per row: (tw + 2 halo) * channels
    int stage_stride;    // samples from one staged row to the next (an odd number of 4-byte words: no bank conflicts)
    int sum_stride;      // Acc from one row-sum row to the next (odd)
    int kmax;            // 2 halo + 1: room for each weight vector
    int tiles_y;         // tile rows of the image (blocks loop when the grid's y is capped)
    unsigned sums_off, weights_off, bytes;
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
            if (g + ii < k) {  // uniform across the block
                const W wi = w[g + ii];  // never null here: unit weights take run_running_sums
#pragma unroll
                for (int o = 0; o < R; ++o) acc[o] = weighted_add<Acc>(acc[o], wi, win[o + ii]);
            }
        }
#pragma unroll
        for (int o = 0; o < R; ++o) win[o] = win[R + o];
    }
}

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

template <class Op>
__global__ void sep_stencil(const __grid_constant__ Op op, const SepLayout L) {
    using T = typename Op::Sample;
    using Acc = typename Op::Acc;
    using W = typename Op::W;
    constexpr int R = kSepRun;
    constexpr bool unit = UnitWeightOp<Op>;
    extern __shared__ __align__(16) unsigned char smem[];
    T* const stage = reinterpret_cast<T*>(smem);
    Acc* const sums = reinterpret_cast<Acc*>(smem + L.sums_off);
    W* const weights = reinterpret_cast<W*>(smem + L.weights_off);
    const int C = op.src.view.channels;
    const int width = op.dst.width, height = op.dst.height;
    const int passes = op.passes();
    const int tid = threadIdx.x, nthreads = blockDim.x;

    if constexpr (!unit) {  // weights to shared memory: [pass][x, y][kmax]
        for (int p = 0; p < passes; ++p)
            for (int i = tid; i < L.kmax; i += nthreads) {
                weights[(2 * p) * L.kmax + i] = i < op.kw(p) ? op.wx(p)[i] : W(0);
                weights[(2 * p + 1) * L.kmax + i] = i < op.kh(p) ? op.wy(p)[i] : W(0);
            }
    }
    const int x0 = blockIdx.x * L.tile_w;
    // Interior tiles (in x) load whole aligned 4-byte words of each staged row:
    // fewer, wider loads, all of a thread's loads in flight before its first
    // store. A staged row then starts `lead` samples into its shared-memory row.
    const std::size_t sz = sizeof(T);
    const long long a_off = static_cast<long long>(x0 - L.halo) * C * sz;  // bytes into the image row
    const long long e_off = static_cast<long long>(x0 + L.tw + L.halo) * C * sz;
    // Raw words only from stored images (not from a fused colour source).
    const bool words = std::remove_cvref_t<decltype(op.src)>::kStored && a_off >= 0 && ((e_off + 3) & ~3ll) <= static_cast<long long>(width) * C * sz &&
                       (op.src.view.stride & 3) == 0 && (reinterpret_cast<std::uintptr_t>(op.src.view.data) & 3) == 0;
    const int lead = words ? static_cast<int>((a_off & 3) / sz) : 0;
    const int row_words = words ? static_cast<int>(((a_off & 3) + L.row_samples * sz + 3) / 4) : 0;
    const unsigned word_magic = row_words > 1 ? 0xffffffffu / row_words + 1 : 0;  // idx / row_words = umulhi(idx, magic)
    std::uint32_t const_word = 0;  // a row of a constant border, as words
    for (int b = 0; b < 4 / static_cast<int>(sz); ++b)
        memcpy(reinterpret_cast<unsigned char*>(&const_word) + b * sz, &op.src.constant, sz);
    const unsigned sample_magic = L.row_samples > 1 ? 0xffffffffu / L.row_samples + 1 : 0;
    for (int by = blockIdx.y; by < L.tiles_y; by += gridDim.y) {
        const int y0 = by * L.tile_h;
        // 1. Stage: a flat loop over the tile's words (or samples), kU loads per
        // thread issued before any is stored.
        constexpr int kU = 8;
        if (words) {
            std::uint32_t* const stage_words = reinterpret_cast<std::uint32_t*>(stage);
            const int stride_words = static_cast<int>(L.stage_stride * sz / 4);
            const int total = L.rows * row_words;
            const long long first_word = (a_off & ~3ll) / 4;
            for (int base = tid; base < total; base += kU * nthreads) {
                std::uint32_t v[kU];
                int at[kU];
#pragma unroll
                for (int u = 0; u < kU; ++u) {
                    const int idx = base + u * nthreads;
                    at[u] = -1;
                    if (idx < total) {
                        const int r = row_words > 1 ? static_cast<int>(__umulhi(static_cast<unsigned>(idx), word_magic)) : idx;
                        const int w = idx - r * row_words;
                        const T* row = op.src.row(y0 - L.halo + r);
                        v[u] = row == nullptr ? const_word : __ldg(reinterpret_cast<const std::uint32_t*>(row) + first_word + w);
                        at[u] = r * stride_words + w;
                    }
                }
#pragma unroll
                for (int u = 0; u < kU; ++u)
                    if (at[u] >= 0) stage_words[at[u]] = v[u];
            }
        } else {
            const int total = L.rows * L.row_samples;
            for (int base = tid; base < total; base += kU * nthreads) {
                T v[kU];
                int at[kU];
#pragma unroll
                for (int u = 0; u < kU; ++u) {
                    const int idx = base + u * nthreads;
                    at[u] = -1;
                    if (idx < total) {
                        const int r = L.row_samples > 1 ? static_cast<int>(__umulhi(static_cast<unsigned>(idx), sample_magic)) : idx;
                        const int s = idx - r * L.row_samples;
                        const int px = div_channels(s, C);
                        v[u] = op.src.at(op.src.row(y0 - L.halo + r), x0 - L.halo + px, s - px * C);
                        at[u] = r * L.stage_stride + s;
                    }
                }
#pragma unroll
                for (int u = 0; u < kU; ++u)
                    if (at[u] >= 0) stage[at[u]] = v[u];
            }
        }
        __syncthreads();
        // 2. Row pass: units (row, run of R outputs, channel), rows fastest so
        // that the lanes of a warp read different banks.
        const int cols_x = L.tw / R * C;
        const int units_x = cols_x * L.rows;
        for (int p = 0; p < passes; ++p) {
            const int kw = op.kw(p);
            const W* wx = unit ? nullptr : weights + 2 * p * L.kmax;
            const int off = L.halo - kw / 2;
            Acc* const psums = sums + p * L.rows * L.sum_stride;
            for (int u = tid; u < units_x; u += nthreads) {
                const int j = u / L.rows, r = u - j * L.rows;
                const int run = div_channels(j, C), c = j - run * C;
                const T* line = stage + r * L.stage_stride + lead + (run * R + off) * C + c;
                auto load = [&](int i) { return static_cast<Acc>(line[i * C]); };
                Acc acc[R];
                if constexpr (unit) run_running_sums<R>(acc, kw, load);
                else run_sums<R>(acc, wx, kw, load);
                Acc* out = psums + r * L.sum_stride + run * R * C + c;
#pragma unroll
                for (int o = 0; o < R; ++o) out[o * C] = acc[o];
            }
        }
        __syncthreads();
        // 3. Column pass, finish, store: units (run of R rows, sample column),
        // sample columns fastest: coalesced stores.
        const int cols = L.tw * C;
        const int units_y = cols * (L.th / R);
        for (int u = tid; u < units_y; u += nthreads) {
            const int ry = u / cols, s = u - ry * cols;
            const int tx = div_channels(s, C), c = s - tx * C;
            const int x = x0 + tx;
            if (tx >= L.tile_w || x >= width) continue;
            Acc acc[Op::kMaxPasses][R];
#pragma unroll
            for (int p = 0; p < Op::kMaxPasses; ++p) {
                if (p < passes) {
                    const int kh = op.kh(p);
                    const W* wy = unit ? nullptr : weights + (2 * p + 1) * L.kmax;
                    const Acc* col = sums + (p * L.rows + ry * R + L.halo - kh / 2) * L.sum_stride + s;
                    auto load = [&](int i) { return col[i * L.sum_stride]; };
                    if constexpr (unit) run_running_sums<R>(acc[p], kh, load);
                    else run_sums<R>(acc[p], wy, kh, load);
                } else {
#pragma unroll
                    for (int o = 0; o < R; ++o) acc[p][o] = Acc(0);
                }
            }
#pragma unroll
            for (int o = 0; o < R; ++o) {
                const int ty = ry * R + o, y = y0 + ty;
                if (ty >= L.tile_h || y >= height) break;
                Acc v[Op::kMaxPasses];
#pragma unroll
                for (int p = 0; p < Op::kMaxPasses; ++p) v[p] = acc[p][o];
                if constexpr (unit && std::is_floating_point_v<Acc>) {
                    if (!isfinite(v[0])) {  // the per-pixel path's direct sum, from the stage
                        const int kw = op.kw(0), kh = op.kh(0);
                        v[0] = weighted_sum<Acc>(static_cast<const W*>(nullptr), kh, [&](int j) {
                            const T* line = stage + (ty + L.halo - kh / 2 + j) * L.stage_stride + lead +
                                            (tx + L.halo - kw / 2) * C + c;
                            return weighted_sum<Acc>(static_cast<const W*>(nullptr), kw,
                                                     [&](int i) { return static_cast<Acc>(line[i * C]); });
                        });
                    }
                }
                op.dst.template row<T>(y)[x * C + c] = op.finish(v);
            }
        }
        __syncthreads();  // the next tile reuses the stage and the sums
    }
}

inline int round_up(int v, int m) { return (v + m - 1) / m * m; }

template <class Op>
SepLayout sep_layout(const SepTileSchedule& tile, const Op& op) {
    using T = typename Op::Sample;
    using Acc = typename Op::Acc;
    using W = typename Op::W;
    SepLayout L{};
    int halo = 0;
    for (int p = 0; p < op.passes(); ++p) halo = std::max({halo, op.kw(p) / 2, op.kh(p) / 2});
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
    L.tiles_y = (op.dst.height + L.tile_h - 1) / L.tile_h;
    const auto align16 = [](std::size_t b) { return (b + 15) / 16 * 16; };
    const std::size_t stage_bytes = align16(static_cast<std::size_t>(L.rows) * L.stage_stride * sizeof(T));
    const std::size_t sums_bytes =
        align16(static_cast<std::size_t>(op.passes()) * L.rows * L.sum_stride * sizeof(Acc));
    const std::size_t weight_bytes = UnitWeightOp<Op> ? 0 : std::size_t{2} * op.passes() * L.kmax * sizeof(W);
    const std::size_t bytes = stage_bytes + sums_bytes + weight_bytes;
    if (bytes > (1u << 30)) throw std::invalid_argument("sep: tile too large");
    L.sums_off = static_cast<unsigned>(stage_bytes);
    L.weights_off = static_cast<unsigned>(stage_bytes + sums_bytes);
    L.bytes = static_cast<unsigned>(bytes);
    return L;
}

template <class Op>
void launch_sep(const SepTileSchedule& tile, const Op& op, cudaStream_t stream, int block) {
    if (op.dst.width <= 0 || op.dst.height <= 0) return;
    const SepLayout L = sep_layout(tile, op);
    int device = 0, limit = 0;
    CBI_CUDA_CHECK(cudaGetDevice(&device), "cudaGetDevice");
    CBI_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                   "cudaDeviceGetAttribute");
    if (L.bytes > static_cast<unsigned>(limit))
        throw std::invalid_argument("sep:" + std::to_string(L.tile_w) + "x" + std::to_string(L.tile_h) +
                                    ": the tile plus its halo of " + std::to_string(L.halo) + " needs " +
                                    std::to_string(L.bytes / 1024) + " KiB of shared memory, more than this GPU's " +
                                    std::to_string(limit / 1024) + " KiB; use a smaller tile");
    // Per instantiation and device: the largest dynamic shared memory already
    // allowed (raising it costs a driver call, so only when it grows).
    static std::atomic<unsigned> allowed[64];
    std::atomic<unsigned>& mine = allowed[device & 63];
    if (L.bytes > 48 * 1024 && L.bytes > mine.load(std::memory_order_relaxed)) {
        CBI_CUDA_CHECK(cudaFuncSetAttribute(sep_stencil<Op>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(L.bytes)),
                       "cudaFuncSetAttribute(sep)");
        mine.store(L.bytes, std::memory_order_relaxed);
    }
    static const int max_threads = [] {
        cudaFuncAttributes a{};
        CBI_CUDA_CHECK(cudaFuncGetAttributes(&a, sep_stencil<Op>), "cudaFuncGetAttributes(sep)");
        return a.maxThreadsPerBlock;
    }();
    const int threads = std::min(block, max_threads);  // the result does not depend on it
    const dim3 grid((op.dst.width + L.tile_w - 1) / L.tile_w, std::min(L.tiles_y, 65535));
    sep_stencil<<<grid, threads, L.bytes, stream>>>(op, L);
}

// --------------------------------------------------------------- word loads
// Runs of samples in registers, moved as the widest aligned words that fit:
// 16, 8 or 4 bytes when the address allows, sample by sample otherwise.
template <class T, int N>
__device__ __forceinline__ void load_run(const T* p, T (&v)[N], int count) {
    constexpr int bytes = N * sizeof(T);
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    if (count == N) {
        if constexpr (bytes % 16 == 0)
            if ((a & 15) == 0) {
                uint4 w[bytes / 16];
#pragma unroll
                for (int i = 0; i < bytes / 16; ++i) w[i] = __ldg(reinterpret_cast<const uint4*>(p) + i);
                memcpy(v, w, bytes);
                return;
            }
        if constexpr (bytes % 4 == 0)
            if ((a & 3) == 0) {
                std::uint32_t w[bytes / 4];
#pragma unroll
                for (int i = 0; i < bytes / 4; ++i) w[i] = __ldg(reinterpret_cast<const std::uint32_t*>(p) + i);
                memcpy(v, w, bytes);
                return;
            }
    }
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = i < count ? p[i] : T(0);
}

template <class T, int N>
__device__ __forceinline__ void store_run(T* p, const T (&v)[N], int count) {
    constexpr int bytes = N * sizeof(T);
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    if (count == N) {
        if constexpr (bytes % 16 == 0)
            if ((a & 15) == 0) {
                uint4 w[bytes / 16];
                memcpy(w, v, bytes);
#pragma unroll
                for (int i = 0; i < bytes / 16; ++i) reinterpret_cast<uint4*>(p)[i] = w[i];
                return;
            }
        if constexpr (bytes % 8 == 0)
            if ((a & 7) == 0) {
                uint2 w[bytes / 8];
                memcpy(w, v, bytes);
#pragma unroll
                for (int i = 0; i < bytes / 8; ++i) reinterpret_cast<uint2*>(p)[i] = w[i];
                return;
            }
        if constexpr (bytes % 4 == 0)
            if ((a & 3) == 0) {
                std::uint32_t w[bytes / 4];
                memcpy(w, v, bytes);
#pragma unroll
                for (int i = 0; i < bytes / 4; ++i) reinterpret_cast<std::uint32_t*>(p)[i] = w[i];
                return;
            }
    }
#pragma unroll
    for (int i = 0; i < N; ++i)
        if (i < count) p[i] = v[i];
}

// ------------------------------------------------------------------- vec:N
// Pointwise ops, N pixels per thread: the pixels' samples are loaded as
// whole words, computed in registers by the op's per-sample arithmetic
// (ColorOp::sample, BlendOp::sample: the same functions the per-pixel path
// calls) and stored as whole words. Rows are blockIdx.y (looping when the
// grid's y is capped), runs of N pixels across x.
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
            for (int r = 0; r < (CO < 3 ? CO : 3); ++r) out[p * CO + r] = ColorOp<T>::sample(op.matrix, in + p * CI, r);
            if constexpr (CO == 4) out[p * CO + 3] = in[p * CI + 3];  // alpha is copied
        }
        store_run(op.dst.template row<T>(y) + x0 * CO, out, count * CO);
    }
}

template <int N, int C, class T>
__global__ void vec_blend(const __grid_constant__ BlendOp<T> op) {
    const int width = op.dst.width, height = op.dst.height;
    const int x0 = (blockIdx.x * blockDim.x + threadIdx.x) * N;
    if (x0 >= width) return;
    const int count = min(N, width - x0);
    for (int y = blockIdx.y; y < height; y += gridDim.y) {
        T a[N * C], b[N * C], out[N * C];
        load_run(op.a.template row<const T>(y) + x0 * C, a, count * C);
        load_run(op.b.template row<const T>(y) + x0 * C, b, count * C);
#pragma unroll
        for (int i = 0; i < N * C; ++i) out[i] = op.sample(a[i], b[i]);
        store_run(op.dst.template row<T>(y) + x0 * C, out, count * C);
    }
}

// Calls f(std::integral_constant<int, N>) for the schedule's N (the parser allows 1, 2, 4, 8, 16).
template <class F>
void with_vec_pixels(int n, F&& f) {
    switch (n) {
        case 1: return f(std::integral_constant<int, 1>{});
        case 2: return f(std::integral_constant<int, 2>{});
        case 4: return f(std::integral_constant<int, 4>{});
        case 8: return f(std::integral_constant<int, 8>{});
        case 16: return f(std::integral_constant<int, 16>{});
        default: break;
    }
    throw std::invalid_argument("vec:" + std::to_string(n) + ": N must be 1, 2, 4, 8 or 16");
}

template <class F>
void with_channels(int channels, F&& f) {
    switch (channels) {
        case 1: return f(std::integral_constant<int, 1>{});
        case 3: return f(std::integral_constant<int, 3>{});
        case 4: return f(std::integral_constant<int, 4>{});
        default: break;
    }
    throw std::invalid_argument(std::to_string(channels) + " channels: cbi takes 1, 3 or 4");
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
                if constexpr (ci() >= 3 && (co() == 1 || co() == ci()))
                    vec_color<n(), ci(), co()><<<vec_grid(op.dst.width, op.dst.height, n(), block), block, 0, stream>>>(op);
                else
                    throw std::logic_error("colour matrix from " + std::to_string(ci()) + " to " + std::to_string(co()) + " channels");
            });
        });
    });
}

template <class T>
void launch_vec(const VecSchedule& vec, const BlendOp<T>& op, cudaStream_t stream, int block) {
    if (op.dst.empty()) return;
    with_vec_pixels(vec.pixels, [&](auto n) {
        with_channels(op.dst.channels, [&](auto c) {
            vec_blend<n(), c()><<<vec_grid(op.dst.width, op.dst.height, n(), block), block, 0, stream>>>(op);
        });
    });
}

// --------------------------------------------------------------- stream:WxH
// Issue 7: the column-based iteration carried into registers (Halide's
// "slide" blur schedule). A block's threads each own a run of R consecutive
// interleaved samples of a strip W pixels wide and walk H output rows
// top to bottom, one input row at a time:
//  1. load the run plus kernel radius * C samples on each side: interior
//     threads as aligned 4-byte words straight from global memory (the
//     next row's words are in flight while this row is computed; L1 serves
//     the overlap with the neighbouring threads), threads at the image's
//     left and right edges sample by sample through the border rule;
//  2. form each pass's row sums of the run into slot j of a ring of the
//     last K rows, kept in registers: the row loop is unrolled K times, so
//     every ring index is a constant;
//  3. once K rows are in, form the column sums from the ring oldest row
//     first, finish and store the run as whole words.
// No shared memory, no barriers. Taps are added through weighted_step in
// weighted_sum's order (row sums across x, then down y), so every output is
// bit-identical to the per-pixel path. K (3..9) and the channel count are
// template arguments; larger kernels are refused when the graph is built
// (the registry's max_ksize).
template <class T>
inline constexpr int kStreamRun = sizeof(T) == 4 ? 4 : 8;  // samples per thread (registers: the ring holds K * R per pass)
inline constexpr int kStreamMaxK = 9;

// The taps of every pass, as kernel parameters: constant indices after
// unrolling, so each weight is an operand of its multiply.
template <class W, int P, int K>
struct StreamTaps {
    W x[P][K];
    W y[P][K];
};

// Sample i of a run held as words (i a constant after unrolling), converted to Acc.
template <class Acc, class T, int NW>
__device__ __forceinline__ Acc word_sample(const std::uint32_t (&w)[NW], int i) {
    constexpr int per_word = 4 / sizeof(T);
    const std::uint32_t word = w[i / per_word];
    if constexpr (sizeof(T) == 4) {
        return static_cast<Acc>(__uint_as_float(word));
    } else if constexpr (sizeof(T) == 1 && std::is_same_v<Acc, float>) {
        // byte i % 4 under the exponent of 2^23 (to_float's trick in one byte permute)
        return __fsub_rn(__uint_as_float(__byte_perm(word, 0x4B000000u, 0x7540u | (i % 4))), 8388608.f);
    } else {
        const T v = static_cast<T>(word >> (8 * sizeof(T) * (i % per_word)));
        return std::is_same_v<Acc, float> ? static_cast<Acc>(to_float(v)) : static_cast<Acc>(v);
    }
}

template <class Op, int K, int C, int P>
__global__ void stream_stencil(const __grid_constant__ Op op, const __grid_constant__ StreamTaps<typename Op::W, P, K> taps,
                               int strip_w, int strip_h, int strips_y) {
    using T = typename Op::Sample;
    using Acc = typename Op::Acc;
    constexpr int R = kStreamRun<T>;
    constexpr int halo = K / 2;
    constexpr int N = R + 2 * halo * C;  // samples in a thread's window
    constexpr int sz = sizeof(T);
    constexpr int NW = (N * sz + 3) / 4 + (sz < 4 ? 1 : 0);  // words, one more for a start inside a word
    constexpr bool unit = UnitWeightOp<Op>;
    const int width = op.dst.width, height = op.dst.height;
    const int x0 = blockIdx.x * strip_w;
    const int s_end = min(x0 + strip_w, width) * C;
    const int s0 = x0 * C + threadIdx.x * R;
    if (s0 >= s_end) return;  // no barriers below
    const int count = min(R, s_end - s0);
    const int first = s0 - halo * C;  // window start, in samples of the row
    const auto& view = op.src.view;
    const int lead = (first * sz) & 3;              // bytes before the window in its first word
    const int used_words = (lead + N * sz + 3) / 4;  // words the window touches
    // Word loads when the touched words lie inside the row (so no padding byte is read).
    const bool words = first >= 0 && first * sz - lead + used_words * 4 <= width * C * sz && (view.stride & 3) == 0 &&
                       (reinterpret_cast<std::uintptr_t>(view.data) & 3) == 0;
    std::uint32_t const_word = 0;                    // a row of a constant border, as words
#pragma unroll
    for (int b = 0; b < 4 / sz; ++b) memcpy(reinterpret_cast<unsigned char*>(&const_word) + b * sz, &op.src.constant, sz);

    const auto fetch = [&](int r, std::uint32_t (&w)[NW]) {
        const T* row = op.src.row(r);
        const std::uint32_t* p = row == nullptr ? nullptr
                                 : reinterpret_cast<const std::uint32_t*>(reinterpret_cast<const unsigned char*>(row + first) - lead);
#pragma unroll
        for (int k = 0; k < NW; ++k) w[k] = p == nullptr ? const_word : k < used_words ? __ldg(p + k) : 0u;
    };

    for (int sy = blockIdx.y * blockDim.y + threadIdx.y; sy < strips_y; sy += gridDim.y * blockDim.y) {
        const int y0 = sy * strip_h, y_end = min(y0 + strip_h, height);
        const int r_end = y_end + halo;  // input rows y0 - halo .. r_end - 1
        Acc ring[P][K][R];
        std::uint32_t next[NW];
        if (words) fetch(y0 - halo, next);
        for (int base = y0 - halo; base < r_end; base += K) {
#pragma unroll
            for (int j = 0; j < K; ++j) {
                const int r = base + j;
                if (r >= r_end) break;
                Acc win[N];
                if (words) {
                    std::uint32_t cur[NW];
#pragma unroll
                    for (int k = 0; k < NW; ++k) cur[k] = next[k];
                    if (r + 1 < r_end) fetch(r + 1, next);
                    if constexpr (sz < 4) {
#pragma unroll
                        for (int k = 0; k + 1 < NW; ++k) cur[k] = __funnelshift_r(cur[k], cur[k + 1], 8 * lead);
                    }
#pragma unroll
                    for (int i = 0; i < N; ++i) win[i] = word_sample<Acc, T>(cur, i);
                } else {
                    const T* row = op.src.row(r);
#pragma unroll
                    for (int i = 0; i < N; ++i) {
                        const int s = first + i;
                        const int px = (s + halo * C) / C - halo;  // floor(s / C): s >= -halo * C
                        const T v = op.src.at(row, px, s - px * C);
                        win[i] = std::is_same_v<Acc, float> ? static_cast<Acc>(to_float(v)) : static_cast<Acc>(v);
                    }
                }
                // 2. Row sums of the run into ring slot j.
#pragma unroll
                for (int p = 0; p < P; ++p)
#pragma unroll
                    for (int o = 0; o < R; ++o) {
                        Acc sum = 0;
#pragma unroll
                        for (int i = 0; i < K; ++i)
                            sum = unit ? sum + win[o + i * C] : weighted_add<Acc>(sum, taps.x[p][i], win[o + i * C]);
                        ring[p][j][o] = sum;
                    }
                // 3. Output row r - halo once rows r - 2 halo .. r are in: slot (j + 1 + t) % K holds tap t.
                if (r >= y0 + halo) {
                    const int y = r - halo;
                    T out[R];
#pragma unroll
                    for (int o = 0; o < R; ++o) {
                        Acc v[Op::kMaxPasses] = {};
#pragma unroll
                        for (int p = 0; p < P; ++p) {
                            Acc sum = 0;
#pragma unroll
                            for (int t = 0; t < K; ++t) {
                                const Acc a = ring[p][(j + 1 + t) % K][o];
                                sum = unit ? sum + a : weighted_add<Acc>(sum, taps.y[p][t], a);
                            }
                            v[p] = sum;
                        }
                        out[o] = op.finish(v);
                    }
                    store_run(op.dst.template row<T>(y) + s0, out, count);
                }
            }
        }
    }
}

// The stream kernels are instantiated once for all borders: they read
// through this source, whose border rule is a run-time value. The unrolled
// K-row bodies are large, and one copy per border made the build five times
// longer; rows resolve their border once per row, columns only in the
// threads at the image's left and right edges.
template <class T>
struct AnyBorderSource {
    static constexpr bool kStored = true;
    ImageView view;
    T constant;
    BorderMode mode;

    // Inside the image inline; outside through one out-of-line copy of the
    // border rules (inlined at every unrolled call, they made the kernels
    // several times larger and slower to compile).
    __device__ __forceinline__ const T* row(int y) const {
        if (static_cast<unsigned>(y) < static_cast<unsigned>(view.height)) return view.row<const T>(y);
        return outside_row(y);
    }
    __device__ __forceinline__ T at(const T* row, int x, int c) const {
        if (row != nullptr && static_cast<unsigned>(x) < static_cast<unsigned>(view.width)) return row[x * view.channels + c];
        return outside_at(row, x, c);
    }
    __device__ __noinline__ const T* outside_row(int y) const {
        const int yy = border_index(mode, y, view.height);
        return yy < 0 ? nullptr : view.row<const T>(yy);
    }
    __device__ __noinline__ T outside_at(const T* row, int x, int c) const {
        const int xx = border_index(mode, x, view.width);
        return row == nullptr || xx < 0 ? constant : row[xx * view.channels + c];
    }
};

// An op reading through BorderedSource<T, B>, rebuilt to read through AnyBorderSource<T>.
template <class T, BorderMode B>
auto any_border(const BoxOp<T, B>& op) {
    using R = BoxOp<T, BorderMode::reflect101, AnyBorderSource<T>>;
    return R{{{op.src.view, op.src.constant, B}, op.dst}, op.ksize};
}
template <class T, BorderMode B>
auto any_border(const GaussianOp<T, B>& op) {
    GaussianOp<T, BorderMode::reflect101, AnyBorderSource<T>> r{{{op.src.view, op.src.constant, B}, op.dst}, op.ksize, {}};
    for (int i = 0; i < op.ksize; ++i) r.weights[i] = op.weights[i];
    return r;
}
template <class T, BorderMode B>
auto any_border(const SobelOp<T, B>& op) {
    using R = SobelOp<T, BorderMode::reflect101, AnyBorderSource<T>>;
    return R{{{op.src.view, op.src.constant, B}, op.dst}, op.mode, op.k};
}

// Calls f(std::integral_constant<int, K>) for K in 1, 3, 5, 7, 9.
template <class F>
void with_stream_k(int k, F&& f) {
    switch (k) {
        case 1: return f(std::integral_constant<int, 1>{});
        case 3: return f(std::integral_constant<int, 3>{});
        case 5: return f(std::integral_constant<int, 5>{});
        case 7: return f(std::integral_constant<int, 7>{});
        case 9: return f(std::integral_constant<int, 9>{});
        default: break;
    }
    throw std::invalid_argument("stream:WxH runs stencils up to 9x9 with equal sizes in x and y; use sep:WxH");
}

template <class Op>
void launch_stream(const StreamSchedule& strip, const Op& op, cudaStream_t stream, int block) {
    using T = typename Op::Sample;
    using W = typename Op::W;
    if (op.dst.empty()) return;
    int k = op.kw(0);
    for (int p = 0; p < op.passes(); ++p)
        if (op.kw(p) != k || op.kh(p) != k) k = 0;  // Sobel KSIZE 1: refused
    with_stream_k(k, [&](auto kc) {
        constexpr int K = kc();
        with_channels(op.src.view.channels, [&](auto cc) {
            constexpr int C = cc();
            const auto go = [&](auto pc) {
                constexpr int P = pc();
                StreamTaps<W, P, K> taps{};
                for (int p = 0; p < P; ++p)
                    for (int i = 0; i < K; ++i) {
                        taps.x[p][i] = op.wx(p) ? op.wx(p)[i] : W(1);
                        taps.y[p][i] = op.wy(p) ? op.wy(p)[i] : W(1);
                    }
                const int strip_w = std::min(strip.tile_width, op.dst.width);
                const int strip_h = std::min(strip.tile_height, op.dst.height);
                constexpr int R = kStreamRun<T>;
                const int tx = (strip_w * C + R - 1) / R;  // threads across a strip
                const int ty = std::max(1, std::min(block / tx, 64));  // strips stacked in a block
                const int strips_y = (op.dst.height + strip_h - 1) / strip_h;
                const dim3 threads(tx, ty);
                const dim3 grid((op.dst.width + strip_w - 1) / strip_w, std::min((strips_y + ty - 1) / ty, 65535));
                stream_stencil<Op, K, C, P><<<grid, threads, 0, stream>>>(op, taps, strip_w, strip_h, strips_y);
            };
            if constexpr (requires { op.mode; }) {
                if (op.passes() == 2) return go(std::integral_constant<int, 2>{});
            }
            go(std::integral_constant<int, 1>{});
        });
    });
}

struct CudaLaunch {
    int width, height;
    cudaStream_t stream;
    int block;
    const char* what;  // for error messages

    template <class Schedule, class Op>
    void operator()(Schedule schedule, const Op& op) const {
        // One kernel per (schedule family, op): the generic index-map kernel is
        // not instantiated for the tiled families' stencils.
        if constexpr (std::is_same_v<Schedule, SmemTileSchedule> && SeparableOp<Op>) {
            launch_smem(schedule, op, stream, block);
            CBI_CUDA_CHECK(cudaGetLastError(), std::string("launch ") + what + " (smem)");
        } else if constexpr (std::is_same_v<Schedule, SepTileSchedule> && SeparableOp<Op>) {
            launch_sep(schedule, op, stream, block);
            CBI_CUDA_CHECK(cudaGetLastError(), std::string("launch ") + what + " (sep)");
        } else if constexpr (std::is_same_v<Schedule, StreamSchedule> && SeparableOp<Op>) {
            // The executor fuses colour nodes into smem and sep only: stream reads stored images.
            if constexpr (std::remove_cvref_t<decltype(op.src)>::kStored) launch_stream(schedule, any_border(op), stream, block);
            else throw std::logic_error("stream:WxH does not take fused colour nodes");
            CBI_CUDA_CHECK(cudaGetLastError(), std::string("launch ") + what + " (stream)");
        } else if constexpr (std::is_same_v<Schedule, VecSchedule>) {
            if constexpr (requires { launch_vec(schedule, op, stream, block); }) launch_vec(schedule, op, stream, block);
            else throw std::logic_error("vec:N runs pointwise filters only");
            CBI_CUDA_CHECK(cudaGetLastError(), std::string("launch ") + what + " (vec)");
        } else {
            const auto n = static_cast<std::uint32_t>(width) * static_cast<std::uint32_t>(height);
            const std::uint64_t blocks = (static_cast<std::uint64_t>(n) + block - 1) / block;
            if (blocks > 0x7fffffffull) throw Error("launch", "image too large for --block " + std::to_string(block));
            apply_schedule<<<static_cast<unsigned>(blocks), block, 0, stream>>>(schedule, op, n, width, height);
            CBI_CUDA_CHECK(cudaGetLastError(), std::string("launch ") + what);
        }
    }
};

void check_block(int block) {
    if (block < 1 || block > 1024) throw std::invalid_argument("--block must be from 1 to 1024");
}

}  // namespace

void run_node_cuda(const Node& node, const ImageView& src, const ImageView& dst, cudaStream_t stream, int block) {
    check_block(block);
    try {
        dispatch_node(node, src, dst, CudaLaunch{dst.width, dst.height, stream, block, "filter kernel"});
    } catch (const Error& e) {  // name the node; built only on this error path
        throw Error(to_string(node.filter) + "@" + node.schedule.to_string(), e.what());
    }
}

void run_blend_cuda(const BlendFilter& blend, const ScheduleSpec& schedule, const ImageView& a, const ImageView& b,
                    const ImageView& dst, cudaStream_t stream, int block) {
    check_block(block);
    dispatch_blend(blend, schedule, a, b, dst, CudaLaunch{dst.width, dst.height, stream, block, "blend kernel"});
}

}  // namespace cbi
