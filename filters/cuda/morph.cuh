#pragma once
// The passes of a rectangular erosion or dilation on CUDA (what the naive
// schedule runs for them): a window of K rows or K columns in O(1) per
// sample whatever K, by van Herk / Gil-Werman. A thread's run of S <= K
// outputs all hold the window's sample at one split point m; each output is
// the minimum of a suffix run (samples s .. m - 1, scanned backwards once)
// and a prefix run (m .. s + K - 1, scanned forwards once), so S outputs
// read S + K - 1 samples. Narrow windows fold their samples directly.
// Columns: each thread a word of samples (four 8-bit or two 16-bit lanes
// through the SIMD minimum) down a run of rows, coalesced across the warp;
// rows: a block stages its rows plus halo in shared memory, integer rows in
// pairs, one 16-bit lane each, folded through the SIMD minimum. Min and max
// are exact, so the results equal the per-pixel op's bit for bit. Other
// elements (ellipse, cross) fold two runs of 2^l samples per element row
// from levels a block builds in shared memory for each source row (runs).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "filters/border.hpp"
#include "filters/cuda/check.hpp"
#include "filters/cuda/lanes.cuh"
#include "filters/cuda/launch.cuh"
#include "filters/kinds/morphology.hpp"

namespace cbi::cuda {

namespace morph {

// Windows up to this many samples are folded directly.
inline constexpr int kDirect = 4;
// Threads per block of both passes.
inline constexpr int kThreads = 256;
// The shared memory a row pass block uses at most.
inline constexpr std::size_t kRowShared = 48 * 1024;

// A word of samples: packs of 8-bit (widened) and 16-bit lanes fold lane-wise.
template <class P, class T, bool kMin>
__device__ __forceinline__ P fold(P acc, P v) {
    if constexpr (std::is_same_v<P, Wide8>)
        return wide_fold<kMin>(acc, v);
    else if constexpr (std::is_same_v<P, std::uint32_t> && sizeof(T) < 4)
        return lanes_fold<T, kMin>(acc, v);
    else
        return MorphPassOp<T, kMin>::fold(acc, v);  // the per-pixel op's own rule (floats: which zero wins)
}

// Longest run of outputs a thread computes by van Herk: its suffix minima
// stay in registers.
inline constexpr int kRun = 32;

// Outputs i < count (count <= kRun) whose windows of k samples start at
// s0 + i, split at the last one's start m: each the fold of a suffix
// (s0 + i .. m - 1, backwards once) and a prefix (m .. s0 + i + k - 1,
// forwards once); count + k - 1 loads. load(t) reads sample t, store(i, v)
// writes output i. For k > kDirect.
template <class P, class T, bool kMin, class Load, class Store>
__device__ __forceinline__ void van_herk(int s0, int count, int k, Load&& load, Store&& store) {
    const int m = s0 + count - 1;
    P part[kRun];  // part[i]: samples s0 + i .. m - 1
    P r{};
#pragma unroll
    for (int i = kRun - 2; i >= 0; --i)
        if (i < count - 1) {
            const P v = load(s0 + i);
            r = i == count - 2 ? v : fold<P, T, kMin>(v, r);
            part[i] = r;
        }
    P p = load(m);  // samples m .. s0 + i + k - 1 for output i
#pragma unroll 8
    for (int t = m + 1; t <= s0 + k - 1; ++t) p = fold<P, T, kMin>(p, load(t));
#pragma unroll
    for (int i = 0; i < kRun; ++i)
        if (i < count) {
            if (i > 0) p = fold<P, T, kMin>(p, load(s0 + i + k - 1));
            store(i, i < count - 1 ? fold<P, T, kMin>(part[i], p) : p);
        }
}

// The column pass: words g of every row from byte `offset` (P holds the
// samples of a word), each thread `strip` output rows (at most kRun for
// windows over kDirect). Source words load through the read-only path, so
// that a thread's loads are not held behind its stores.
template <class P, class T, bool kMin>
__global__ void columns(AnyBorderSource<T> src, std::size_t offset, std::byte* dst, std::size_t dst_stride, int words,
                        int k, int a, int strip, P constant) {
    const int g = blockIdx.x * blockDim.x + threadIdx.x;
    const int y0 = blockIdx.y * strip, height = src.view.height;
    if (g >= words || y0 >= height) return;
    const int count = min(strip, height - y0);
    const auto load = [&](int y) -> P {
        const T* row = src.row(y);
        return row == nullptr ? constant
                              : __ldg(reinterpret_cast<const P*>(reinterpret_cast<const std::byte*>(row) + offset) + g);
    };
    const auto store = [&](int i, P v) {
        reinterpret_cast<P*>(dst + static_cast<std::size_t>(y0 + i) * dst_stride + offset)[g] = v;
    };
    // 8-bit words stay packed here: widened (Wide8), the runs' suffix minima
    // take twice the registers and the pass measured slower.
    if (k > kDirect) {
        const int s0 = y0 - a;
        if (s0 < 0 || s0 + count + k - 1 > height) return van_herk<P, T, kMin>(s0, count, k, load, store);
        // Every row in the image: plain addresses, so that the loads need no
        // border call between them and go out together; whole runs unpredicated.
        const std::byte* base = src.view.data + offset;
        const std::size_t stride = src.view.stride;
        const auto inner = [&](int y) {
            return __ldg(reinterpret_cast<const P*>(base + static_cast<std::size_t>(y) * stride) + g);
        };
        if (count == kRun) return van_herk<P, T, kMin>(s0, kRun, k, inner, store);
        return van_herk<P, T, kMin>(s0, count, k, inner, store);
    }
    for (int i = 0; i < count; ++i) {
        P acc = load(y0 + i - a);
#pragma unroll
        for (int j = 1; j < kDirect; ++j)
            if (j < k) acc = fold<P, T, kMin>(acc, load(y0 + i - a + j));
        store(i, acc);
    }
}

// The row pass for float samples (and integer windows too wide for
// packed_rows): a block's rows, its tile of `tile` outputs plus the window's
// halo staged in shared memory (the border resolved there), each work item
// a channel of a run of `strip` outputs of a row; then stored coalesced.
template <class T, int C, bool kMin>
__global__ void rows(const T* __restrict__ src_data, std::size_t src_stride, int width, int height, T* dst_data,
                     std::size_t dst_stride, int k, int a, BorderMode mode, T constant, int tile, int block_rows,
                     int strip, int in_pitch, int out_pitch) {
    extern __shared__ unsigned char shared_bytes[];
    T* in = reinterpret_cast<T*>(shared_bytes);
    T* out = in + static_cast<std::size_t>(block_rows) * in_pitch;
    const int x0 = blockIdx.x * tile, y0 = blockIdx.y * block_rows;
    const int tw = min(tile, width - x0), nrows = min(block_rows, height - y0);
    const int in_len = (tw + k - 1) * C, out_len = tw * C;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    const int first = x0 - a;  // the first staged pixel
    const bool inside = first >= 0 && first + tw + k - 1 <= width;
    for (int r = warp; r < nrows; r += warps) {
        const T* row = reinterpret_cast<const T*>(reinterpret_cast<const std::byte*>(src_data) +
                                                  static_cast<std::size_t>(y0 + r) * src_stride);
        T* to = in + static_cast<std::size_t>(r) * in_pitch;
        if (inside) {
            for (int j = lane; j < in_len; j += 32) to[j] = row[first * C + j];
        } else {
            for (int j = lane; j < in_len; j += 32) {
                const int xx = border_index(mode, first + j / C, width);
                to[j] = xx < 0 ? constant : row[xx * C + j % C];
            }
        }
    }
    __syncthreads();
    if (k <= kDirect) {
        // Narrow windows: each output folds its samples from the stage, stored at once.
        for (int r = warp; r < nrows; r += warps) {
            const T* from = in + static_cast<std::size_t>(r) * in_pitch;
            T* row = reinterpret_cast<T*>(reinterpret_cast<std::byte*>(dst_data) +
                                          static_cast<std::size_t>(y0 + r) * dst_stride) +
                     x0 * C;
            for (int j = lane; j < out_len; j += 32) {
                T acc = from[j];
#pragma unroll
                for (int t = 1; t < kDirect; ++t)
                    if (t < k) acc = fold<T, T, kMin>(acc, from[j + t * C]);
                row[j] = acc;
            }
        }
        return;
    } else {
        const int strips = (tw + strip - 1) / strip, items = nrows * C * strips;
        for (int i = threadIdx.x; i < items; i += blockDim.x) {
            // Neighbouring threads take neighbouring rows (odd pitches: different banks).
            const int r = i % nrows, rest = i / nrows, c = rest % C, st = rest / C;
            const int i0 = st * strip, count = min(strip, tw - i0);
            const T* from = in + static_cast<std::size_t>(r) * in_pitch + c;
            T* to = out + static_cast<std::size_t>(r) * out_pitch + c;
            van_herk<T, T, kMin>(
                i0, count, k, [&](int t) { return from[t * C]; }, [&](int o, T v) { to[(i0 + o) * C] = v; });
        }
    }
    __syncthreads();
    for (int r = warp; r < nrows; r += warps) {
        T* row = reinterpret_cast<T*>(reinterpret_cast<std::byte*>(dst_data) +
                                      static_cast<std::size_t>(y0 + r) * dst_stride) +
                 x0 * C;
        const T* from = out + static_cast<std::size_t>(r) * out_pitch;
        for (int j = lane; j < out_len; j += 32) row[j] = from[j];
    }
}

// An odd number of words at least `samples` samples long.
template <class T>
int odd_pitch(int samples) {
    const int per_word = 4 / static_cast<int>(sizeof(T));
    int words = (samples + per_word - 1) / per_word;
    words |= 1;
    return words * per_word;
}

// The row pass for integer samples: a block's rows packed in pairs, row
// y0 + 2g's sample s and row y0 + 2g + 1's in the low and high 16-bit lanes
// of word [g][s] (8-bit samples widened), staged with the window's halo, so
// that van Herk folds two rows at once, each step one SIMD minimum of 16-bit
// lanes (one instruction on sm_90; four 8-bit lanes take several). Rows on
// 4-byte words move as words, regrouped by byte permutes; the ends of the
// image and other rows sample by sample.
// The shared memory a packed block uses at most (an opt-in above 48 KiB).
inline constexpr std::size_t kPackedShared = 96 * 1024;
// Most row pairs a block takes.
inline constexpr int kPackedGroups = 32;

// A 4-byte word of each of two rows (samples s .. s + n - 1, n = 4 / sizeof(T))
// as n words of the two rows' sample s + i in 16-bit lanes, and back.
template <class T>
struct PairWords {
    static constexpr int n = 4 / static_cast<int>(sizeof(T));
    __device__ __forceinline__ static void split(std::uint32_t r0, std::uint32_t r1, std::uint32_t (&w)[n]) {
        if constexpr (n == 4) {
            const std::uint32_t lo = __byte_perm(r0, r1, 0x5140), hi = __byte_perm(r0, r1, 0x7362);
            w[0] = __byte_perm(lo, 0, 0x4140), w[1] = __byte_perm(lo, 0, 0x4342);
            w[2] = __byte_perm(hi, 0, 0x4140), w[3] = __byte_perm(hi, 0, 0x4342);
        } else {
            w[0] = __byte_perm(r0, r1, 0x5410), w[1] = __byte_perm(r0, r1, 0x7632);
        }
    }
    __device__ __forceinline__ static void join(const std::uint32_t (&w)[n], std::uint32_t& r0, std::uint32_t& r1) {
        if constexpr (n == 4) {
            const std::uint32_t a = __byte_perm(w[0], w[1], 0x6240), b = __byte_perm(w[2], w[3], 0x6240);
            r0 = __byte_perm(a, b, 0x5410), r1 = __byte_perm(a, b, 0x7632);
        } else {
            r0 = __byte_perm(w[0], w[1], 0x5410), r1 = __byte_perm(w[0], w[1], 0x7632);
        }
    }
};

template <class T, int C, bool kMin>
__global__ void __launch_bounds__(kThreads)
    packed_rows(const T* __restrict__ src_data, std::size_t src_stride, int width, int height, T* dst_data,
                std::size_t dst_stride, int k, int a, BorderMode mode, T constant, int tile, int groups, int strip,
                int in_pitch, int out_pitch) {
    using Pair = PairWords<T>;
    constexpr int n = Pair::n;
    extern __shared__ std::uint32_t packed_words[];
    std::uint32_t* in = packed_words;
    std::uint32_t* out = in + static_cast<std::size_t>(groups) * in_pitch;
    const int x0 = blockIdx.x * tile, y0 = blockIdx.y * groups * 2;
    const int tw = min(tile, width - x0), ngroups = min(groups, (height - y0 + 1) / 2);
    const int in_len = (tw + k - 1) * C, out_len = tw * C;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = kThreads / 32;
    const auto src_row = [&](int y) {  // a row past the image repeats its last (its outputs are not stored)
        return reinterpret_cast<const T*>(reinterpret_cast<const std::byte*>(src_data) +
                                          static_cast<std::size_t>(min(y, height - 1)) * src_stride);
    };
    const auto dst_row = [&](int y) {
        return reinterpret_cast<T*>(reinterpret_cast<std::byte*>(dst_data) + static_cast<std::size_t>(y) * dst_stride);
    };
    // Staged sample j is sample base - d + j of each row; d aligns word moves.
    const int first = x0 - a, base = first * C;
    const bool inside = first >= 0 && first + tw + k - 1 <= width;
    const bool words_in = inside && reinterpret_cast<std::uintptr_t>(src_data) % 4 == 0 && src_stride % 4 == 0 &&
                          (base / n + (base % n + in_len + n - 1) / n) * n <= width * C;
    const int d = words_in ? base % n : 0;
    if (words_in) {
        const int count = (d + in_len + n - 1) / n;
        for (int g = warp; g < ngroups; g += warps) {
            const auto* r0 = reinterpret_cast<const std::uint32_t*>(src_row(y0 + 2 * g)) + base / n;
            const auto* r1 = reinterpret_cast<const std::uint32_t*>(src_row(y0 + 2 * g + 1)) + base / n;
            std::uint32_t* to = in + static_cast<std::size_t>(g) * in_pitch;
            for (int q = lane; q < count; q += 32) {
                std::uint32_t w[n];
                Pair::split(r0[q], r1[q], w);
#pragma unroll
                for (int i = 0; i < n; ++i) to[q * n + i] = w[i];
            }
        }
    } else {
        for (int j = threadIdx.x; j < in_len; j += kThreads) {
            int s = base + j;  // the sample of each row staged at j (< 0: the constant)
            if (!inside) {
                const int xx = border_index(mode, first + j / C, width);
                s = xx < 0 ? -1 : xx * C + j % C;
            }
            for (int g = 0; g < ngroups; ++g) {
                const std::uint32_t lo = s < 0 ? constant : src_row(y0 + 2 * g)[s];
                const std::uint32_t hi = s < 0 ? constant : src_row(y0 + 2 * g + 1)[s];
                in[static_cast<std::size_t>(g) * in_pitch + j] = lo | hi << 16;
            }
        }
    }
    __syncthreads();
    if (k <= kDirect) {
        for (int j = threadIdx.x; j < out_len; j += kThreads)
            for (int g = 0; g < ngroups; ++g) {
                const std::uint32_t* from = in + static_cast<std::size_t>(g) * in_pitch + d + j;
                std::uint32_t acc = from[0];
#pragma unroll
                for (int t = 1; t < kDirect; ++t)
                    if (t < k) acc = fold<std::uint32_t, std::uint16_t, kMin>(acc, from[t * C]);
                out[static_cast<std::size_t>(g) * out_pitch + j] = acc;
            }
    } else {
        const int strips = (tw + strip - 1) / strip, items = ngroups * C * strips;
        for (int i = threadIdx.x; i < items; i += kThreads) {
            // Neighbouring threads take neighbouring row pairs (odd pitches: different banks).
            const int g = i % ngroups, rest = i / ngroups, c = rest % C, st = rest / C;
            const int i0 = st * strip, count = min(strip, tw - i0);
            const std::uint32_t* from = in + static_cast<std::size_t>(g) * in_pitch + d + c;
            std::uint32_t* to = out + static_cast<std::size_t>(g) * out_pitch + c;
            const auto load = [&](int t) { return from[t * C]; };
            const auto store = [&](int o, std::uint32_t v) { to[(i0 + o) * C] = v; };
            if (count == kRun)
                van_herk<std::uint32_t, std::uint16_t, kMin>(i0, kRun, k, load, store);  // unpredicated
            else
                van_herk<std::uint32_t, std::uint16_t, kMin>(i0, count, k, load, store);
        }
    }
    __syncthreads();
    // Whole words of both rows where the destination allows them; the rest sample by sample.
    const bool words_out = reinterpret_cast<std::uintptr_t>(dst_data) % 4 == 0 && dst_stride % 4 == 0;
    const int whole = words_out ? out_len / n : 0;
    for (int g = warp; g < ngroups; g += warps) {
        const int y = y0 + 2 * g;
        const std::uint32_t* from = out + static_cast<std::size_t>(g) * out_pitch;
        auto* to0 = reinterpret_cast<std::uint32_t*>(dst_row(y) + x0 * C);
        auto* to1 = reinterpret_cast<std::uint32_t*>(dst_row(y + 1) + x0 * C);
        for (int q = lane; q < whole; q += 32) {
            std::uint32_t w[n], r0, r1;
#pragma unroll
            for (int i = 0; i < n; ++i) w[i] = from[q * n + i];
            Pair::join(w, r0, r1);
            to0[q] = r0;
            if (y + 1 < height) to1[q] = r1;
        }
        for (int j = whole * n + lane; j < out_len; j += 32) {
            dst_row(y)[x0 * C + j] = static_cast<T>(from[j]);
            if (y + 1 < height) dst_row(y + 1)[x0 * C + j] = static_cast<T>(from[j] >> 16);
        }
    }
}

template <class T, bool kMin, int C>
bool launch_packed_rows(const MorphPassOp<T, kMin>& op, cudaStream_t stream) {
    const ImageView& dst = op.dst;
    const int k = op.se.width, a = op.se.ax;
    // Tiles start on 4-byte words of the rows (a multiple of 4 samples).
    const int tile = (std::max(256, 2 * k) + 3) / 4 * 4, strip = std::min(k, kRun);
    // Room for the word moves: up to 3 samples before the first, 3 after the last.
    const int in_pitch = static_cast<int>(odd_pitch<std::uint32_t>((tile + k - 1) * C + 6));
    const int out_pitch = static_cast<int>(odd_pitch<std::uint32_t>(tile * C));
    const std::size_t group_bytes = 4 * static_cast<std::size_t>(in_pitch + out_pitch);
    const int pairs = (dst.height + 1) / 2;
    const int groups =
        static_cast<int>(std::min<std::size_t>(std::min(kPackedGroups, pairs), kPackedShared / group_bytes));
    if (groups < 1) return false;
    const std::size_t shared = group_bytes * groups;
    const dim3 grid((dst.width + tile - 1) / tile, (pairs + groups - 1) / groups);
    if (grid.y > 65535) return false;
    if (shared > 48 * 1024) allow_shared_memory<packed_rows<T, C, kMin>>(current_device());
    note_kernel_path(KernelPath::cuda_morph);
    packed_rows<T, C, kMin><<<grid, kThreads, shared, stream>>>(
        op.src.view.template row<const T>(0), op.src.view.stride, dst.width, dst.height, dst.template row<T>(0),
        dst.stride, k, a, op.src.mode, op.src.constant, tile, groups, strip, in_pitch, out_pitch);
    CBI_CUDA_CHECK(cudaGetLastError(), "launch morphology packed row pass");
    return true;
}

template <class T, bool kMin, int C>
bool launch_rows(const MorphPassOp<T, kMin>& op, cudaStream_t stream) {
    if constexpr (!std::is_same_v<T, float>)
        if (launch_packed_rows<T, kMin, C>(op, stream)) return true;
    const ImageView& dst = op.dst;
    const int k = op.se.width, a = op.se.ax;
    const int tile = std::max(128, 2 * k), strip = std::min(k, kRun);
    const int in_pitch = odd_pitch<T>((tile + k - 1) * C), out_pitch = odd_pitch<T>(tile * C);
    const std::size_t row_bytes = sizeof(T) * static_cast<std::size_t>(in_pitch + out_pitch);
    if (row_bytes > kRowShared) return false;  // a window this wide runs per pixel
    const int block_rows = static_cast<int>(std::min<std::size_t>(std::min(64, dst.height), kRowShared / row_bytes));
    const std::size_t shared = row_bytes * block_rows;
    const dim3 grid((dst.width + tile - 1) / tile, (dst.height + block_rows - 1) / block_rows);
    if (grid.y > 65535) return false;
    note_kernel_path(KernelPath::cuda_morph);
    rows<T, C, kMin><<<grid, kThreads, shared, stream>>>(
        op.src.view.template row<const T>(0), op.src.view.stride, dst.width, dst.height, dst.template row<T>(0),
        dst.stride, k, a, op.src.mode, op.src.constant, tile, block_rows, strip, in_pitch, out_pitch);
    CBI_CUDA_CHECK(cudaGetLastError(), "launch morphology row pass");
    return true;
}

// Output rows a column-pass thread computes: runs of up to 32 outputs read
// count + k - 1 rows for count outputs.
inline int column_strip(int k) {
    return k <= kDirect ? 16 : std::min(k, kRun);
}

template <class P, class T, bool kMin>
void launch_columns(const MorphPassOp<T, kMin>& op, std::size_t offset, int words, cudaStream_t stream) {
    const ImageView& dst = op.dst;
    const int k = op.se.height, a = op.se.ay;
    const int strip = column_strip(k);
    const dim3 grid((words + kThreads - 1) / kThreads, (dst.height + strip - 1) / strip);
    columns<P, T, kMin><<<grid, kThreads, 0, stream>>>(op.src, offset, dst.data, dst.stride, words, k, a, strip,
                                                       splat<P>(op.src.constant));
    CBI_CUDA_CHECK(cudaGetLastError(), "launch morphology column pass");
}

// Elements that are not rectangles (ellipse, cross) in O(K) per output, as MorphPassOp::runs on the CPU:
// each source row bordered once in shared memory with its runs of 2^l samples, two of them per element row.
// Output rows a block of the run kernel computes (their minima in registers).
inline constexpr int kRunRows = 16;

// Element row j's run as the two overlapping level entries that cover it:
// their offsets in shared memory, in samples (an empty row: the neutral
// samples after the levels, twice).
struct RunTaps {
    int2 run[StructuringElement::kMaxRows];
};

// A block: `tile` pixels (a thread per sample) by kRunRows output rows. Each
// source row the block reads is staged from pixel x0 - ax on (tile + w - 1
// pixels, the border resolved as the per-pixel op does): level 0; level l
// at s folds level l - 1 at s and s + 2^(l-1) pixels. Output row t folds the
// entries of element row j = r - t, r the source row's index from y0 - ay.
template <class T, int C, bool kMin>
__global__ void __launch_bounds__(kThreads)
    runs(const __grid_constant__ AnyBorderSource<T> src, std::byte* dst_data, std::size_t dst_stride, int w, int h,
         int ax, int ay, int levels, int tile, int pitch, const __grid_constant__ RunTaps taps) {
    extern __shared__ unsigned char shared_bytes[];
    T* level = reinterpret_cast<T*>(shared_bytes);
    const ImageView& view = src.view;
    const int width = view.width, height = view.height;
    const int x0 = blockIdx.x * tile, y0 = blockIdx.y * kRunRows;
    const int tw = min(tile, width - x0), nrows = min(kRunRows, height - y0);
    const int first = x0 - ax, n = (tw + w - 1) * C, i = threadIdx.x;
    const bool active = i < tw * C;
    if (active) level[(levels + 1) * pitch + i] = MorphPassOp<T, kMin>::neutral();
    // Integer minima in 32-bit registers: exact either way, and 8- and 16-bit ones made ptxas spill.
    using A = std::conditional_t<std::is_same_v<T, float>, float, unsigned>;
    A acc[kRunRows];
#pragma unroll
    for (int t = 0; t < kRunRows; ++t) acc[t] = MorphPassOp<T, kMin>::neutral();
    const T* mine = level + i;
    for (int r = 0; r < nrows + h - 1; ++r) {
        if (r > 0) __syncthreads();  // the last row's levels read by all
        // Source row y0 - ay + r resolved as AnyBorderSource::row and at do (null: a constant border's row).
        const int y = y0 - ay + r;
        const int yy = static_cast<unsigned>(y) < static_cast<unsigned>(height) ? y : border_index(src.mode, y, height);
        const T* row = yy < 0 ? nullptr : view.row<const T>(yy);
        if (row != nullptr && first >= 0 && first + n / C <= width) {
            for (int k = i; k < n; k += kThreads) level[k] = row[first * C + k];
        } else {
            for (int k = i; k < n; k += kThreads) {
                const int xx = border_index(src.mode, first + k / C, width);
                level[k] = row == nullptr || xx < 0 ? src.constant : row[xx * C + k % C];
            }
        }
        for (int l = 1, p = C; l <= levels; ++l, p *= 2) {
            __syncthreads();
            const T* from = level + (l - 1) * pitch;
            T* to = level + l * pitch;
            for (int k = i; k < n - 2 * p + C; k += kThreads) to[k] = fold<T, T, kMin>(from[k], from[k + p]);
        }
        __syncthreads();
        if (!active) continue;
        const auto add = [&](A& a, int j) {
            const int2 e = taps.run[j];
            const A u = mine[e.x], v = mine[e.y];
            if constexpr (std::is_same_v<T, float>)
                a = fold<T, T, kMin>(a, fold<T, T, kMin>(u, v));
            else
                a = kMin ? min(a, min(u, v)) : max(a, max(u, v));
        };
        if (r >= kRunRows - 1 && r < h) {
#pragma unroll
            for (int t = 0; t < kRunRows; ++t) add(acc[t], r - t);  // every output row reads this row
        } else {
#pragma unroll
            for (int t = 0; t < kRunRows; ++t)
                if (r - t >= 0 && r - t < h) add(acc[t], r - t);
        }
    }
    if (!active) return;
#pragma unroll
    for (int t = 0; t < kRunRows; ++t)
        if (t < nrows)
            reinterpret_cast<T*>(dst_data + static_cast<std::size_t>(y0 + t) * dst_stride)[x0 * C + i] =
                static_cast<T>(acc[t]);
}

// A non-rectangular element on the run kernel; false where its levels
// outgrow a block's shared memory or its rows a grid (per pixel then).
template <class T, bool kMin, int C>
bool launch_runs(const MorphPassOp<T, kMin>& op, cudaStream_t stream) {
    const StructuringElement& se = op.se;
    const ImageView& dst = op.dst;
    if (se.height > StructuringElement::kMaxRows) return false;
    const int tile = kThreads / C, pitch = (tile + se.width - 1) * C;
    int widest = 1;
    for (int j = 0; j < se.height; ++j) widest = std::max(widest, se.end[j] - se.begin[j]);
    int levels = 0;  // the top level: runs of the largest power of two <= widest
    while ((2 << levels) <= widest) ++levels;
    // The levels, then a tile's row of neutral samples for empty element rows.
    const std::size_t shared = sizeof(T) * (static_cast<std::size_t>(levels + 1) * pitch + tile * C);
    const dim3 grid((dst.width + tile - 1) / tile, (dst.height + kRunRows - 1) / kRunRows);
    if (shared > kRowShared || grid.y > 65535) return false;
    RunTaps taps{};
    for (int j = 0; j < se.height; ++j) {
        const int begin = se.begin[j], end = se.end[j];
        if (begin >= end) {
            taps.run[j] = {(levels + 1) * pitch, (levels + 1) * pitch};
            continue;
        }
        int l = 0;
        while ((2 << l) <= end - begin) ++l;
        taps.run[j] = {l * pitch + begin * C, l * pitch + (end - (1 << l)) * C};
    }
    note_kernel_path(KernelPath::cuda_morph);
    runs<T, C, kMin><<<grid, kThreads, shared, stream>>>(op.src, dst.data, dst.stride, se.width, se.height, se.ax,
                                                         se.ay, levels, tile, pitch, taps);
    CBI_CUDA_CHECK(cudaGetLastError(), "launch morphology runs");
    return true;
}

// Rectangles of both sides up to kMorphOnePassSide in one pass: a thread a
// word of a row's samples (four 8-bit, two 16-bit or one float) down a run
// of kOnePassRows output rows, each source row loaded once and the last h
// words held, their vertical fold shifted by whole pixels from the
// neighbouring lanes' words (shuffles, funnel shifts) for the row's taps. A
// warp's outer lanes only supply words (warps overlap by the taps' reach).
// Words that are not whole words of the row (its ends, the border beyond
// them, rows not on 4-byte words) are built sample by sample through the
// per-pixel op's border, so every output takes the same folds.
inline constexpr int kOnePassRows = 8;

template <class T>
using OnePassWord = std::conditional_t<std::is_same_v<T, float>, float, std::uint32_t>;

constexpr int floor4(int s) {
    return s >= 0 ? s / 4 : -((3 - s) / 4);
}

// Words the samples `pixels` pixels away reach.
template <class T, int C>
constexpr int reach_words(int pixels) {
    return (pixels * C * static_cast<int>(sizeof(T)) + 3) / 4;
}

// Lanes of a warp that store: all but the reach of L pixels left, R right.
template <class T, int C, int L, int R>
inline constexpr int kOnePassOut = 32 - reach_words<T, C>(L) - reach_words<T, C>(R);

// Whether word q from the lane's holds samples of a tap -L .. R.
template <class T, int C, int L, int R>
constexpr bool tap_word(int q) {
    for (int i = -L; i <= R; ++i) {
        const int s = i * C * static_cast<int>(sizeof(T)), w = floor4(s);
        if (q == w || (s != 4 * w && q == w + 1)) return true;
    }
    return false;
}

// Sample k of a word, and a word with sample k set (from zero).
template <class T, class P>
__device__ __forceinline__ T sample_of(P v, int k) {
    if constexpr (std::is_same_v<P, float>)
        return v;
    else
        return static_cast<T>(v >> (8 * sizeof(T) * k));
}
template <class T, class P>
__device__ __forceinline__ P with_sample(P word, int k, T v) {
    if constexpr (std::is_same_v<P, float>)
        return v;
    else
        return word | static_cast<P>(v) << (8 * sizeof(T) * k);
}

// The fold of taps -L .. R pixels (C samples apart) of a row of words, held
// this lane's word as the kernel folds it (Held: 8-bit words widened).
template <class T, int C, bool kMin, int L, int R, class V>
__device__ __forceinline__ V across(V held_word) {
    using P = OnePassWord<T>;
    constexpr int kL = reach_words<T, C>(L), kR = reach_words<T, C>(R);
    const P v = stored<P>(held_word);
    P w[kL + kR + 1];
#pragma unroll
    for (int q = -kL; q <= kR; ++q)
        if (q == 0)
            w[kL] = v;
        else if (tap_word<T, C, L, R>(q))
            w[kL + q] = q < 0 ? __shfl_up_sync(~0u, v, -q) : __shfl_down_sync(~0u, v, q);
    V acc = held_word;
#pragma unroll
    for (int i = -L; i <= R; ++i) {
        const int s = i * C * static_cast<int>(sizeof(T)), q = floor4(s), r = s - 4 * q;
        if (i == 0) continue;
        if constexpr (std::is_same_v<P, float>)
            acc = fold<V, T, kMin>(acc, w[kL + q]);  // whole words
        else
            acc = fold<V, T, kMin>(acc, held<V>(r == 0 ? w[kL + q] : __funnelshift_r(w[kL + q], w[kL + q + 1], 8 * r)));
    }
    return acc;
}

// The last two source rows a fold down the rows holds (older: h == 3).
template <class V, class T, bool kMin>
struct HeldRows {
    V older{}, last{};
    __device__ __forceinline__ void take(V next) { older = last, last = next; }
    // The vertical fold with the next row, which it then holds.
    __device__ __forceinline__ V push(V next, int h) {
        const V v = fold<V, T, kMin>(fold<V, T, kMin>(h == 3 ? older : last, last), next);
        take(next);
        return v;
    }
};

// Output words g < words of rows y0 .. y0 + kOnePassRows - 1, an element of
// h <= 3 rows anchored at row ay and pixels -L .. R; `full`: the row's
// whole words both images can load and store (0: rows not on 4 bytes).
// kGradient: the dilation minus the erosion of the same window (a centred
// 3x3 gradient); src is the erosion's source, src_max the dilation's (their
// border constants differ), and both folds' maximum >= minimum in every
// lane, so the words subtract without borrows.
template <class T, int C, bool kMin, int L, int R, bool kGradient = false>
__global__ void __launch_bounds__(kThreads)
    one_pass(const __grid_constant__ AnyBorderSource<T> src, const __grid_constant__ AnyBorderSource<T> src_max,
             std::byte* dst_data, std::size_t dst_stride, int h, int ay, int full, int words) {
    using P = OnePassWord<T>;
    constexpr int kPer = sizeof(P) / sizeof(T), kL = reach_words<T, C>(L), kOut = kOnePassOut<T, C, L, R>;
    const int lane = threadIdx.x % 32, warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int base = warp * kOut - kL, g = base + lane;  // the warp's first word, this lane's
    const int height = src.view.height, y0 = blockIdx.y * kOnePassRows, t0 = y0 - ay;
    if (warp * kOut >= words || y0 >= height) return;  // whole warps
    const int count = min(kOnePassRows, height - y0), n = src.view.width * C;
    const bool owner = lane >= kL && lane < kL + kOut && g < words;
    const bool needed = g >= -kL && g < words + reach_words<T, C>(R);
    // Word g of source row y: a constant border's row is its value in every lane.
    const auto load_from = [&](const AnyBorderSource<T>& from, int y) -> P {
        const T* row = from.row(y);
        if (row == nullptr) return splat<P>(from.constant);
        if (g >= 0 && g < full) return __ldg(reinterpret_cast<const P*>(row) + g);
        P word{};
        if (needed)
            for (int k = 0; k < kPer; ++k) {
                const int s = g * kPer + k, x = s >= 0 ? s / C : -((C - 1 - s) / C);
                word = with_sample<T>(word, k, from.at(row, x, s - x * C));
            }
        return word;
    };
    using V = Held<T, P>;
    HeldRows<V, T, kMin || kGradient> pass_rows;  // the pass's (gradient: the erosion's)
    HeldRows<V, T, false> max_rows;               // gradient: the dilation's
    // Both sources' word of row y (one load where they read the same samples).
    const auto hold = [&](P word, P word_max) {
        if constexpr (kGradient) max_rows.take(held<V>(word_max));
        pass_rows.take(held<V>(word));
    };
    struct Words {
        P word, max;
    };
    const auto load = [&](int y) {
        const P word = load_from(src, y);
        return Words{word, kGradient ? load_from(src_max, y) : word};
    };
    std::byte* to = dst_data + static_cast<std::size_t>(y0) * dst_stride;
    // Folds the next source row into the next output row (inside: a whole word of the row).
    const auto step = [&](P next_word, P next_max, auto inside) {
        P out;
        if constexpr (kGradient)
            out = stored<P>(across<T, C, false, L, R>(max_rows.push(held<V>(next_max), h))) -
                  stored<P>(across<T, C, true, L, R>(pass_rows.push(held<V>(next_word), h)));
        else
            out = stored<P>(across<T, C, kMin, L, R>(pass_rows.push(held<V>(next_word), h)));
        T* row = reinterpret_cast<T*>(to);
        to += dst_stride;
        if (!owner) return;
        if (decltype(inside)::value || g < full) {
            reinterpret_cast<P*>(row)[g] = out;
        } else {
            for (int k = 0; k < kPer; ++k)
                if (g * kPer + k < n) row[g * kPer + k] = sample_of<T>(out, k);
        }
    };
    if (base >= 0 && base + 32 <= full && t0 >= 0 && t0 + kOnePassRows + h - 1 <= height) {
        // Inside the image: plain loads, the run unrolled so that they issue ahead.
        const std::byte* from = reinterpret_cast<const std::byte*>(src.view.template row<const T>(t0) + g * kPer);
        const std::size_t stride = src.view.stride;
        const auto word = [&] {
            const P v = __ldg(reinterpret_cast<const P*>(from));
            from += stride;
            return v;
        };
        for (int i = 0; i < 2; ++i)
            if (i == 1 || h == 3) {
                const P w = word();
                hold(w, w);
            }
#pragma unroll
        for (int i = 0; i < kOnePassRows; ++i) {
            const P v = word();
            step(v, v, std::true_type{});
        }
    } else {
        int t = t0;
        for (int i = 0; i < 2; ++i)
            if (i == 1 || h == 3) {
                const Words w = load(t++);
                hold(w.word, w.max);
            }
        for (int i = 0; i < count; ++i) {
            const Words v = load(t++);
            step(v.word, v.max, std::false_type{});
        }
    }
}

// src_max: a gradient's dilation source (kGradient; op is its erosion).
template <class T, bool kMin, int C, int L, int R, bool kGradient = false>
void launch_words(const MorphPassOp<T, kMin>& op, cudaStream_t stream, const AnyBorderSource<T>* src_max = nullptr) {
    const ImageView& dst = op.dst;
    constexpr int kPer = sizeof(OnePassWord<T>) / sizeof(T), kOut = kOnePassOut<T, C, L, R>;
    const int n = dst.width * C, words = (n + kPer - 1) / kPer;
    // Whole words where both images' rows start on 4 bytes.
    const bool aligned = reinterpret_cast<std::uintptr_t>(op.src.view.data) % 4 == 0 &&
                         reinterpret_cast<std::uintptr_t>(dst.data) % 4 == 0 && op.src.view.stride % 4 == 0 &&
                         dst.stride % 4 == 0;
    const int full = aligned ? n / kPer : 0;
    const int warps = (words + kOut - 1) / kOut;
    const dim3 grid((warps * 32 + kThreads - 1) / kThreads, (dst.height + kOnePassRows - 1) / kOnePassRows);
    one_pass<T, C, kMin, L, R, kGradient><<<grid, kThreads, 0, stream>>>(
        op.src, src_max != nullptr ? *src_max : op.src, dst.data, dst.stride, op.se.height, op.se.ay, full, words);
    CBI_CUDA_CHECK(cudaGetLastError(), "launch morphology one pass");
}

// A rectangle of sides 2 or 3 in one pass, anchored at its centre or at 2
// of 3 (two iterations of 2x2); false for anchors no expansion makes.
template <class T, bool kMin, int C>
bool launch_one_pass_anchor(const MorphPassOp<T, kMin>& op, cudaStream_t stream) {
    const StructuringElement& se = op.se;
    if (se.width == 2 && se.ax == 1)
        launch_words<T, kMin, C, 1, 0>(op, stream);
    else if (se.width == 3 && se.ax == 1)
        launch_words<T, kMin, C, 1, 1>(op, stream);
    else if (se.width == 3 && se.ax == 2)
        launch_words<T, kMin, C, 2, 0>(op, stream);
    else
        return false;
    return true;
}

template <class T, bool kMin>
bool launch_one_pass(const MorphPassOp<T, kMin>& op, cudaStream_t stream) {
    const StructuringElement& se = op.se;
    static_assert(kMorphOnePassSide == 3, "one_pass holds two source rows and reaches two pixels");
    if (se.height < 2 || se.height > kMorphOnePassSide || se.ay < 0 || se.ay >= se.height) return false;
    if ((op.dst.height + kOnePassRows - 1) / kOnePassRows > 65535) return false;
    bool launched = false;
    switch (op.dst.channels) {
        case 1: launched = launch_one_pass_anchor<T, kMin, 1>(op, stream); break;
        case 3: launched = launch_one_pass_anchor<T, kMin, 3>(op, stream); break;
        case 4: launched = launch_one_pass_anchor<T, kMin, 4>(op, stream); break;
        default: break;
    }
    if (launched) note_kernel_path(KernelPath::cuda_morph);
    return launched;
}

}  // namespace morph

// The centred 3x3 gradient in one pass (both folds of each window in the
// one-pass kernel); false for other elements, which expand never leaves
// whole, and rows taller than a grid's.
template <class T>
bool morphology_gradient_pass(const MorphGradientOp<T>& op, cudaStream_t stream) {
    const StructuringElement& se = op.erode.se;
    const ImageView& dst = op.dilate.dst;
    if (dst.empty() || !se.rect || se.width != 3 || se.height != 3 || se.ax != 1 || se.ay != 1) return false;
    if ((dst.height + morph::kOnePassRows - 1) / morph::kOnePassRows > 65535) return false;
    switch (dst.channels) {
        case 1: morph::launch_words<T, true, 1, 1, 1, true>(op.erode, stream, &op.dilate.src); break;
        case 3: morph::launch_words<T, true, 3, 1, 1, true>(op.erode, stream, &op.dilate.src); break;
        case 4: morph::launch_words<T, true, 4, 1, 1, true>(op.erode, stream, &op.dilate.src); break;
        default: return false;
    }
    note_kernel_path(KernelPath::cuda_morph);
    return true;
}

// Runs a rectangle's row or column pass (an element one sample tall or
// wide) on its van Herk kernel, a small rectangle on its one-pass kernel and
// any other shape on the run kernel; false for larger rectangles of both
// sides > 1 (expand splits them) and what those kernels refuse, which run
// per pixel.
template <class T, bool kMin>
bool morphology_pass(const MorphPassOp<T, kMin>& op, cudaStream_t stream) {
    const StructuringElement& se = op.se;
    const ImageView& dst = op.dst;
    if (dst.empty()) return false;
    if (!se.rect) {
        switch (dst.channels) {
            case 1: return morph::launch_runs<T, kMin, 1>(op, stream);
            case 3: return morph::launch_runs<T, kMin, 3>(op, stream);
            case 4: return morph::launch_runs<T, kMin, 4>(op, stream);
            default: return false;
        }
    }
    if (se.width > 1 && se.height > 1)
        return se.width <= kMorphOnePassSide && se.height <= kMorphOnePassSide && morph::launch_one_pass(op, stream);
    if (se.height == 1) {
        if (se.width == 1) return false;  // a copy: the per-pixel op
        switch (dst.channels) {
            case 1: return morph::launch_rows<T, kMin, 1>(op, stream);
            case 3: return morph::launch_rows<T, kMin, 3>(op, stream);
            case 4: return morph::launch_rows<T, kMin, 4>(op, stream);
            default: return false;
        }
    }
    if ((dst.height + morph::column_strip(se.height) - 1) / morph::column_strip(se.height) > 65535)
        return false;  // taller than a grid's rows of runs: per pixel
    note_kernel_path(KernelPath::cuda_morph);
    const int samples = dst.width * dst.channels;
    // Words of four bytes where both images' rows allow them; the rest of a
    // row (and every sample of rows that do not) as single samples.
    const bool aligned = reinterpret_cast<std::uintptr_t>(op.src.view.data) % 4 == 0 &&
                         reinterpret_cast<std::uintptr_t>(dst.data) % 4 == 0 && op.src.view.stride % 4 == 0 &&
                         dst.stride % 4 == 0;
    using Word = std::conditional_t<std::is_same_v<T, float>, float, std::uint32_t>;
    constexpr int kPerWord = sizeof(Word) / sizeof(T);
    const int words = aligned ? samples / kPerWord : 0;
    if (words > 0) morph::launch_columns<Word, T, kMin>(op, 0, words, stream);
    if (const int rest = samples - words * kPerWord; rest > 0)
        morph::launch_columns<T, T, kMin>(op, static_cast<std::size_t>(words) * sizeof(Word), rest, stream);
    return true;
}

}  // namespace cbi::cuda
