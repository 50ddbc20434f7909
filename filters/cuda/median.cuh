#pragma once
// median:3 and median:5 on CUDA (what the naive schedule runs for them): a
// thread computes a word of two rows' samples at once: the K x K words around
// each (aligned loads, shifted by whole pixels with funnel shifts) through the
// median network of filters/select.hpp (the comparators reading only the
// rows both windows share run once), lane by lane in SIMD minimum and
// maximum: two 16-bit samples a word (8-bit words widened to two); floats
// one per word as their rank keys. Threads whose window leaves the row select per sample,
// as the per-pixel op does. A median is one of the samples, so every path
// gives the same result. Through a fused colour node (color:gray | median:5)
// a block stages its window's converted samples once (median_coloured_pass).
// 8-bit medians of K >= 7 slide a histogram down each sample column
// (median_histogram): O(K) per pixel where the per-pixel op is O(K^2).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "filters/cuda/check.hpp"
#include "filters/cuda/lanes.cuh"
#include "filters/cuda/launch.cuh"
#include "filters/kernel_path.hpp"
#include "filters/kinds/median.hpp"

namespace cbi::cuda {

namespace median {

// Comparators From + I of the median network of N inputs.
template <class T, int N, int From = 0, int... I>
__device__ __forceinline__ void network(std::uint32_t* v, std::integer_sequence<int, I...>) {
    (
        [&] {
            constexpr int a = kMedianNetworkA<N, From + I>, b = kMedianNetworkB<N, From + I>;
            const std::uint32_t x = v[a], y = v[b];
            v[a] = lanes_fold<T, true>(x, y);
            v[b] = lanes_fold<T, false>(x, y);
        }(),
        ...);
}

// The medians of two windows of N words whose first S are the same words
// (v[0, S) = u[0, S); v and u are reordered): the comparators that read
// only those run once (median_network_prefix), the rest on each window.
template <class T, int N, int S>
__device__ __forceinline__ void median_word_pair(std::uint32_t* v, std::uint32_t* u, std::uint32_t& mv,
                                                 std::uint32_t& mu) {
    constexpr int p = median_network_prefix<N>(S), count = kMedianNetwork<N>.count;
    constexpr int m = kMedianNetwork<N>.median;
    constexpr auto shared = std::make_integer_sequence<int, p>{};
    constexpr auto rest = std::make_integer_sequence<int, count - p>{};
    if constexpr (sizeof(T) == 1) {
        std::uint32_t ve[N], vo[N], ue[N], uo[N];
#pragma unroll
        for (int i = 0; i < N; ++i) {
            const Wide8 w = widen8(v[i]);
            ve[i] = w.even, vo[i] = w.odd;
            if (i >= S) {
                const Wide8 x = widen8(u[i]);
                ue[i] = x.even, uo[i] = x.odd;
            }
        }
        network<std::uint16_t, N>(ve, shared);
        network<std::uint16_t, N>(vo, shared);
#pragma unroll
        for (int i = 0; i < S; ++i) ue[i] = ve[i], uo[i] = vo[i];
        network<std::uint16_t, N, p>(ve, rest);
        network<std::uint16_t, N, p>(vo, rest);
        network<std::uint16_t, N, p>(ue, rest);
        network<std::uint16_t, N, p>(uo, rest);
        mv = narrow8({ve[m], vo[m]});
        mu = narrow8({ue[m], uo[m]});
    } else {
        network<T, N>(v, shared);
#pragma unroll
        for (int i = 0; i < S; ++i) u[i] = v[i];
        network<T, N, p>(v, rest);
        network<T, N, p>(u, rest);
        mv = v[m];
        mu = u[m];
    }
}

// A word of a source row as the network's lanes: floats as rank keys.
template <class T>
__device__ __forceinline__ std::uint32_t lanes_of(std::uint32_t w) {
    if constexpr (std::is_same_v<T, float>)
        return rank_key(__uint_as_float(w));
    else
        return w;
}

// Source row j of a thread's two windows (rows y - R .. y + R + 1): from its
// words w (the output word's kD either side), the K words shifted by
// (i - R) pixels into v and u as median_word_pair takes them. Row 0 is row
// y's alone, row K row y + 1's; the K - 1 between are both windows' first inputs.
template <class T, int K, int C>
__device__ __forceinline__ void take_row(const std::uint32_t* w, int j, std::uint32_t* v, std::uint32_t* u) {
    constexpr int kR = K / 2, kShared = K * (K - 1);
    constexpr int kD = (kR * C * static_cast<int>(sizeof(T)) + 3) / 4;
#pragma unroll
    for (int i = 0; i < K; ++i) {
        // The word shifted by (i - R) pixels: bytes 4 kD + offset .. + 4 of w.
        const int at = 4 * kD + (i - kR) * C * static_cast<int>(sizeof(T));
        const int q = at / 4, shift = at % 4;
        const std::uint32_t x = lanes_of<T>(shift == 0 ? w[q] : __funnelshift_r(w[q], w[q + 1], 8 * shift));
        if (j == 0)
            v[kShared + i] = x;
        else if (j == K)
            u[kShared + i] = x;
        else
            v[(j - 1) * K + i] = x;
    }
}

// Output words g of rows y and y + 1 (each 4 bytes of the row), a K x K
// window of C-channel pixels: the two windows share K - 1 rows, whose part
// of the network runs once (median_word_pair).
template <class T, int K, int C>
__global__ void median_words(const __grid_constant__ MedianOp<T> op, int words) {
    const int g = blockIdx.x * blockDim.x + threadIdx.x, y = 2 * (blockIdx.y * blockDim.y + threadIdx.y);
    if (g >= words || y >= op.dst.height) return;
    constexpr int kR = K / 2, kPerWord = 4 / sizeof(T), kShared = K * (K - 1);
    // Bytes the window reaches either side of the word, and the words that covers.
    constexpr int kReach = kR * C * static_cast<int>(sizeof(T)), kD = (kReach + 3) / 4;
    const int n = op.dst.width * C;      // samples of a row
    const int full = n * sizeof(T) / 4;  // words wholly inside a row
    const bool second = y + 1 < op.dst.height;
    if (g >= kD && g + kD < full && g < full) {
        std::uint32_t v[K * K], u[K * K];  // take_row's two windows
#pragma unroll
        for (int j = 0; j <= K; ++j) {
            const T* row = op.src.row(y + j - kR);
            std::uint32_t w[2 * kD + 1];
            if (row == nullptr) {
                // A constant border's row: its value in every lane.
                std::uint32_t c;
                if constexpr (std::is_same_v<T, float>)
                    c = __float_as_uint(op.src.constant);
                else
                    c = splat<std::uint32_t>(op.src.constant);
#pragma unroll
                for (int q = 0; q < 2 * kD + 1; ++q) w[q] = c;
            } else {
                const std::uint32_t* words_of_row = reinterpret_cast<const std::uint32_t*>(row) + g - kD;
#pragma unroll
                for (int q = 0; q < 2 * kD + 1; ++q) w[q] = __ldg(words_of_row + q);
            }
            take_row<T, K, C>(w, j, v, u);
        }
        std::uint32_t mv, mu;
        median_word_pair<T, K * K, kShared>(v, u, mv, mu);
        if constexpr (std::is_same_v<T, float>)
            mv = __float_as_uint(from_rank_key<float>(mv)), mu = __float_as_uint(from_rank_key<float>(mu));
        reinterpret_cast<std::uint32_t*>(op.dst.template row<T>(y))[g] = mv;
        if (second) reinterpret_cast<std::uint32_t*>(op.dst.template row<T>(y + 1))[g] = mu;
        return;
    }
    // Near the row's ends: each sample of the word by itself.
    for (int yy = y; yy < y + (second ? 2 : 1); ++yy) {
        const T* rows[K];
#pragma unroll
        for (int j = 0; j < K; ++j) rows[j] = op.src.row(yy + j - kR);
        T* out = op.dst.template row<T>(yy);
        for (int s = g * kPerWord; s < min(n, (g + 1) * kPerWord); ++s) {
            const int x = s / C, c = s - x * C;
            std::uint32_t v[K * K];
#pragma unroll
            for (int j = 0; j < K; ++j)
#pragma unroll
                for (int i = 0; i < K; ++i) v[j * K + i] = rank_key(op.src.at(rows[j], x + i - kR, c));
            out[s] = from_rank_key<T>(median_of<K * K>(v));
        }
    }
}

// The word kernel reading through a fused colour node (color:gray |
// median:5; any K, made for K = 5): a block of 32 output words x 8 pairs of
// rows first stages the converted samples of its window, words kD either
// side and K / 2 rows above and below, each converted once
// (ColorOp::sample through the border rule, as the stored colour image
// would give them); then each thread runs the network on the K x K shifted
// words of its two rows from the stage, as median_words. Words at the row's
// end store only their samples inside it.
constexpr int kColouredWords = 32, kColouredPairs = 8;  // a block's output words x pairs of rows

template <class T, int K, int C>
__global__ void __launch_bounds__(kColouredWords* kColouredPairs)
    median_words_coloured(const __grid_constant__ MedianOp<T> op, const __grid_constant__ AnyBorderColorSource<T> src,
                          int words) {
    constexpr int kR = K / 2, kPerWord = 4 / sizeof(T), kShared = K * (K - 1);
    constexpr int kReach = kR * C * static_cast<int>(sizeof(T)), kD = (kReach + 3) / 4;
    constexpr int kRows = 2 * kColouredPairs + 2 * kR, kCols = kColouredWords + 2 * kD;
    __shared__ std::uint32_t stage[kRows][kCols];
    __shared__ const T* rows[kRows];
    const int g0 = blockIdx.x * kColouredWords, y0 = blockIdx.y * 2 * kColouredPairs;
    const int me = threadIdx.y * blockDim.x + threadIdx.x, nthreads = blockDim.x * blockDim.y;
    for (int r = me; r < kRows; r += nthreads) rows[r] = src.row(y0 - kR + r);
    __syncthreads();
    for (int i = me; i < kRows * kCols; i += nthreads) {
        const int r = i / kCols, q = i - r * kCols;
        T v[kPerWord];
#pragma unroll
        for (int k = 0; k < kPerWord; ++k) {
            const int s = (g0 - kD + q) * kPerWord + k;  // sample of the row; negative left of it
            const int x = s >= 0 ? s / C : -((-s + C - 1) / C);
            v[k] = src.at(rows[r], x, s - x * C);
        }
        std::uint32_t w;
        memcpy(&w, v, 4);
        stage[r][q] = w;
    }
    __syncthreads();
    const int g = g0 + threadIdx.x, y = y0 + 2 * threadIdx.y;
    if (g >= words || y >= op.dst.height) return;
    std::uint32_t v[K * K], u[K * K];
#pragma unroll
    for (int j = 0; j <= K; ++j) take_row<T, K, C>(stage[2 * threadIdx.y + j] + threadIdx.x, j, v, u);
    std::uint32_t m[2];
    median_word_pair<T, K * K, kShared>(v, u, m[0], m[1]);
    const int n = op.dst.width * C;
    for (int r = 0; r < 2 && y + r < op.dst.height; ++r) {
        if constexpr (std::is_same_v<T, float>) m[r] = __float_as_uint(from_rank_key<float>(m[r]));
        T* out = op.dst.template row<T>(y + r);
        if ((g + 1) * kPerWord <= n) {
            reinterpret_cast<std::uint32_t*>(out)[g] = m[r];
        } else {
            T samples[kPerWord];
            memcpy(samples, &m[r], 4);
            for (int k = 0; k < kPerWord && g * kPerWord + k < n; ++k) out[g * kPerWord + k] = samples[k];
        }
    }
}

template <class T, int K, int C>
void launch(const MedianOp<T>& op, cudaStream_t stream) {
    const int n = op.dst.width * C;
    const int words = (n * static_cast<int>(sizeof(T)) + 3) / 4;
    const dim3 block(32, 8), grid((words + 31) / 32, (op.dst.height + 15) / 16);  // two rows a thread
    median_words<T, K, C><<<grid, block, 0, stream>>>(op, words);
    CBI_CUDA_CHECK(cudaGetLastError(), "launch median");
}

template <class T, int K>
bool launch_channels(const MedianOp<T>& op, cudaStream_t stream) {
    switch (op.dst.channels) {
        case 1: launch<T, K, 1>(op, stream); return true;
        case 3: launch<T, K, 3>(op, stream); return true;
        case 4: launch<T, K, 4>(op, stream); return true;
        default: return false;
    }
}

template <class T, int K, int C>
void launch_coloured(const MedianOp<T>& op, const AnyBorderColorSource<T>& src, cudaStream_t stream) {
    const int words = (op.dst.width * C * static_cast<int>(sizeof(T)) + 3) / 4;
    constexpr int kBlockRows = 2 * kColouredPairs;
    const dim3 block(kColouredWords, kColouredPairs),
        grid((words + kColouredWords - 1) / kColouredWords, (op.dst.height + kBlockRows - 1) / kBlockRows);
    median_words_coloured<T, K, C><<<grid, block, 0, stream>>>(op, src, words);
    CBI_CUDA_CHECK(cudaGetLastError(), "launch median through a colour node");
}

// 8-bit medians of K >= kHistogramFrom: a thread owns a sample column (one
// channel of a pixel column) over a strip of rows and keeps its window's
// 256-bin histogram in shared memory, sliding it down a row at a time: K
// samples out, K in (Huang's method down the column, O(K) an output where
// radix selection is O(K^2)). The median bin m is tracked with the count of
// samples below it and moves only as far as the counts say. Bin b of thread
// t sits at b * kHistogramThreads + t; no thread reads another's bins, so
// there are no barriers. Counts are bytes while K^2 < 256 (K <= 15): half
// the shared memory, twice the threads an SM holds.
constexpr int kHistogramFrom = 7, kHistogramThreads = 64, kByteCountsTo = 15;

// The strip's rows: the window is filled from scratch once a strip (K^2
// samples, against 2K a row down), so twice K rows or more, rounded to 8.
inline int histogram_strip(int ksize) {
    return std::max(32, (2 * ksize + 7) / 8 * 8);
}

template <int C, class Count>
__global__ void __launch_bounds__(kHistogramThreads)
    median_histogram(const __grid_constant__ MedianOp<std::uint8_t> op, int strip) {
    __shared__ Count bins[256 * kHistogramThreads];
    Count* h = bins + threadIdx.x;
    const int j = blockIdx.x * kHistogramThreads + threadIdx.x, width = op.dst.width;
    if (j >= width * C) return;
    const int x = j / C, c = j % C, k = op.ksize, r = k / 2, rank = k * k / 2;
    const int y0 = blockIdx.y * strip, y1 = min(y0 + strip, op.dst.height);
    const bool inside = x >= r && x + r < width;
    const std::uint8_t constant = op.src.constant;
    // Sample i (0 .. K - 1) of the window's row `row` (null: a constant border's).
    const auto sample = [&](const std::uint8_t* row, int i) -> int {
        if (row == nullptr) return constant;
        if (inside) return __ldg(row + (x - r + i) * C + c);
        return op.src.at(row, x - r + i, c);
    };
    for (int b = 0; b < 256; ++b) h[b * kHistogramThreads] = 0;
    for (int dy = -r; dy <= r; ++dy) {
        const std::uint8_t* row = op.src.row(y0 + dy);
        for (int i = 0; i < k; ++i) ++h[sample(row, i) * kHistogramThreads];
    }
    int m = 0, below = 0;  // samples below bin m
    // Samples v leave the window and u enter it.
    const auto swap_in = [&](int v, int u) {
        --h[v * kHistogramThreads];
        ++h[u * kHistogramThreads];
        below += (u < m) - (v < m);
    };
    for (int y = y0;;) {
        while (below > rank) below -= h[--m * kHistogramThreads];
        while (below + h[m * kHistogramThreads] <= rank) below += h[m++ * kHistogramThreads];
        op.dst.row<std::uint8_t>(y)[j] = static_cast<std::uint8_t>(m);
        if (++y == y1) return;
        // Down a row: source row y - 1 - r leaves, y + r enters.
        const std::uint8_t *out = op.src.row(y - 1 - r), *in = op.src.row(y + r);
        int i = 0;
        if (inside && out != nullptr && in != nullptr) {  // plain loads, four of each ahead of their bins
            const std::uint8_t *po = out + (x - r) * C + c, *pi = in + (x - r) * C + c;
            for (; i + 4 <= k; i += 4) {
                int v[4], u[4];
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    v[q] = __ldg(po + (i + q) * C);
                    u[q] = __ldg(pi + (i + q) * C);
                }
#pragma unroll
                for (int q = 0; q < 4; ++q) swap_in(v[q], u[q]);
            }
            for (; i < k; ++i) swap_in(__ldg(po + i * C), __ldg(pi + i * C));
        } else {
            for (; i < k; ++i) swap_in(sample(out, i), sample(in, i));
        }
    }
}

template <int C, class Count>
void launch_histogram(const MedianOp<std::uint8_t>& op, cudaStream_t stream) {
    // A block's bins: as many blocks an SM as all its shared memory holds
    // (the carveout is a hint, asked once per device).
    static std::atomic<bool> carved[kCachedDevices];
    const int device = current_device();
    if (device < kCachedDevices && !carved[device].load(std::memory_order_relaxed)) {
        CBI_CUDA_CHECK(cudaFuncSetAttribute(median_histogram<C, Count>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                            cudaSharedmemCarveoutMaxShared),
                       "cudaFuncSetAttribute(PreferredSharedMemoryCarveout)");
        carved[device].store(true, std::memory_order_relaxed);
    }
    const int strip = histogram_strip(op.ksize);
    const dim3 grid((op.dst.width * C + kHistogramThreads - 1) / kHistogramThreads,
                    (op.dst.height + strip - 1) / strip);
    median_histogram<C, Count><<<grid, kHistogramThreads, 0, stream>>>(op, strip);
    CBI_CUDA_CHECK(cudaGetLastError(), "launch median histogram");
}

template <int C>
void launch_histogram(const MedianOp<std::uint8_t>& op, cudaStream_t stream) {
    if (op.ksize <= kByteCountsTo)
        launch_histogram<C, std::uint8_t>(op, stream);
    else
        launch_histogram<C, std::uint16_t>(op, stream);
}

}  // namespace median

// Whether median_coloured_pass takes a median of `ksize` reading a fused
// colour node of `channels` output channels (the executor asks before it
// fuses): K = 5 on 1-channel colour outputs (gray). At K = 3, and on 3
// channels, the staged conversions cost more than the colour image's pass
// saves (docs/performance.md#median-colour).
inline bool median_takes_colour(int ksize, int channels) {
    return ksize == 5 && channels == 1;
}

// median:5 through a fused colour node on the word kernel
// (op.dst's rows on whole words; the grid's rows within range); false for
// the rest, which the caller runs as the two nodes.
template <class T>
bool median_coloured_pass(const MedianOp<T>& op, const AnyBorderColorSource<T>& src, cudaStream_t stream) {
    const ImageView& dst = op.dst;
    if (dst.empty() || !median_takes_colour(op.ksize, dst.channels)) return false;
    if (reinterpret_cast<std::uintptr_t>(dst.data) % 4 != 0 || dst.stride % 4 != 0) return false;
    if ((dst.height + 2 * median::kColouredPairs - 1) / (2 * median::kColouredPairs) > 65535) return false;
    median::launch_coloured<T, 5, 1>(op, src, stream);
    note_kernel_path(KernelPath::cuda_median);
    return true;
}

// median:3 and median:5 on their word kernel (images whose rows start on
// whole words), 8-bit medians of K >= 7 on the histogram kernel; false for
// the rest, which runs per pixel.
template <class T>
bool median_pass(const MedianOp<T>& op, cudaStream_t stream) {
    const ImageView& dst = op.dst;
    if (dst.empty()) return false;
    if constexpr (std::is_same_v<T, std::uint8_t>)
        if (op.ksize >= median::kHistogramFrom) {
            const int strip = median::histogram_strip(op.ksize);
            if ((dst.height + strip - 1) / strip > 65535) return false;
            switch (dst.channels) {
                case 1: median::launch_histogram<1>(op, stream); break;
                case 3: median::launch_histogram<3>(op, stream); break;
                case 4: median::launch_histogram<4>(op, stream); break;
                default: return false;
            }
            note_kernel_path(KernelPath::cuda_median);
            return true;
        }
    if (op.ksize != 3 && op.ksize != 5) return false;
    const bool aligned = reinterpret_cast<std::uintptr_t>(op.src.view.data) % 4 == 0 &&
                         reinterpret_cast<std::uintptr_t>(dst.data) % 4 == 0 && op.src.view.stride % 4 == 0 &&
                         dst.stride % 4 == 0;
    if (!aligned) return false;
    if ((dst.height + 15) / 16 > 65535) return false;
    if (!(op.ksize == 3 ? median::launch_channels<T, 3>(op, stream) : median::launch_channels<T, 5>(op, stream)))
        return false;
    note_kernel_path(KernelPath::cuda_median);
    return true;
}

}  // namespace cbi::cuda
