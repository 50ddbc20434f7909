#pragma once
// The bilateral filter on CUDA's naive schedule: each block copies the
// node's weight tables into shared memory, then a thread computes a pixel of
// its 32 x 8 tile. The per-pixel kernel reads them from the kernel
// parameter, where threads indexing different colour distances take turns.
#include <cuda_runtime.h>

#include "filters/cuda/check.hpp"
#include "filters/kernel_path.hpp"
#include "filters/kinds/bilateral.hpp"

namespace cbi::cuda {

namespace bilateral {

template <class T>
__global__ void staged(const __grid_constant__ BilateralOp<T> op) {
    __shared__ float colors[kBilateralColorTable], spaces[kBilateralSpaceTable];
    const int t = threadIdx.y * blockDim.x + threadIdx.x, threads = blockDim.x * blockDim.y;
    if constexpr (std::is_same_v<T, std::uint8_t>)
        for (int i = t; i < kBilateralColorTable; i += threads) colors[i] = op.color_weight[i];
    for (int i = t; i < kBilateralSpaceTable; i += threads) spaces[i] = op.space_weight[i];
    __syncthreads();
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < op.dst.width && y < op.dst.height) op.at(x, y, colors, spaces);
}

}  // namespace bilateral

template <class T>
bool bilateral_pass(const BilateralOp<T>& op, cudaStream_t stream) {
    if (op.dst.empty() || (op.dst.height + 7) / 8 > 65535) return false;
    const dim3 block(32, 8), grid((op.dst.width + 31) / 32, (op.dst.height + 7) / 8);
    bilateral::staged<T><<<grid, block, 0, stream>>>(op);
    CBI_CUDA_CHECK(cudaGetLastError(), "launch bilateral");
    note_kernel_path(KernelPath::cuda_staged_window);
    return true;
}

}  // namespace cbi::cuda
