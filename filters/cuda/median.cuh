#pragma once
// median:3 and median:5 on CUDA (what the naive schedule runs for them): a
// thread computes a word of a row's samples at once: the K x K words around
// it (aligned loads, shifted by whole pixels with funnel shifts) through the
// median network of filters/select.hpp, lane by lane in SIMD minimum and
// maximum: four 8-bit or two 16-bit samples a word; floats one per word as
// their rank keys. Threads whose window leaves the row select per sample,
// as the per-pixel op does. A median is one of the samples, so every path
// gives the same result.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "filters/cuda/check.hpp"
#include "filters/cuda/lanes.cuh"
#include "filters/kernel_path.hpp"
#include "filters/kinds/median.hpp"

namespace cbi::cuda {

namespace median {

template <class T, int N, int... I>
__device__ __forceinline__ void network(std::uint32_t* v, std::integer_sequence<int, I...>) {
    (
        [&] {
            constexpr int a = kMedianNetworkA<N, I>, b = kMedianNetworkB<N, I>;
            const std::uint32_t x = v[a], y = v[b];
            v[a] = lanes_fold<T, true>(x, y);
            v[b] = lanes_fold<T, false>(x, y);
        }(),
        ...);
}

// A word of a source row as the network's lanes: floats as rank keys.
template <class T>
__device__ __forceinline__ std::uint32_t lanes_of(std::uint32_t w) {
    if constexpr (std::is_same_v<T, float>)
        return rank_key(__uint_as_float(w));
    else
        return w;
}

// Output words g of row y (each 4 bytes of the row), a K x K window of C-channel pixels.
template <class T, int K, int C>
__global__ void median_words(const __grid_constant__ MedianOp<T> op, int words) {
    const int g = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (g >= words || y >= op.dst.height) return;
    constexpr int kR = K / 2, kPerWord = 4 / sizeof(T);
    // Bytes the window reaches either side of the word, and the words that covers.
    constexpr int kReach = kR * C * static_cast<int>(sizeof(T)), kD = (kReach + 3) / 4;
    const int n = op.dst.width * C;      // samples of a row
    const int full = n * sizeof(T) / 4;  // words wholly inside a row
    T* out = op.dst.template row<T>(y);
    if (g >= kD && g + kD < full && g < full) {
        std::uint32_t v[K * K];
#pragma unroll
        for (int j = 0; j < K; ++j) {
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
#pragma unroll
            for (int i = 0; i < K; ++i) {
                // The word shifted by (i - R) pixels: bytes 4 kD + offset .. + 4 of w.
                constexpr int kBase = 4 * kD;
                const int at = kBase + (i - kR) * C * static_cast<int>(sizeof(T));
                const int q = at / 4, shift = at % 4;
                v[j * K + i] = lanes_of<T>(shift == 0 ? w[q] : __funnelshift_r(w[q], w[q + 1], 8 * shift));
            }
        }
        network<T, K * K>(v, std::make_integer_sequence<int, kMedianNetwork<K * K>.count>{});
        const std::uint32_t m = v[kMedianNetwork<K * K>.median];
        reinterpret_cast<std::uint32_t*>(out)[g] =
            std::is_same_v<T, float> ? __float_as_uint(from_rank_key<float>(m)) : m;
        return;
    }
    // Near the row's ends: each sample of the word by itself.
    const T* rows[K];
#pragma unroll
    for (int j = 0; j < K; ++j) rows[j] = op.src.row(y + j - kR);
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

template <class T, int K, int C>
void launch(const MedianOp<T>& op, cudaStream_t stream) {
    const int n = op.dst.width * C;
    const int words = (n * static_cast<int>(sizeof(T)) + 3) / 4;
    const dim3 block(32, 8), grid((words + 31) / 32, (op.dst.height + 7) / 8);
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

}  // namespace median

// median:3 and median:5 on their word kernel (images whose rows start on
// whole words); false for the rest, which runs per pixel.
template <class T>
bool median_pass(const MedianOp<T>& op, cudaStream_t stream) {
    const ImageView& dst = op.dst;
    if (dst.empty() || (op.ksize != 3 && op.ksize != 5)) return false;
    const bool aligned = reinterpret_cast<std::uintptr_t>(op.src.view.data) % 4 == 0 &&
                         reinterpret_cast<std::uintptr_t>(dst.data) % 4 == 0 && op.src.view.stride % 4 == 0 &&
                         dst.stride % 4 == 0;
    if (!aligned) return false;
    if ((dst.height + 7) / 8 > 65535) return false;
    if (!(op.ksize == 3 ? median::launch_channels<T, 3>(op, stream) : median::launch_channels<T, 5>(op, stream)))
        return false;
    note_kernel_path(KernelPath::cuda_median);
    return true;
}

}  // namespace cbi::cuda
