#pragma once
// filter2d on CUDA's tile:WxH schedules: a block computes its W x H tile
// after staging the tile's source samples with their halo in shared memory
// as floats, the border resolved there. The tile is the block's threads (one
// output each) or 4 or 8 times them (each thread 4 or 8 outputs down a
// column: tile:128x16 with blocks of 256, the default): a block holds that
// many more bytes in flight and reads each tap's weight once for all its
// sums. The nonzero taps, with their offsets in the stage, are listed once
// per launch on the host and copied to shared memory by each block; 3x3
// kernels on integer images have a kernel of their own (staged3x3), and
// those with taps n / 2^s on 8-bit images one in integers (staged3x3_int). The
// per-pixel kernel resolved the border, converted the sample and tested the
// tap at every tap of every output (it still runs what the staged kernels
// do not take: a stage and tap list over the shared memory, other
// schedules). Each output sums the taps in
// Filter2DOp's order with the same roundings: the results are bit-identical.
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

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
    // More nonzero taps than the parameters hold: taps.count of them here
    // (device memory, weights then offsets), taps' arrays unused.
    const float* device_taps;
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
    const float* w = a.device_taps ? a.device_taps : a.taps.w;
    const int* off = a.device_taps ? reinterpret_cast<const int*>(a.device_taps + n) : a.taps.off;
    for (int t = threadIdx.y * tw + threadIdx.x; t < n; t += tw * blockDim.y) {
        weights[t] = w[t];
        offsets[t] = off[t];
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

// A 3x3 kernel whose taps are n / 2^s with integers n in [-128, 127] and s
// in 0..7 (sharpen, Laplacian, emboss, dyadic smoothing) on an 8-bit image:
// every product and partial sum of Filter2DOp's float sum is then an
// integer times 2^-s below 2^24 in magnitude, exact in float, so its result
// is the exact sum rounded once. This kernel forms that sum in integers,
// a row of three taps per dp4a (four bytes times four signed bytes, added),
// and rounds it as saturate_round does: bit-identical, without staging or
// float conversions. A thread computes 4 consecutive samples (one
// 32-bit word of a row) on 2 rows; the block's tile:WxH is W samples wide.
struct Taps3x3Int {
    std::uint32_t row[3];  // kernel row j's n as signed bytes 0..2, byte 3 zero
    int shift;             // s
};

// Taps3x3Int for `w` (row-major), or false where a tap is not such an n / 2^s.
inline bool integer_taps(const float* w, Taps3x3Int& k) {
    for (int s = 0; s < 8; ++s) {
        bool fits = true;
        std::uint32_t row[3] = {};
        for (int t = 0; t < 9 && fits; ++t) {
            const float n = w[t] * static_cast<float>(1 << s);  // exact: a power of two
            fits = n == std::nearbyint(n) && n >= -128.f && n <= 127.f;
            row[t / 3] |= (static_cast<std::uint32_t>(static_cast<int>(n)) & 0xffu) << (8 * (t % 3));
        }
        if (fits) {
            k = {{row[0], row[1], row[2]}, s};
            return true;
        }
    }
    return false;
}

__device__ __forceinline__ int dot3(std::uint32_t samples, std::uint32_t taps, int acc) {
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(samples), "r"(taps), "r"(acc));
    return d;
}

// Bytes K - C, K, K + C of the 12 bytes l, m, r (byte K of m is the
// output's sample), in bytes 0..2.
template <int C, int K>
__device__ __forceinline__ std::uint32_t window(std::uint32_t l, std::uint32_t m, std::uint32_t r) {
    constexpr int a = K - C + 4, b = K + 4, c = K + C + 4;  // positions in l|m|r
    if constexpr (c < 8) {
        return __byte_perm(l, m, a | b << 4 | c << 8);
    } else if constexpr (a >= 4) {
        return __byte_perm(m, r, (a - 4) | (b - 4) << 4 | (c - 4) << 8);
    } else {  // a in l, c in r: l|m first, then r's byte
        const std::uint32_t lm = __byte_perm(l, m, a | (b < 8 ? b : 0) << 4);
        return __byte_perm(lm, r, 0 | (b < 8 ? 1 : b - 4) << 4 | (c - 4) << 8);
    }
}

// Four bytes of a row from byte x on, each through the border.
template <int C>
__device__ __forceinline__ std::uint32_t gather(const AnyBorderSource<std::uint8_t>& src, const std::uint8_t* row,
                                                int x) {
    std::uint32_t v = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int b = x + i, p = b >= 0 ? b / C : -((C - 1 - b) / C);
        v |= static_cast<std::uint32_t>(src.at(row, p, b - p * C)) << (8 * i);
    }
    return v;
}

__device__ __forceinline__ std::uint32_t rounded(int sum, int shift) {
    if (shift > 0) {  // to nearest, ties to even, as saturate_round
        const int q = sum >> shift, rem = sum - (q << shift), half = 1 << (shift - 1);
        sum = q + ((rem > half) | ((rem == half) & q));
    }
    return static_cast<std::uint32_t>(min(max(sum, 0), 255));
}

template <int C>
__global__ void staged3x3_int(const AnyBorderSource<std::uint8_t> src, const ImageView dst, const Taps3x3Int k) {
    constexpr int R = 2;
    const int x = (blockIdx.x * blockDim.x + threadIdx.x) * 4;  // the thread's first byte in its rows
    const int y0 = blockIdx.y * blockDim.y * R + threadIdx.y * R;
    const int bytes = dst.width * C;
    if (x >= bytes || y0 >= dst.height) return;
    // Each source row's words left of, at and right of the thread's: l, m, r.
    std::uint32_t l[R + 2], m[R + 2], r[R + 2];
    const bool inside = x >= 4 && x + 8 <= bytes;  // the row's own words
    if (inside && y0 >= 1 && y0 + R < src.view.height) {
        // Every row inside the image: all loads issued before any is used.
        const std::byte* first = reinterpret_cast<const std::byte*>(src.view.row<const std::uint8_t>(y0 - 1) + x);
#pragma unroll
        for (int s = 0; s < R + 2; ++s) {
            const auto* w = reinterpret_cast<const std::uint32_t*>(first + s * src.view.stride);
            l[s] = __ldg(w - 1);
            m[s] = __ldg(w);
            r[s] = __ldg(w + 1);
        }
    } else {
#pragma unroll
        for (int s = 0; s < R + 2; ++s) {
            const std::uint8_t* row = src.row(y0 - 1 + s);
            if (inside && row != nullptr) {
                const auto* w = reinterpret_cast<const std::uint32_t*>(row + x);
                l[s] = __ldg(w - 1);
                m[s] = __ldg(w);
                r[s] = __ldg(w + 1);
            } else {
                l[s] = gather<C>(src, row, x - 4);
                m[s] = gather<C>(src, row, x);
                r[s] = gather<C>(src, row, x + 4);
            }
        }
    }
    int sum[R][4] = {};
#pragma unroll
    for (int s = 0; s < R + 2; ++s) {  // source row y0 - 1 + s: kernel row s - o of output row o
        const std::uint32_t win[4] = {window<C, 0>(l[s], m[s], r[s]), window<C, 1>(l[s], m[s], r[s]),
                                      window<C, 2>(l[s], m[s], r[s]), window<C, 3>(l[s], m[s], r[s])};
#pragma unroll
        for (int j = 0; j < 3; ++j) {
            const int o = s - j;
            if (o < 0 || o >= R) continue;
#pragma unroll
            for (int q = 0; q < 4; ++q) sum[o][q] = dot3(win[q], k.row[j], sum[o][q]);
        }
    }
#pragma unroll
    for (int o = 0; o < R; ++o) {
        if (y0 + o >= dst.height) break;
        std::uint8_t* out = dst.template row<std::uint8_t>(y0 + o) + x;
        const std::uint32_t v0 = rounded(sum[o][0], k.shift), v1 = rounded(sum[o][1], k.shift),
                            v2 = rounded(sum[o][2], k.shift), v3 = rounded(sum[o][3], k.shift);
        if (x + 4 <= bytes) {
            *reinterpret_cast<std::uint32_t*>(out) = v0 | v1 << 8 | v2 << 16 | v3 << 24;
        } else {
            const std::uint32_t v[4] = {v0, v1, v2, v3};
            for (int q = 0; q < bytes - x; ++q) out[q] = static_cast<std::uint8_t>(v[q]);
        }
    }
}

// `size` floats of device memory for `stream`'s launches, filled from host
// memory with copy() (from pageable memory: each call returns once the
// bytes are staged) and freed in stream order after the launches before the
// destructor.
struct DeviceTapList {
    float* data = nullptr;
    cudaStream_t stream;
    DeviceTapList(std::size_t size, cudaStream_t s) : stream(s) {
        CBI_CUDA_CHECK(cudaMallocAsync(&data, size * sizeof(float), stream), "cudaMallocAsync of filter2d's taps");
    }
    template <class V>  // float or int: 4 bytes each
    void copy(std::size_t at, const V* host, std::size_t n) {
        static_assert(sizeof(V) == sizeof(float));
        CBI_CUDA_CHECK(cudaMemcpyAsync(data + at, host, n * sizeof(V), cudaMemcpyHostToDevice, stream),
                       "copy filter2d's taps to the device");
    }
    DeviceTapList(const DeviceTapList&) = delete;
    DeviceTapList& operator=(const DeviceTapList&) = delete;
    ~DeviceTapList() { cudaFreeAsync(data, stream); }
};

// staged3x3_int where it takes the op: integer taps (integer_taps), a tile
// of 4-sample words on pairs of rows, rows starting on 4-byte boundaries.
template <int C>
bool launch_integer3x3(const TileSchedule& schedule, const Filter2DOp<std::uint8_t>& op, cudaStream_t stream) {
    Taps3x3Int k{};
    const int tw = schedule.tile_width, th = schedule.tile_height;
    const auto aligned = [](const ImageView& v) {
        return reinterpret_cast<std::uintptr_t>(v.data) % 4 == 0 && v.stride % 4 == 0;
    };
    if (tw % 4 != 0 || th % 2 != 0 || !aligned(op.src.view) || !aligned(op.dst) || !integer_taps(op.k.w, k))
        return false;
    const unsigned gx = (op.dst.width * C + tw - 1) / tw, gy = (op.dst.height + th - 1) / th;
    if (gy > 65535) return false;
    staged3x3_int<C><<<dim3(gx, gy), dim3(tw / 4, th / 2), 0, stream>>>(op.src, op.dst, k);
    CBI_CUDA_CHECK(cudaGetLastError(), "launch filter2d");
    note_kernel_path(KernelPath::cuda_staged_window);
    return true;
}

template <class T, int C, int R>
bool launch(const TileSchedule& schedule, const Filter2DOp<T>& op, cudaStream_t stream) {
    const int tw = schedule.tile_width, th = schedule.tile_height;
    const int kw = op.k.width, kh = op.k.height, pitch = (tw + kw - 1) * C;
    std::size_t bytes = static_cast<std::size_t>(pitch) * (th + kh - 1) * sizeof(float);
    const unsigned gx = (op.dst.width + tw - 1) / tw, gy = (op.dst.height + th - 1) / th;
    if (gy > 65535) return false;
    constexpr auto kernel = staged<T, C, R>;
    Args<T> a{op.src, op.dst, kw, kh, {}, nullptr};
    const int count = op.k.nonzero();
    // Past the parameters' room the list goes to device memory: the weights, then the offsets.
    const bool far = count > kMaxFilter2DTaps;
    std::vector<float> far_weights(far ? count : 0);
    std::vector<int> far_offsets(far ? count : 0);
    float* weights = far ? far_weights.data() : a.taps.w;
    int* offsets = far ? far_offsets.data() : a.taps.off;
    a.taps.count = 0;
    for (int j = 0; j < kh; ++j)
        for (int i = 0; i < kw; ++i)
            if (const float w = op.k.w[j * kw + i]; w != 0.f) {
                weights[a.taps.count] = w;
                offsets[a.taps.count++] = j * pitch + i * C;
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
    if constexpr (std::is_same_v<T, std::uint8_t> && kHas3x3)
        if (three && launch_integer3x3<C>(schedule, op, stream)) return true;
    if constexpr (kHas3x3)
        if (three) {
            Taps3x3 k{};
            for (int t = 0; t < 9; ++t) k.w[t] = op.k.w[t];
            staged3x3<T, C, R><<<dim3(gx, gy), dim3(tw, th / R), bytes, stream>>>(a, k);
        }
    if (!three) {
        std::optional<DeviceTapList> device;
        if (far) {
            a.device_taps = device.emplace(count * 2, stream).data;
            device->copy(0, far_weights.data(), count);
            device->copy(count, far_offsets.data(), count);
        }
        kernel<<<dim3(gx, gy), dim3(tw, th / R), bytes, stream>>>(a);
    }
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

// The op with its taps in device memory, for the per-pixel kernel.
template <class T>
struct DeviceTaps {
    Filter2DOp<T> op;
    filter2d::DeviceTapList taps;
    DeviceTaps(const Filter2DOp<T>& host, cudaStream_t stream)
        : op(host), taps(static_cast<std::size_t>(host.k.width) * host.k.height, stream) {
        taps.copy(0, host.k.w, static_cast<std::size_t>(host.k.width) * host.k.height);
        op.k.w = taps.data;
    }
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
