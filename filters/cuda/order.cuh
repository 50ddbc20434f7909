#pragma once
// Tile strategies' traversal orders on the GPU (TileOrder,
// schedules/schedule.hpp): which tile or strip a block computes.
//
// Row-major (no +ORDER) keeps each launcher's own grid: block (bx, by)
// computes tile (bx, by), looping down the tile rows where the grid's y is
// capped. In an order the blocks are counted linearly, b = blockIdx.y *
// gridDim.x + blockIdx.x, the order in which the hardware hands them out,
// and block b computes the tile order.map(b, tiles_x, tiles_y): a bijection
// over the tiles, so every tile is computed exactly once. The row-major
// path pays one uniform branch per block.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "schedules/schedule.hpp"

namespace cbi::cuda {

// A grid of `blocks` blocks counted linearly (x up to 2^31 - 1, then y);
// blocks past `blocks` exit at once.
inline dim3 ordered_grid(std::uint64_t blocks) {
    const std::uint64_t x = std::clamp<std::uint64_t>(blocks, 1, 0x7fffffffu);
    return dim3(static_cast<unsigned>(x), static_cast<unsigned>((blocks + x - 1) / x));
}

// The block's linear index in its grid.
__device__ __forceinline__ std::uint64_t linear_block() {
    return static_cast<std::uint64_t>(blockIdx.y) * gridDim.x + blockIdx.x;
}

// The tile of a block whose grid is exactly the tiles_x x tiles_y tiles
// (smem:WxH, fused stencil pairs).
__device__ __forceinline__ Pixel grid_tile(const TileOrder& order) {
    if (order.row_major()) return {static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y)};
    return order.map(blockIdx.y * gridDim.x + blockIdx.x, static_cast<int>(gridDim.x), static_cast<int>(gridDim.y));
}

}  // namespace cbi::cuda
