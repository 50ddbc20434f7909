#pragma once
// filter2d on CUDA's tile:WxH schedules: a block of W x H threads computes
// its tile (the schedule's own map), after staging the tile's source
// samples with their halo in shared memory as floats, the border resolved
// there, and listing the kernel's nonzero taps. The per-pixel kernel
// resolved the border, converted the sample and tested the tap at every
// tap of every output. Each output sums the nonzero taps in Filter2DOp's
// order with the same roundings: the results are bit-identical.
#include <cuda_runtime.h>

#include "filters/cuda/check.hpp"
#include "filters/kernel_path.hpp"
#include "filters/kinds/filter2d.hpp"
#include "schedules/schedule.hpp"

namespace cbi::cuda {

namespace filter2d {

// What a block may take (the default shared-memory limit per block): the
// nonzero taps with their offsets in the stage, and the stage.
inline constexpr int kMaxSharedBytes = 48 * 1024;

template <class T>
__global__ void staged(const __grid_constant__ Filter2DOp<T> op) {
    extern __shared__ float shared[];
    const int channels = op.dst.channels, kw = op.k.width, kh = op.k.height, taps = kw * kh;
    const int sw = blockDim.x + kw - 1, sh = blockDim.y + kh - 1;  // stage in pixels
    const int samples = sw * channels;
    float* weights = shared;                               // the nonzero taps, row-major
    int* offsets = reinterpret_cast<int*>(shared + taps);  // their samples in the stage
    float* stage = shared + 2 * taps;
    __shared__ int nonzero;
    const int x0 = blockIdx.x * blockDim.x, y0 = blockIdx.y * blockDim.y;
    const int left = x0 - kw / 2, top = y0 - kh / 2;
    // The first warp lists the nonzero taps in row-major order: the sums
    // below add them in Filter2DOp's order without a test per tap.
    const int tid = threadIdx.y * blockDim.x + threadIdx.x;  // blocks of whole warps (filter2d_pass)
    if (tid < 32) {
        const unsigned lane = tid, below = (1u << lane) - 1;
        int count = 0;
        for (int first = 0; first < taps; first += 32) {
            const int t = first + static_cast<int>(lane);
            const bool used = t < taps && op.k.w[t] != 0.f;
            const unsigned ballot = __ballot_sync(0xffffffffu, used);
            if (used) {
                const int at = count + __popc(ballot & below);
                weights[at] = op.k.w[t];
                offsets[at] = (t / kw) * samples + (t % kw) * channels;
            }
            count += __popc(ballot);
        }
        if (tid == 0) nonzero = count;
    }
    // The stage: a row's samples are contiguous where the row and the
    // block's columns lie inside the image; elsewhere the border resolves them.
    const bool inside_x = left >= 0 && left + sw <= op.src.view.width;
    for (int r = threadIdx.y; r < sh; r += blockDim.y) {
        const T* row = op.src.row(top + r);
        float* out = stage + r * samples;
        if (inside_x && row != nullptr) {
            const T* first = row + left * channels;
            for (int s = threadIdx.x; s < samples; s += blockDim.x) out[s] = to_float(first[s]);
        } else {
            for (int s = threadIdx.x; s < samples; s += blockDim.x) {
                const int p = s / channels, c = s - p * channels;
                out[s] = to_float(op.src.at(row, left + p, c));
            }
        }
    }
    __syncthreads();
    const int x = x0 + threadIdx.x, y = y0 + threadIdx.y;
    if (x >= op.dst.width || y >= op.dst.height) return;
    T* out = op.dst.template row<T>(y) + x * channels;
    const float* base = stage + threadIdx.y * samples + threadIdx.x * channels;
    const int n = nonzero;
    for (int c = 0; c < channels; ++c) {
        float sum = 0.f;
#pragma unroll 4
        for (int t = 0; t < n; ++t) sum = add_rn(sum, mul_rn(weights[t], base[offsets[t] + c]));
        out[c] = saturate_round<T>(sum);
    }
}

}  // namespace filter2d

// False where the schedule is not a plain tile of one block (zigzag rows,
// columns, a tile other than the block) or the stage would not fit: the
// per-pixel kernel runs it.
template <class T>
bool filter2d_pass(const TileSchedule& schedule, const Filter2DOp<T>& op, int block, cudaStream_t stream) {
    const int tw = schedule.tile_width, th = schedule.tile_height;
    if (op.dst.empty() || schedule.zigzag || th <= 0 || tw <= 0 || tw * th != block || block % 32 != 0 ||
        tw > op.dst.width || th > op.dst.height)
        return false;
    const std::size_t bytes =
        (static_cast<std::size_t>(tw + op.k.width - 1) * (th + op.k.height - 1) * op.dst.channels +
         2 * static_cast<std::size_t>(op.k.width) * op.k.height) *
        sizeof(float);
    const unsigned gx = (op.dst.width + tw - 1) / tw, gy = (op.dst.height + th - 1) / th;
    // The limit counts the kernel's static shared int too.
    if (bytes + sizeof(int) > static_cast<std::size_t>(filter2d::kMaxSharedBytes) || gy > 65535) return false;
    filter2d::staged<T><<<dim3(gx, gy), dim3(tw, th), bytes, stream>>>(op);
    CBI_CUDA_CHECK(cudaGetLastError(), "launch filter2d");
    note_kernel_path(KernelPath::cuda_staged_window);
    return true;
}

}  // namespace cbi::cuda
