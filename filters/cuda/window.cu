// Window kinds on CUDA (dispatch_window): the kind's op, one thread per
// pixel through the schedule's map; on the naive schedule morphology passes
// run their own kernels (cuda/morph.cuh), on a tile schedule filter2d stages
// its blocks' tiles (cuda/filter2d.cuh), and a median may read through a
// fused colour node (cuda/median.cuh: median:5). A translation unit of its own, so
// adding a window kind does not rebuild the stencil kernels.
#include <cstddef>
#include <stdexcept>
#include <type_traits>
#include <variant>

#include "filters/cuda/backend.hpp"
#include "filters/cuda/bilateral.cuh"
#include "filters/cuda/check.hpp"
#include "filters/cuda/filter2d.cuh"
#include "filters/cuda/launch.cuh"
#include "filters/cuda/median.cuh"
#include "filters/cuda/morph.cuh"
#include "filters/dispatch.hpp"
#include "filters/kinds/color.hpp"

namespace cbi {
namespace {

struct WindowLaunch {
    int width, height;
    cudaStream_t stream;
    int block;

    template <class Schedule, class Op>
    void operator()(Schedule schedule, const Op& op) const {
        // CPU-only ops (MorphPairOp): CUDA's expansion never makes them; no kernels for them.
        if constexpr (requires { Op::kCpuOnly; })
            throw std::logic_error("a CPU-only window op on CUDA");
        else
            launch(schedule, op);
    }
    template <class Schedule, class Op>
    void launch(Schedule schedule, const Op& op) const {
        // The naive schedule runs an op's own row form where it has one (as on the CPU).
        if constexpr (std::is_same_v<Schedule, NaiveSchedule> && requires { cuda::morphology_pass(op, stream); })
            if (cuda::morphology_pass(op, stream)) return;
        if constexpr (std::is_same_v<Schedule, NaiveSchedule> &&
                      requires { cuda::morphology_gradient_pass(op, stream); })
            if (cuda::morphology_gradient_pass(op, stream)) return;
        if constexpr (std::is_same_v<Schedule, NaiveSchedule> && requires { cuda::median_pass(op, stream); })
            if (cuda::median_pass(op, stream)) return;
        if constexpr (std::is_same_v<Schedule, NaiveSchedule> && requires { cuda::bilateral_pass(op, stream); })
            if (cuda::bilateral_pass(op, stream)) return;
        if constexpr (std::is_same_v<Schedule, TileSchedule> &&
                      requires { cuda::filter2d_pass(schedule, op, block, stream); })
            if (cuda::filter2d_pass(schedule, op, block, stream)) return;
        if constexpr (requires { cuda::DeviceTaps(op, stream); }) {
            const cuda::DeviceTaps taps(op, stream);  // the op's taps are in host memory
            cuda::launch_per_pixel(schedule, taps.op, width, height, stream, block, "window kernel");
        } else {
            cuda::launch_per_pixel(schedule, op, width, height, stream, block, "window kernel");
        }
    }
};

// A median reading through a fused colour node (the executor fused it where
// cuda_window_takes_colour): src is the colour node's input. The word kernel
// converts as it stages; where it cannot run (a view off whole words), the
// two nodes run, the colour image in stream-ordered scratch.
void run_median_through_colour(const FilterRun& node, const ImageView& src, const ImageView& dst, cudaStream_t stream,
                               int block) {
    const auto* median = std::get_if<MedianFilter>(&node.filter);
    if (median == nullptr) throw std::logic_error("on CUDA only a median reads through a colour node");
    if (dst.empty()) return;
    const ColorFilter& colour = *node.fused_color;
    const ImageView colored{nullptr,   src.width, src.height, output_channels(Filter(colour), src.channels),
                            src.depth, 0};
    with_depth(src.depth, [&](auto sample) {
        using T = std::remove_cvref_t<decltype(sample)>;
        const MedianOp<T> op = FilterKind<MedianFilter>::template op<T>(*median, colored, node.border, dst);
        const AnyBorderColorSource<T> through{
            {colored, src, storage_matrix(colour, src.depth, src.channels), op.src.constant}, op.src.mode};
        if (cuda::median_coloured_pass(op, through, stream)) return;
        void* scratch = nullptr;
        CBI_CUDA_CHECK(cudaMallocAsync(&scratch, colored.row_bytes() * colored.height, stream),
                       "cudaMallocAsync of a colour image");
        ImageView stored = colored;
        stored.data = static_cast<std::byte*>(scratch);
        stored.stride = colored.row_bytes();
        run_node_cuda(FilterRun{Filter(colour), Border{}, ScheduleSpec{}}, src, stored, stream, block);
        FilterRun plain = node;
        plain.fused_color.reset();
        run_window_cuda(plain, stored, dst, stream, block);
        CBI_CUDA_CHECK(cudaFreeAsync(scratch, stream), "cudaFreeAsync of a colour image");
    });
}

}  // namespace

bool cuda_window_takes_colour(const FilterRun& node, int channels) {
    const auto* median = std::get_if<MedianFilter>(&node.filter);
    return median != nullptr && node.schedule.family == ScheduleFamily::naive && !node.then &&
           cuda::median_takes_colour(median->ksize, channels);
}

void run_window_cuda(const FilterRun& node, const ImageView& src, const ImageView& dst, cudaStream_t stream,
                     int block) {
    try {
        if (node.fused_color) return run_median_through_colour(node, src, dst, stream, block);
        dispatch_window(node, src, dst, WindowLaunch{dst.width, dst.height, stream, block});
    } catch (const DeviceLost& e) {
        throw DeviceLost(to_string(node.filter) + "@" + node.schedule.to_string(), e.what());
    } catch (const Error& e) {
        throw Error(to_string(node.filter) + "@" + node.schedule.to_string(), e.what());
    }
}

}  // namespace cbi
