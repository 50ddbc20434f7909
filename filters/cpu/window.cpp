// Window kinds on the CPU (dispatch_window): the kind's op per pixel, in the
// schedule's order, split across TBB tasks. A translation unit of its own,
// so adding a window kind does not rebuild the stencil kernels.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "filters/cpu/backend.hpp"
#include "filters/cpu/bilateral.hpp"
#include "filters/cpu/then.hpp"
#include "filters/dispatch.hpp"
#include "filters/kernel_path.hpp"

namespace cbi {
namespace {

// The type of an op's row scratch: Op::Scratch, else its samples.
template <class Op>
struct ScratchOf {
    using type = typename Op::Sample;
};
template <class Op>
requires requires {
    typename Op::Scratch;
}
struct ScratchOf<Op> {
    using type = typename Op::Scratch;
};

struct WindowLaunch {
    int width, height;
    const cpu::Then& then;  // applied to each task's rows as they are stored
    const StorageMatrix* colour = nullptr;  // a colour node fused into the op's loads (window_takes_colour_cpu)

    template <class Schedule, class Op>
    void operator()(Schedule schedule, const Op& op) const {
        if (colour) {
            if constexpr (std::is_same_v<Schedule, NaiveSchedule> && requires { op.with_colour(*colour); })
                return run(schedule, op.with_colour(*colour));
            else
                throw std::logic_error("this window op cannot read through a colour node");
        }
        run(schedule, op);
    }
    template <class Schedule, class Op>
    void run(Schedule schedule, const Op& op) const {
        if constexpr (std::is_same_v<Schedule, NaiveSchedule> && requires { op.scratch_samples(); }) {
            // Ops that compute whole rows (morphology, median): rows of a task at once,
            // at least row_grain() rows where the op asks (a window of many rows per task).
            note_kernel_path(KernelPath::cpu_rows);
            using T = typename ScratchOf<Op>::type;
            int grain = 8;
            if constexpr (requires { op.row_grain(); }) grain = op.row_grain();
            if constexpr (requires { op.halo_rows(); })  // rows each task computes beyond its own (MorphPairOp):
                grain = std::max(grain, std::min(8 * op.halo_rows(), height / tbb::this_task_arena::max_concurrency()));
            tbb::parallel_for(tbb::blocked_range<int>(0, height, grain), [&](const auto& rows) {
                std::vector<T> scratch(op.scratch_samples());
                op.rows(rows.begin(), rows.end(), scratch.data());
                then(0, width, rows.begin(), rows.end());
            });
        } else if constexpr (std::is_same_v<Schedule, NaiveSchedule> && requires { op.band(0, 0, width, nullptr); }) {
            // Ops with a band form (filter2d): each task its rows with its scratch. Bands of 8 to 16
            // rows: each pads the kernel's height - 1 source rows more than it outputs.
            note_kernel_path(KernelPath::cpu_rows);
            if constexpr (requires { op.whole(); })
                if (op.whole()) {  // a kernel the op hands to OpenCV whole
                    if (then)
                        tbb::parallel_for(tbb::blocked_range<int>(0, height, 16),
                                          [&](const auto& rows) { then(0, width, rows.begin(), rows.end()); });
                    return;
                }
            tbb::parallel_for(tbb::blocked_range<int>(0, height, 16), [&](const auto& rows) {
                std::vector<float> scratch(static_cast<std::size_t>(op.band_scratch(width)));
                op.band(rows.begin(), rows.end(), width, scratch.data());
                then(0, width, rows.begin(), rows.end());
            });
        } else if constexpr (std::is_same_v<Schedule, NaiveSchedule> && requires { cpu::bilateral_rows(op, 0, 0); }) {
            // The bilateral filter: its row form (cpu/bilateral.cpp) where it has one, else per pixel.
            note_kernel_path(KernelPath::cpu_rows);
            tbb::parallel_for(tbb::blocked_range<int>(0, height, 16), [&](const auto& rows) {
                if (!cpu::bilateral_rows(op, rows.begin(), rows.end()))
                    for (int y = rows.begin(); y != rows.end(); ++y)
                        for (int x = 0; x < width; ++x) op(x, y);
                then(0, width, rows.begin(), rows.end());
            });
        } else if constexpr (std::is_same_v<Schedule, NaiveSchedule>) {
            note_kernel_path(KernelPath::cpu_rows);
            // Window ops cost far more than a pixel's memory: small grains balance the tasks.
            tbb::parallel_for(tbb::blocked_range<int>(0, height, 1), [&](const auto& rows) {
                for (int y = rows.begin(); y != rows.end(); ++y)
                    for (int x = 0; x < width; ++x) op(x, y);
                then(0, width, rows.begin(), rows.end());
            });
        } else if constexpr (!requires { op(0, 0); }) {
            // Ops of whole rows only (MorphPairOp): the expansion gives index-map schedules their passes.
            throw std::logic_error("a window op without a per-pixel form on an index-map schedule");
        } else {
            note_kernel_path(KernelPath::cpu_index_map);
            const auto n = static_cast<std::uint32_t>(width) * static_cast<std::uint32_t>(height);
            tbb::parallel_for(tbb::blocked_range<std::uint32_t>(0, n, 1024), [&](const auto& range) {
                for (std::uint32_t i = range.begin(); i != range.end(); ++i) {
                    const Pixel p = schedule.map(i, width, height);
                    op(p.x, p.y);
                    if (then) then(p.x, p.x + 1, p.y, p.y + 1);
                }
            });
        }
    }
};

}  // namespace

void run_window_cpu(const FilterRun& node, const ImageView& src, const ImageView& dst) {
    if (dst.empty()) return;
    const cpu::Then then(node.then, dst);
    std::optional<StorageMatrix> colour;
    if (node.fused_color) colour = storage_matrix(*node.fused_color, src.depth, src.channels);
    dispatch_window(node, src, dst, WindowLaunch{dst.width, dst.height, then, colour ? &*colour : nullptr});
}

bool window_takes_colour_cpu(const FilterRun& node) {
    if (node.schedule.family != ScheduleFamily::naive || category_of(node.filter) != Category::window) return false;
    bool takes = false;
    visit_kind(node.filter, [&](auto kind, const auto& params) {
        using K = decltype(kind);
        if constexpr (K::category == Category::window) {
            using Op = decltype(K::template op<std::uint8_t>(params, ImageView{}, node.border, ImageView{}));
            if constexpr (requires(const Op& op) { op.takes_colour(); })  // only those ops are built here
                takes = K::template op<std::uint8_t>(params, ImageView{}, node.border, ImageView{}).takes_colour();
        }
    });
    return takes;
}

}  // namespace cbi
