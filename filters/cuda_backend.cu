#include "filters/cuda_backend.hpp"

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

struct CudaLaunch {
    int width, height;
    cudaStream_t stream;
    int block;
    const char* what;  // for error messages

    template <class Schedule, class Op>
    void operator()(Schedule schedule, const Op& op) const {
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
