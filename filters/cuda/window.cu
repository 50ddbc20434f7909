// Window kinds on CUDA (dispatch_window): the kind's op, one thread per
// pixel through the schedule's map; on the naive schedule morphology passes
// run their own kernels (cuda/morph.cuh), on a tile schedule filter2d stages
// its blocks' tiles (cuda/filter2d.cuh). A translation unit of its own, so
// adding a window kind does not rebuild the stencil kernels.
#include <stdexcept>

#include "filters/cuda/backend.hpp"
#include "filters/cuda/bilateral.cuh"
#include "filters/cuda/filter2d.cuh"
#include "filters/cuda/launch.cuh"
#include "filters/cuda/median.cuh"
#include "filters/cuda/morph.cuh"
#include "filters/dispatch.hpp"

namespace cbi {
namespace {

struct WindowLaunch {
    int width, height;
    cudaStream_t stream;
    int block;

    template <class Schedule, class Op>
    void operator()(Schedule schedule, const Op& op) const {
        // CPU-only ops (the one-pass gradient): CUDA's expansion never makes them; no kernels for them.
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

}  // namespace

void run_window_cuda(const FilterRun& node, const ImageView& src, const ImageView& dst, cudaStream_t stream,
                     int block) {
    try {
        dispatch_window(node, src, dst, WindowLaunch{dst.width, dst.height, stream, block});
    } catch (const DeviceLost& e) {
        throw DeviceLost(to_string(node.filter) + "@" + node.schedule.to_string(), e.what());
    } catch (const Error& e) {
        throw Error(to_string(node.filter) + "@" + node.schedule.to_string(), e.what());
    }
}

}  // namespace cbi
