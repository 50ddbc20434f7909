#pragma once
// The stream:WxH kernel and the word-wide load/store helpers it
// shares with vec:N. Included by cuda/backend.cu only; a header so a probe
// can compile one instantiation with -Xptxas -v (registers, spills) in
// seconds instead of the whole backend.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "filters/cuda/launch.cuh"
#include "filters/cuda/order.cuh"
#include "filters/kinds/all.hpp"
#include "filters/ops.hpp"
#include "filters/then.hpp"
#include "schedules/schedule.hpp"

namespace cbi::cuda {

// Calls f(std::integral_constant<int, V>) for the one V among Values that
// equals v; false when none does. Run-time choices become template
// arguments here (channels, kernel sizes, pixels per thread).
template <int... Values, class F>
bool with_one_of(int v, F&& f) {
    return ((v == Values ? (f(std::integral_constant<int, Values>{}), true) : false) || ...);
}

template <class F>
void with_channels(int channels, F&& f) {
    if (!with_one_of<1, 3, 4>(channels, f))
        throw std::invalid_argument(std::to_string(channels) + " channels: cbi takes 1, 3 or 4");
}

// The kernel size of a stencil whose passes are all K x K, else 0 (Sobel KSIZE 1).
template <class Op>
int square_kernel_size(const Op& op) {
    const int k = op.kw(0);
    for (int p = 0; p < op.passes(); ++p)
        if (op.kw(p) != k || op.kh(p) != k) return 0;
    return k;
}

// f(std::integral_constant<int, P>) for the op's pass count P (2: Sobel's magnitude, Laplacian).
template <class Op, class F>
void with_passes(const Op& op, F&& f) {
    if constexpr (MayRunTwoPasses<Op>) {
        if (op.passes() == 2) return f(std::integral_constant<int, 2>{});
    }
    f(std::integral_constant<int, 1>{});
}

// A 4-byte word of copies of v: a row of a constant border, as words.
template <class T>
__device__ __forceinline__ std::uint32_t repeat_word(const T& v) {
    std::uint32_t w = 0;
#pragma unroll
    for (int b = 0; b < 4 / static_cast<int>(sizeof(T)); ++b)
        memcpy(reinterpret_cast<unsigned char*>(&w) + b * sizeof(T), &v, sizeof(T));
    return w;
}

// --------------------------------------------------------------- word loads
// Runs of samples in registers, moved as the widest aligned words that fit:
// 16, 8 or 4 bytes when the address allows, sample by sample otherwise.
// Loads from global memory go through the read-only cache (__ldg); kGlobal
// false loads from shared memory.
// N samples at p moved as Word-sized pieces, when the byte count and the
// address allow it (false otherwise, nothing moved).
template <class Word, bool kGlobal = true, class T, int N>
__device__ __forceinline__ bool load_words(const T* p, T (&v)[N]) {
    constexpr int bytes = N * sizeof(T);
    if constexpr (bytes % sizeof(Word) != 0) {
        return false;
    } else {
        if (reinterpret_cast<std::uintptr_t>(p) % sizeof(Word) != 0) return false;
        Word w[bytes / sizeof(Word)];
#pragma unroll
        for (int i = 0; i < bytes / static_cast<int>(sizeof(Word)); ++i) {
            const Word* at = reinterpret_cast<const Word*>(p) + i;
            if constexpr (kGlobal)
                w[i] = __ldg(at);
            else
                w[i] = *at;
        }
        memcpy(v, w, bytes);
        return true;
    }
}

template <class Word, class T, int N>
__device__ __forceinline__ bool store_words(T* p, const T (&v)[N]) {
    constexpr int bytes = N * sizeof(T);
    if constexpr (bytes % sizeof(Word) != 0) {
        return false;
    } else {
        if (reinterpret_cast<std::uintptr_t>(p) % sizeof(Word) != 0) return false;
        Word w[bytes / sizeof(Word)];
        memcpy(w, v, bytes);
#pragma unroll
        for (int i = 0; i < bytes / static_cast<int>(sizeof(Word)); ++i) reinterpret_cast<Word*>(p)[i] = w[i];
        return true;
    }
}

// The first `count` of N samples; a whole run as the widest words that fit.
template <bool kGlobal = true, class T, int N>
__device__ __forceinline__ void load_run(const T* p, T (&v)[N], int count) {
    if (count == N && (load_words<uint4, kGlobal>(p, v) || load_words<uint2, kGlobal>(p, v) ||
                       load_words<std::uint32_t, kGlobal>(p, v)))
        return;
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = i < count ? p[i] : T(0);
}

template <class T, int N>
__device__ __forceinline__ void store_run(T* p, const T (&v)[N], int count) {
    if (count == N && (store_words<uint4>(p, v) || store_words<uint2>(p, v) || store_words<std::uint32_t>(p, v)))
        return;
#pragma unroll
    for (int i = 0; i < N; ++i)
        if (i < count) p[i] = v[i];
}

// --------------------------------------------------------------- stream:WxH
// The column-based iteration carried into registers (Halide's
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
//
// Strips are taken by rows of threads: row-major, thread row ty of block
// (bx, by) walks strip column bx, strip rows by * blockDim.y + ty, + the
// grid's rows, ...; in a TileOrder (cuda/order.cuh) it walks the one strip
// order.map(b * blockDim.y + ty) for the block's linear index b, so a
// block's thread rows take consecutive strips of the order.
template <class T>
inline constexpr int kStreamRun = sizeof(T) == 4 ? 4
                                                 : 8;  // samples per thread (registers: the ring holds K * R per pass)
inline constexpr int kStreamAhead = 1;                 // rows loaded ahead of the one being summed

// Where the ring of row sums lives: registers for 3x3 (small), shared
// memory for larger kernels, whose ring in registers left too few warps an SM
// (docs/performance.md#stream-ring). In shared memory each thread
// keeps its own slots ([slot][sample][thread]: lanes on consecutive words,
// no bank conflicts), written and read by the same thread: no barriers.
template <int K>
inline constexpr bool kSharedRing = K > 3;

template <class Acc, int K, int P, int R>
constexpr int stream_ring_bytes_per_thread() {
    return kSharedRing<K> ? P * K * R * static_cast<int>(sizeof(Acc)) : 0;
}

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
        return to_acc<Acc>(v);
    }
}

// The strips a thread walks (see the order above): strip column x, strip
// rows first, first + step, ... below end; in each row, its run of `count`
// samples (at most `run`) from sample s0. False: this thread has none.
struct StripWork {
    int x, first, end, step;
    int s0, count;
};
__device__ __forceinline__ bool strip_work(int width, int channels, int run, int strip_w, int strips_y,
                                           const TileOrder& order, StripWork& w) {
    w = {static_cast<int>(blockIdx.x),
         static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y),
         strips_y,
         static_cast<int>(gridDim.y * blockDim.y),
         0,
         0};
    if (!order.row_major()) {
        const int strips_x = (width + strip_w - 1) / strip_w;
        const std::uint64_t work = linear_block() * blockDim.y + threadIdx.y;
        if (work >= static_cast<std::uint64_t>(strips_x) * strips_y) return false;
        const Pixel t = order.map(static_cast<std::uint32_t>(work), strips_x, strips_y);
        w.x = t.x, w.first = t.y, w.end = t.y + 1, w.step = 1;
    }
    const int x0 = w.x * strip_w;
    const int s_end = min(x0 + strip_w, width) * channels;
    w.s0 = x0 * channels + threadIdx.x * run;
    w.count = min(run, s_end - w.s0);
    return w.count > 0;
}

// A strip kernel's launch: strips of the schedule's W x H (narrower when one
// block's threads cannot cover W: strips are independent, the results are
// the same), each `run` samples of a row per thread, strips stacked in a
// block up to `block` threads.
struct StripLaunch {
    int strip_w, strip_h, strips_y;
    dim3 grid, threads;
};
inline StripLaunch strip_launch(const TileSchedule& strip, int width, int height, int channels, int run,
                                int max_threads, int block, const TileOrder& order) {
    StripLaunch l{};
    l.strip_w = std::min({strip.tile_width, width, std::max(1, max_threads * run / channels)});
    l.strip_h = std::min(strip.tile_height, height);
    const int tx = (l.strip_w * channels + run - 1) / run;                        // threads across a strip
    const int ty = std::max(1, std::min(std::min(block, max_threads) / tx, 64));  // strips stacked in a block
    l.strips_y = (height + l.strip_h - 1) / l.strip_h;
    const int strips_x = (width + l.strip_w - 1) / l.strip_w;
    l.threads = dim3(tx, ty);
    l.grid = order.row_major() ? dim3(strips_x, std::min((l.strips_y + ty - 1) / ty, 65535))
                               : ordered_grid((static_cast<std::uint64_t>(strips_x) * l.strips_y + ty - 1) / ty);
    return l;
}

template <class Op, int K, int C, int P, int R = kStreamRun<typename Op::Sample>, int D = kStreamAhead>
__global__ void stream_stencil(const __grid_constant__ Op op,
                               const __grid_constant__ StreamTaps<typename Op::W, P, K> taps, int strip_w, int strip_h,
                               int strips_y, const TileOrder order,
                               const __grid_constant__ ThenSamples<typename Op::Sample> then) {
    using T = typename Op::Sample;
    using Acc = typename Op::Acc;
    constexpr int halo = K / 2;
    constexpr int N = R + 2 * halo * C;  // samples in a thread's window
    constexpr int sz = sizeof(T);
    constexpr int NW = (N * sz + 3) / 4 + (sz < 4 ? 1 : 0);  // words, one more for a start inside a word
    constexpr bool unit = UnitWeightOp<Op>;
    const int width = op.dst.width, height = op.dst.height;
    StripWork strips;
    if (!strip_work(width, C, R, strip_w, strips_y, order, strips)) return;  // no barriers below
    const int s0 = strips.s0, count = strips.count;
    const int first = s0 - halo * C;  // window start, in samples of the row
    const auto& view = op.src.view;
    extern __shared__ __align__(16) unsigned char stream_smem[];
    const int nthreads = blockDim.x * blockDim.y, me = threadIdx.y * blockDim.x + threadIdx.x;
    const int lead = (first * sz) & 3;               // bytes before the window in its first word
    const int used_words = (lead + N * sz + 3) / 4;  // words the window touches
    // Word loads when the touched words lie inside the row (so no padding byte is read).
    const bool words = first >= 0 && first * sz - lead + used_words * 4 <= width * C * sz && (view.stride & 3) == 0 &&
                       (reinterpret_cast<std::uintptr_t>(view.data) & 3) == 0;
    const std::uint32_t const_word = repeat_word(op.src.constant);  // a row of a constant border, as words

    const auto fetch = [&](int r, std::uint32_t(&w)[NW]) {
        const T* row = op.src.row(r);
        const std::uint32_t* p =
            row == nullptr
                ? nullptr
                : reinterpret_cast<const std::uint32_t*>(reinterpret_cast<const unsigned char*>(row + first) - lead);
#pragma unroll
        for (int k = 0; k < NW; ++k) w[k] = p == nullptr ? const_word : k < used_words ? __ldg(p + k) : 0u;
    };

    for (int sy = strips.first; sy < strips.end; sy += strips.step) {
        const int y0 = sy * strip_h, y_end = min(y0 + strip_h, height);
        const int r_end = y_end + halo;  // input rows y0 - halo .. r_end - 1
        Acc ring_regs[kSharedRing<K> ? 1 : P][kSharedRing<K> ? 1 : K][R];
        Acc* const ring_smem = reinterpret_cast<Acc*>(stream_smem);
        // Slot `slot` of pass p, sample o of the run (all constants after unrolling).
        const auto ring = [&](int p, int slot, int o) -> Acc& {
            if constexpr (kSharedRing<K>)
                return ring_smem[((p * K + slot) * R + o) * nthreads + me];
            else
                return ring_regs[p][slot][o];
        };
        std::uint32_t ahead[D][NW];  // the next D rows' words, in flight
        if (words)
#pragma unroll
            for (int d = 0; d < D; ++d)
                if (y0 - halo + d < r_end) fetch(y0 - halo + d, ahead[d]);
        // Register rings need constant slots: the row loop unrolls K times.
        // A shared-memory ring takes run-time slots, and the loop stays rolled
        // (unrolled, the compiler overlapped rows and used 255 registers anyway).
        constexpr int kRowUnroll = kSharedRing<K> ? 1 : K;
        for (int base = y0 - halo; base < r_end; base += K) {
#pragma unroll kRowUnroll
            for (int j = 0; j < K; ++j) {
                const int r = base + j;
                if (r >= r_end) continue;  // (not break: the loop must unroll for the ring indices to be constants)
                Acc win[N];
                if (words) {
                    std::uint32_t cur[NW];
#pragma unroll
                    for (int k = 0; k < NW; ++k) cur[k] = ahead[0][k];
#pragma unroll
                    for (int d = 0; d + 1 < D; ++d)
#pragma unroll
                        for (int k = 0; k < NW; ++k) ahead[d][k] = ahead[d + 1][k];
                    if (r + D < r_end) fetch(r + D, ahead[D - 1]);
                    if constexpr (sz < 4) {
#pragma unroll
                        for (int k = 0; k + 1 < NW; ++k) cur[k] = __funnelshift_r(cur[k], cur[k + 1], 8 * lead);
                    }
#pragma unroll
                    for (int i = 0; i < N; ++i) win[i] = word_sample<Acc, T>(cur, i);
                } else {
                    // Threads at the image's edges: sample by sample through the
                    // border rule, in a rolled loop (unrolled, its N border
                    // calls doubled the kernel's registers for 3 channels).
                    const T* row = op.src.row(r);
                    T edge[N];
#pragma unroll 1
                    for (int i = 0; i < N; ++i) {
                        const int s = first + i;
                        const int px = (s + halo * C) / C - halo;  // floor(s / C): s >= -halo * C
                        edge[i] = op.src.at(row, px, s - px * C);
                    }
#pragma unroll
                    for (int i = 0; i < N; ++i) win[i] = to_acc<Acc>(edge[i]);
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
                        ring(p, j, o) = sum;
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
                                const Acc a = ring(p, (j + 1 + t) % K, o);
                                sum = unit ? sum + a : weighted_add<Acc>(sum, taps.y[p][t], a);
                            }
                            v[p] = sum;
                        }
                        out[o] = then(op.finish(v));
                    }
                    store_run(op.dst.template row<T>(y) + s0, out, count);
                }
            }
        }
    }
}

// The stream kernels are instantiated once for all borders: they read
// through AnyBorderSource (ops.hpp), whose border rule is a run-time value.
// The unrolled K-row bodies are large, and one copy per border made the
// build five times longer.
// An op reading through BorderedSource<T, B>, rebuilt to read through AnyBorderSource<T>.
template <template <class, BorderMode, class> class Op, class T, BorderMode B>
auto any_border(const Op<T, B, BorderedSource<T, B>>& op) {
    return with_source(op, AnyBorderSource<T>{op.src.view, op.src.constant, B});
}

// R (samples per thread, 0: kStreamRun) and D (rows ahead) are template
// arguments for the probe that tunes them (apps/bench/stream_probe.cu).
template <int RunArg = 0, int D = kStreamAhead, class Op>
void launch_stream(const StreamSchedule& strip, const Op& op, cudaStream_t stream, int block,
                   const TileOrder& order = {}, const ThenSamples<typename Op::Sample>& then = {}) {
    using T = typename Op::Sample;
    using W = typename Op::W;
    if (op.dst.empty()) return;
    const bool sized = with_one_of<1, 3, 5, 7, 9>(square_kernel_size(op), [&](auto kc) {
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
                constexpr int R = RunArg > 0 ? RunArg : kStreamRun<T>;
                // The K = 9 bodies use up to 255 registers: a block may then hold
                // only 256 threads (65536 registers per block).
                // Threads per block: what the registers allow, and what a shared-memory ring allows.
                constexpr int per_thread = stream_ring_bytes_per_thread<typename Op::Acc, K, P, R>();
                int max_threads = max_threads_per_block<stream_stencil<Op, K, C, P, R, D>>();
                if constexpr (per_thread > 0) {  // the ring in shared memory: the device's whole limit
                    const int device = current_device();
                    allow_shared_memory<stream_stencil<Op, K, C, P, R, D>>(device);
                    max_threads = std::min(max_threads, shared_memory_limit(device) / per_thread);
                }
                if (max_threads < 1) throw std::runtime_error("stream:WxH: cannot read the kernel's attributes");
                const StripLaunch l = strip_launch(strip, op.dst.width, op.dst.height, C, R, max_threads, block, order);
                stream_stencil<Op, K, C, P, R, D>
                    <<<l.grid, l.threads, per_thread * l.threads.x * l.threads.y, stream>>>(
                        op, taps, l.strip_w, l.strip_h, l.strips_y, order, then);
            };
            with_passes(op, go);
        });
    });
    if (!sized) throw Unsupported("stream:WxH", "runs stencils up to 9x9 with equal sizes in x and y; use sep:WxH");
}

}  // namespace cbi::cuda
