#include "apps/bench/stencil.hpp"

#include <cstdint>
#include <stdexcept>

#include "pipeline/cuda_runtime.hpp"

namespace cbi::bench {
namespace {

template <class Schedule>
__global__ void thesis_box9(Schedule schedule, const float* __restrict__ in, float* __restrict__ out, int w, int h) {
    const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= static_cast<std::uint32_t>(w) * static_cast<std::uint32_t>(h)) return;
    const Pixel p = schedule.map(i, w, h);
    float sum = 0.f;
#pragma unroll
    for (int j = -4; j <= 4; ++j) {
        const int yy = min(max(p.y + j, 0), h - 1);
        const float* row = in + static_cast<std::size_t>(yy) * w;
#pragma unroll
        for (int dx = -4; dx <= 4; ++dx) sum += row[min(max(p.x + dx, 0), w - 1)];
    }
    out[static_cast<std::size_t>(p.y) * w + p.x] = sum * (1.f / 81.f);
}

}  // namespace

void run_thesis_box9(const ScheduleSpec& spec, const float* in, float* out, int w, int h, int block,
                     cudaStream_t stream) {
    if (block < 1 || block > 1024) throw std::invalid_argument("--block must be from 1 to 1024");
    const std::uint64_t n = static_cast<std::uint64_t>(w) * h;
    const auto blocks = static_cast<unsigned>((n + block - 1) / block);
    with_schedule(spec, [&](auto schedule) { thesis_box9<<<blocks, block, 0, stream>>>(schedule, in, out, w, h); });
    CBI_CUDA_CHECK(cudaGetLastError(), "launch thesis box9 @" + spec.to_string());
}

}  // namespace cbi::bench
