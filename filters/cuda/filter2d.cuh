#pragma once
// filter2d on CUDA's tile:WxH schedules: a block computes its W x H tile
// after staging the tile's source samples with their halo in shared memory
// as floats, the border resolved there. The tile is the block's threads (one
// output each) or 4 or 8 times them (each thread 4 or 8 outputs down a
// column: tile:128x16 with blocks of 256, the default): a block holds that
// many more bytes in flight and reads each tap's weight once for all its
// sums. The nonzero taps, with their offsets in the stage, are listed once
// per launch on the host and copied to shared memory by each block; 3x3
// kernels on integer images have a kernel of their own (staged3x3). The
// per-pixel kernel resolved the border, converted the sample and tested the
// tap at every tap of every output (it still runs what the staged kernels
// do not take: more than kMaxFilter2DTaps nonzero taps, a stage over the
// shared memory, other schedules). Each output sums the taps in
// Filter2DOp's order with the same roundings: the results are bit-identical.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "filters/cuda/check.hpp"
#include "filters/cuda/launch.cuh"
#include "filters/kernel_path.hpp"
#include "filters/kinds/filter2d.hpp"
#include "schedules/schedule.hpp"

namespace cbi::cuda {

namespace filter2d {

// The nonzero taps in row-major order: weight and sample offset in the stage.
struct Taps {
    int count;
    float w[kMaxFilter2DTaps];
    int off[kMaxFilter2DTaps];
};

template <class T>
struct Args {
    AnyBorderSource<T> src;
    ImageView dst;
    int kw, kh;
    Taps taps;
};

// The block's source tile and halo into `stage` (tw x th outputs, a kernel
// of kw x kh), a warp a row. A row's samples are contiguous where the row
// and the block's columns lie inside the image: 8- and 16-bit samples load
// as whole 32-bit words (the unaligned ends one by one); elsewhere the
// border resolves each sample.
template <class T, int C>
__device__ __forceinline__ void stage_tile(const AnyBorderSource<T>& src, float* stage, int x0, int y0, int tw, int th,
                                           int kw, int kh) {
    const int sw = tw + kw - 1, sh = th + kh - 1, pitch = sw * C;
    const int left = x0 - kw / 2, top = y0 - kh / 2;
    const bool inside_x = left >= 0 && left + sw <= src.view.width;
    const int tid = threadIdx.y * blockDim.x + threadIdx.x, lane = tid % 32, warps = blockDim.x * blockDim.y / 32;
    for (int r = tid / 32; r < sh; r += warps) {
        const T* row = src.row(top + r);
        float* out = stage + r * pitch;
        if (inside_x && row != nullptr) {
            const T* first = row + left * C;
            if constexpr (sizeof(T) < 4) {
                constexpr int kPerWord = 4 / sizeof(T);
                const int head =
                    min(pitch, static_cast<int>((4 - reinterpret_cast<std::uintptr_t>(first) % 4) % 4 / sizeof(T)));
                const int words = (pitch - head) / kPerWord, tail = head + words * kPerWord;
                const auto* word = reinterpret_cast<const std::uint32_t*>(first + head);
                for (int k = lane; k < words; k += 32) {
                    const std::uint32_t v = word[k];
#pragma unroll
                    for (int q = 0; q < kPerWord; ++q)
                        out[head + k * kPerWord + q] = to_float(static_cast<T>(v >> (q * 8 * sizeof(T))));
                }
                if (lane < head) out[lane] = to_float(first[lane]);
                if (lane < pitch - tail) out[tail + lane] = to_float(first[tail + lane]);
            } else {
                for (int s = lane; s < pitch; s += 32) out[s] = to_float(first[s]);
            }
        } else {
            for (int s = lane; s < pitch; s += 32) {
                const int p = s / C, c = s - p * C;
                out[s] = to_float(src.at(row, left + p, c));
            }
        }
    }
}

// R outputs per thread, one under the other; C channels.
template <class T, int C, int R>
__global__ void staged(const __grid_constant__ Args<T> a) {
    extern __shared__ float4 shared4[];  // float4: 16-byte aligned for the 4-channel loads
    float* stage = reinterpret_cast<float*>(shared4);
    const int tw = blockDim.x, th = blockDim.y * R;
    const int pitch = (tw + a.kw - 1) * C;
    const int x0 = blockIdx.x * tw, y0 = blockIdx.y * th;
    // The tap list after the stage: read from shared memory, a broadcast
    // (read from the parameters with the loop's index, each tap was a load
    // through the generic path).
    const int n = a.taps.count;
    float* weights = stage + pitch * (th + a.kh - 1);
    int* offsets = reinterpret_cast<int*>(weights + n);
    for (int t = threadIdx.y * tw + threadIdx.x; t < n; t += tw * blockDim.y) {
        weights[t] = a.taps.w[t];
        offsets[t] = a.taps.off[t];
    }
    stage_tile<T, C>(a.src, stage, x0, y0, tw, th, a.kw, a.kh);
    __syncthreads();
    const int x = x0 + threadIdx.x, y = y0 + threadIdx.y * R;
    if (x >= a.dst.width || y >= a.dst.height) return;
    const float* base = stage + threadIdx.y * R * pitch + threadIdx.x * C;
    float sum[R][C];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int c = 0; c < C; ++c) sum[r][c] = 0.f;
#pragma unroll 2
    for (int t = 0; t < n; ++t) {
        const float w = weights[t];
        const float* p = base + offsets[t];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            if constexpr (C == 4) {
                const float4 v = *reinterpret_cast<const float4*>(p + r * pitch);
                sum[r][0] = add_rn(sum[r][0], mul_rn(w, v.x));
                sum[r][1] = add_rn(sum[r][1], mul_rn(w, v.y));
                sum[r][2] = add_rn(sum[r][2], mul_rn(w, v.z));
                sum[r][3] = add_rn(sum[r][3], mul_rn(w, v.w));
            } else {
#pragma unroll
                for (int c = 0; c < C; ++c) sum[r][c] = add_rn(sum[r][c], mul_rn(w, p[r * pitch + c]));
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
        if (y + r < a.dst.height) {
            T* out = a.dst.template row<T>(y + r) + x * C;
#pragma unroll
            for (int c = 0; c < C; ++c) out[c] = saturate_round<T>(sum[r][c]);
        }
}

// A 3x3 kernel on an 8- or 16-bit image, its taps operands of the
// multiplies (the launch's constants). Each thread's R outputs read their
// column's R + 2 rows of 3 samples once into registers: a tap costs a
// multiply and an add. Such samples are finite, so a zero tap adds +0 or -0
// to a sum that starts at +0 and changes nothing: all nine are added (a
// float image's infinity times a zero tap would be NaN: Filter2DOp skips
// them, and so does the general kernel).
struct Taps3x3 {
    float w[9];
};
// CUDA's limit on a kernel's parameters (12.1 and later, Volta and later).
static_assert(sizeof(Args<float>) + sizeof(Taps3x3) <= 32764 && sizeof(Args<std::uint16_t>) + sizeof(Taps3x3) <= 32764,
              "kMaxFilter2DTaps' taps must fit the staged kernels' parameters");

template <class T, int C, int R>
__global__ void staged3x3(const __grid_constant__ Args<T> a, const __grid_constant__ Taps3x3 k) {
    extern __shared__ float4 shared4[];
    float* stage = reinterpret_cast<float*>(shared4);
    const int tw = blockDim.x, th = blockDim.y * R, pitch = (tw + 2) * C;
    const int x0 = blockIdx.x * tw, y0 = blockIdx.y * th;
    stage_tile<T, C>(a.src, stage, x0, y0, tw, th, 3, 3);
    __syncthreads();
    const int x = x0 + threadIdx.x, y = y0 + threadIdx.y * R;
    if (x >= a.dst.width || y >= a.dst.height) return;
    const float* base = stage + threadIdx.y * R * pitch + threadIdx.x * C;
    T* out = a.dst.template row<T>(y) + x * C;
#pragma unroll
    for (int c = 0; c < C; ++c) {
        float v[R + 2][3];
#pragma unroll
        for (int r = 0; r < R + 2; ++r)
#pragma unroll
            for (int i = 0; i < 3; ++i) v[r][i] = base[r * pitch + i * C + c];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            float sum = 0.f;
#pragma unroll
            for (int t = 0; t < 9; ++t) sum = add_rn(sum, mul_rn(k.w[t], v[r + t / 3][t % 3]));
            if (y + r < a.dst.height)
                reinterpret_cast<T*>(reinterpret_cast<std::byte*>(out) + r * a.dst.stride)[c] = saturate_round<T>(sum);
        }
    }
}

template <class T, int C, int R>
bool launch(const TileSchedule& schedule, const Filter2DOp<T>& op, cudaStream_t stream) {
    const int tw = schedule.tile_width, th = schedule.tile_height;
    const int kw = op.k.width, kh = op.k.height, pitch = (tw + kw - 1) * C;
    std::size_t bytes = static_cast<std::size_t>(pitch) * (th + kh - 1) * sizeof(float);
    const unsigned gx = (op.dst.width + tw - 1) / tw, gy = (op.dst.height + th - 1) / th;
    if (gy > 65535) return false;
    constexpr auto kernel = staged<T, C, R>;
    if (op.k.nonzero() > kMaxFilter2DTaps) return false;  // more than the parameters hold
    Args<T> a{op.src, op.dst, kw, kh, {}};
    a.taps.count = 0;
    for (int j = 0; j < kh; ++j)
        for (int i = 0; i < kw; ++i)
            if (const float w = op.k.w[j * kw + i]; w != 0.f) {
                a.taps.w[a.taps.count] = w;
                a.taps.off[a.taps.count++] = j * pitch + i * C;
            }
    bytes += static_cast<std::size_t>(a.taps.count) * (sizeof(float) + sizeof(int));
    // The default tiles on 8- and 16-bit images (float ones gained nothing from it: each tap also needs a select).
    constexpr bool kHas3x3 = R == 8 && !std::is_same_v<T, float>;
    const bool three = kHas3x3 && kw == 3 && kh == 3;
    if (bytes > 48 * 1024) {  // above the default the kernel that launches opts in, up to the device's limit
        const int device = current_device();
        if (bytes > static_cast<std::size_t>(shared_memory_limit(device))) return false;
        if constexpr (kHas3x3)
            if (three) allow_shared_memory<staged3x3<T, C, R>>(device);
        if (!three) allow_shared_memory<kernel>(device);
    }
    if constexpr (kHas3x3)
        if (three) {
            Taps3x3 k{};
            for (int t = 0; t < 9; ++t) k.w[t] = op.k.w[t];
            staged3x3<T, C, R><<<dim3(gx, gy), dim3(tw, th / R), bytes, stream>>>(a, k);
        }
    if (!three) kernel<<<dim3(gx, gy), dim3(tw, th / R), bytes, stream>>>(a);
    CBI_CUDA_CHECK(cudaGetLastError(), "launch filter2d");
    note_kernel_path(KernelPath::cuda_staged_window);
    return true;
}

template <class T, int R>
bool launch_rows(const TileSchedule& schedule, const Filter2DOp<T>& op, cudaStream_t stream) {
    switch (op.dst.channels) {
        case 1: return launch<T, 1, R>(schedule, op, stream);
        case 3: return launch<T, 3, R>(schedule, op, stream);
        case 4: return launch<T, 4, R>(schedule, op, stream);
        default: return false;
    }
}

}  // namespace filter2d

// The op with its taps in device memory, for the per-pixel kernel: copied
// on `stream` (from pageable memory: the call returns once they are staged)
// and freed in stream order after the launches before the destructor.
template <class T>
struct DeviceTaps {
    Filter2DOp<T> op;
    cudaStream_t stream;
    float* taps = nullptr;
    DeviceTaps(const Filter2DOp<T>& host, cudaStream_t s) : op(host), stream(s) {
        const std::size_t bytes = sizeof(float) * host.k.width * host.k.height;
        CBI_CUDA_CHECK(cudaMallocAsync(&taps, bytes, stream), "cudaMallocAsync of filter2d's taps");
        CBI_CUDA_CHECK(cudaMemcpyAsync(taps, host.k.w, bytes, cudaMemcpyHostToDevice, stream),
                       "copy filter2d's taps to the device");
        op.k.w = taps;
    }
    DeviceTaps(const DeviceTaps&) = delete;
    DeviceTaps& operator=(const DeviceTaps&) = delete;
    ~DeviceTaps() { cudaFreeAsync(taps, stream); }
};

// False where the schedule is not a plain tile of the block or of four
// blocks' threads (zigzag rows, columns, other sizes), a tile larger than
// the image, or the stage would not fit: the per-pixel kernel runs it.
template <class T>
bool filter2d_pass(const TileSchedule& schedule, const Filter2DOp<T>& op, int block, cudaStream_t stream) {
    const int tw = schedule.tile_width, th = schedule.tile_height;
    if (op.dst.empty() || schedule.zigzag || th <= 0 || tw <= 0 || block % 32 != 0 || tw > op.dst.width ||
        th > op.dst.height)
        return false;
    if (tw * th == block) return filter2d::launch_rows<T, 1>(schedule, op, stream);
    if (tw * th == 4 * block && th % 4 == 0) return filter2d::launch_rows<T, 4>(schedule, op, stream);
    if (tw * th == 8 * block && th % 8 == 0) return filter2d::launch_rows<T, 8>(schedule, op, stream);
    return false;
}

}  // namespace cbi::cuda
