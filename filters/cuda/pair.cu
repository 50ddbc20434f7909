// The CUDA side of fused stencil pairs. On smem:WxH and sep:WxH
// (filters/pair_tiles.hpp): one block per tile, the tile buffer in shared
// memory; blocks take tiles in the node's TileOrder (cuda/order.cuh). On
// stream:WxH: strips walked through line buffers (cuda/pair_strip.cuh).
#include "filters/cuda/backend.hpp"
#include "filters/kernel_path.hpp"

#include <string>

#include "filters/cuda/check.hpp"
#include "filters/cuda/launch.cuh"
#include "filters/cuda/order.cuh"
#include "filters/cuda/pair_strip.cuh"
#include "filters/error.hpp"
#include "filters/pair_tiles.hpp"

namespace cbi {
namespace {

// A block's threads: warps across a row's samples, rows across warps.
struct BlockTeam {
    int tx, ty, nx, ny;
    __device__ void sync() const { __syncthreads(); }
};

template <class Pre, class Op>
__global__ void chain_stencil(const __grid_constant__ Pre pre, const __grid_constant__ Op op, const ChainLayout L,
                              const TileOrder order) {
    extern __shared__ __align__(16) unsigned char smem[];
    const BlockTeam team{static_cast<int>(threadIdx.x), static_cast<int>(threadIdx.y), static_cast<int>(blockDim.x),
                         static_cast<int>(blockDim.y)};
    const Pixel tile = cuda::grid_tile(order);
    chain_tile(pre, op, L, smem, tile.x, tile.y, team);
}

template <class Pre, class Op>
void launch_chain(int tile_w, int tile_h, const TileOrder& order, const Pre& pre, const Op& op, cudaStream_t stream,
                  int block) {
    if (op.dst.empty()) return;
    const ChainLayout L = chain_layout(tile_w, tile_h, pre, op);
    const int device = cuda::current_device();
    cuda::require_shared_memory(L.bytes, device, "fused stencils", "use a smaller tile or --no-fuse");
    if (L.bytes > 48 * 1024) cuda::allow_shared_memory<chain_stencil<Pre, Op>>(device);
    const dim3 threads = block % 32 == 0 ? dim3(32, block / 32) : dim3(block, 1);
    const dim3 grid((op.dst.width + tile_w - 1) / tile_w, (op.dst.height + tile_h - 1) / tile_h);
    if (grid.y > 65535) throw Unsupported("fused stencils", "more than 65535 rows of tiles; use a taller tile");
    chain_stencil<<<grid, threads, L.bytes, stream>>>(pre, op, L, order);
    CBI_CUDA_CHECK(cudaGetLastError(), "launch fused stencils");
}

}  // namespace

void run_chain_cuda(const FilterRun& node, const ImageView& src, const ImageView& dst, cudaStream_t stream, int block) {
    if (node.schedule.family == ScheduleFamily::stream) {
        note_kernel_path(KernelPath::cuda_chain_stream);
        const StreamSchedule strip = stream_schedule(node.schedule.width, node.schedule.height);
        with_chain_ops(node, src, dst, [&](const auto& pre, const auto& op) {
            if (!cuda::chain_stream_takes(pre, op)) throw std::logic_error("stream:WxH cannot fuse this stencil pair");
            cuda::launch_chain_stream(strip, pre, op, stream, block, node.schedule.order);
        });
        CBI_CUDA_CHECK(cudaGetLastError(), "launch fused stencils");
        return;
    }
    const TileSchedule tile = chain_tile_size(node.schedule);
    note_kernel_path(KernelPath::cuda_chain);
    with_chain_ops(node, src, dst, [&](const auto& pre, const auto& op) {
        launch_chain(tile.tile_width, tile.tile_height, node.schedule.order, pre, op, stream, block);
    });
}

bool cuda_chain_fits(const FilterRun& node, Depth depth, int src_channels, int channels, int device) {
    if (node.schedule.family == ScheduleFamily::stream) {
        const ImageView src{nullptr, 1, 1, src_channels, depth, 0}, dst{nullptr, 1, 1, channels, depth, 0};
        bool takes = false;
        with_chain_ops(node, src, dst,
                       [&](const auto& pre, const auto& op) { takes = cuda::chain_stream_takes(pre, op); });
        return takes;
    }
    return chain_buffer_bytes(node, depth, channels) <= static_cast<std::size_t>(cuda::shared_memory_limit(device));
}

int cuda_chain_strip_height(const FilterRun& node, Depth depth, int src_channels, int channels, int width, int height,
                            int device, int block) {
    if (node.schedule.family != ScheduleFamily::stream) return 0;
    const ImageView src{nullptr, width, height, src_channels, depth, 0},
        dst{nullptr, width, height, channels, depth, 0};
    int h = 0;
    with_chain_ops(node, src, dst, [&](const auto& pre, const auto& op) {
        h = cuda::chain_stream_strip_height(node.schedule.width, pre, op, block, node.schedule.order, device);
    });
    return h;
}

}  // namespace cbi
