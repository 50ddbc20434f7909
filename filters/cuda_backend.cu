#include "filters/cuda_backend.hpp"

#include <algorithm>
#include <string>

#include "filters/dispatch.hpp"
#include "pipeline/cuda_runtime.hpp"
#include "pipeline/error.hpp"

namespace cbi {
namespace {

// Thesis listing 5 generalised: the global thread index goes through the
// node's schedule to find the pixel; the op computes it.
template <class Schedule, class Op>
__global__ void apply_schedule(Schedule schedule, Op op, std::uint32_t n, int width, int height) {
    const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const Pixel p = schedule.map(i, width, height);
    op(p.x, p.y);
}

// Ops that expose separable passes (blur, gaussian, sobel).
template <class Op>
concept SeparableOp = requires(const Op& op) { op.passes(); op.finish(nullptr); };

// The smem:WxH schedule: block (bx, by) computes the tile_w x tile_h output
// tile at (bx*tile_w, by*tile_h). Per channel it stages the tile plus a
// halo of border-resolved samples in shared memory (consecutive threads
// read consecutive samples), computes each pass's row sums for every staged
// row into shared memory, then combines them down the columns. Sums use
// weighted_sum in the same order as the per-pixel path: bit-identical.
template <class Op>
__global__ void smem_stencil(Op op, int tile_w, int tile_h, int halo) {
    using T = typename Op::Sample;
    using Acc = typename Op::Acc;
    extern __shared__ __align__(16) unsigned char smem[];
    const int stage_w = tile_w + 2 * halo, stage_h = tile_h + 2 * halo;
    T* stage = reinterpret_cast<T*>(smem);
    Acc* rows = reinterpret_cast<Acc*>(smem + (stage_w * stage_h * sizeof(T) + 15) / 16 * 16);
    const int x0 = blockIdx.x * tile_w, y0 = blockIdx.y * tile_h;
    const int width = op.dst.width, height = op.dst.height, channels = op.src.view.channels;
    const int passes = op.passes();
    for (int c = 0; c < channels; ++c) {
        for (int k = threadIdx.x; k < stage_w * stage_h; k += blockDim.x) {
            const int sy = k / stage_w, sx = k - sy * stage_w;
            stage[k] = op.src.at(op.src.row(y0 - halo + sy), x0 - halo + sx, c);
        }
        __syncthreads();
        for (int p = 0; p < passes; ++p) {
            const int kw = op.kw(p);
            const auto* wx = op.wx(p);
            for (int k = threadIdx.x; k < stage_h * tile_w; k += blockDim.x) {
                const int r = k / tile_w, x = k - r * tile_w;
                const T* line = stage + r * stage_w + x + halo - kw / 2;
                rows[(p * stage_h + r) * tile_w + x] =
                    weighted_sum<Acc>(wx, kw, [&](int i) { return static_cast<Acc>(line[i]); });
            }
        }
        __syncthreads();
        for (int k = threadIdx.x; k < tile_w * tile_h; k += blockDim.x) {
            const int ty = k / tile_w, tx = k - ty * tile_w;
            const int x = x0 + tx, y = y0 + ty;
            if (x >= width || y >= height) continue;
            Acc sums[Op::kMaxPasses] = {};
            for (int p = 0; p < passes; ++p) {
                const int kh = op.kh(p);
                const Acc* column = rows + (p * stage_h + ty + halo - kh / 2) * tile_w + tx;
                sums[p] = weighted_sum<Acc>(op.wy(p), kh, [&](int j) { return column[j * tile_w]; });
            }
            op.dst.template row<T>(y)[x * channels + c] = op.finish(sums);
        }
        __syncthreads();  // the next channel reuses the stage
    }
}

template <class Op>
void launch_smem(const SmemTileSchedule& tile, const Op& op, cudaStream_t stream, int block) {
    using T = typename Op::Sample;
    using Acc = typename Op::Acc;
    int halo = 0;
    for (int p = 0; p < op.passes(); ++p) halo = std::max({halo, op.kw(p) / 2, op.kh(p) / 2});
    const int tw = tile.tile_width, th = tile.tile_height;
    const std::size_t stage_w = tw + 2 * halo, stage_h = th + 2 * halo;
    const std::size_t bytes = (stage_w * stage_h * sizeof(T) + 15) / 16 * 16 + op.passes() * stage_h * tw * sizeof(Acc);
    int device = 0, limit = 0;
    CBI_CUDA_CHECK(cudaGetDevice(&device), "cudaGetDevice");
    CBI_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "cudaDeviceGetAttribute");
    if (bytes > static_cast<std::size_t>(limit))
        throw std::invalid_argument("smem:" + std::to_string(tw) + "x" + std::to_string(th) + ": the tile plus its halo of " +
                                    std::to_string(halo) + " needs " + std::to_string(bytes / 1024) +
                                    " KiB of shared memory, more than this GPU's " + std::to_string(limit / 1024) +
                                    " KiB; use a smaller tile");
    if (bytes > 48 * 1024)
        CBI_CUDA_CHECK(cudaFuncSetAttribute(smem_stencil<Op>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(bytes)),
                       "cudaFuncSetAttribute(smem)");
    const dim3 grid((op.dst.width + tw - 1) / tw, (op.dst.height + th - 1) / th);
    smem_stencil<<<grid, block, bytes, stream>>>(op, tw, th, halo);
}

struct CudaLaunch {
    int width, height;
    cudaStream_t stream;
    int block;
    const char* what;  // for error messages

    template <class Schedule, class Op>
    void operator()(Schedule schedule, const Op& op) const {
        if constexpr (std::is_same_v<Schedule, SmemTileSchedule> && SeparableOp<Op>) {
            launch_smem(schedule, op, stream, block);
            CBI_CUDA_CHECK(cudaGetLastError(), std::string("launch ") + what + " (smem)");
            return;
        }
        const auto n = static_cast<std::uint32_t>(width) * static_cast<std::uint32_t>(height);
        const std::uint64_t blocks = (static_cast<std::uint64_t>(n) + block - 1) / block;
        if (blocks > 0x7fffffffull) throw Error("launch", "image too large for --block " + std::to_string(block));
        apply_schedule<<<static_cast<unsigned>(blocks), block, 0, stream>>>(schedule, op, n, width, height);
        CBI_CUDA_CHECK(cudaGetLastError(), std::string("launch ") + what);
    }
};

void check_block(int block) {
    if (block < 1 || block > 1024) throw std::invalid_argument("--block must be from 1 to 1024");
}

}  // namespace

void run_node_cuda(const Node& node, const ImageView& src, const ImageView& dst, cudaStream_t stream, int block) {
    check_block(block);
    try {
        dispatch_node(node, src, dst, CudaLaunch{dst.width, dst.height, stream, block, "filter kernel"});
    } catch (const Error& e) {  // name the node; built only on this error path
        throw Error(to_string(node.filter) + "@" + node.schedule.to_string(), e.what());
    }
}

void run_blend_cuda(const BlendFilter& blend, const ScheduleSpec& schedule, const ImageView& a, const ImageView& b,
                    const ImageView& dst, cudaStream_t stream, int block) {
    check_block(block);
    dispatch_blend(blend, schedule, a, b, dst, CudaLaunch{dst.width, dst.height, stream, block, "blend kernel"});
}

}  // namespace cbi
