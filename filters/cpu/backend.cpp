#include "filters/cpu/backend.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>

#include "filters/cpu/color.hpp"
#include "filters/cpu/lut8.hpp"
#include "filters/cpu/pair_lines.hpp"
#include "filters/cpu/separable.hpp"
#include "filters/dispatch.hpp"
#include "filters/kernel_path.hpp"

namespace cbi {
namespace {

template <class Op>
constexpr bool kIsColorOp = false;
template <class T>
constexpr bool kIsColorOp<ColorOp<T>> = true;
template <class Op>
constexpr bool kIsHsvOp = false;
template <class T>
constexpr bool kIsHsvOp<HsvOp<T>> = true;
template <class Op>
constexpr bool kIsBlendOp = false;
template <class T>
constexpr bool kIsBlendOp<BlendOp<T>> = true;

// A row of a per-sample op (threshold, scale, gamma) as one loop over its
// samples, compiled for AVX2 and the baseline (cpu/rows.hpp's clones).
template <class Op, class T>
CBI_CPU_CLONES void per_sample_row(const Op& op, const T* __restrict in, T* __restrict out, int n) {
    for (int i = 0; i < n; ++i) out[i] = op.sample(in[i]);
}

// The tile-staging schedules (kStagesTiles: smem:WxH, sep:WxH) run the
// separable stencils tile by tile through row-sum buffers
// (cpu/separable.hpp); every other schedule and op is evaluated per pixel in
// the schedule's order.
// Walks the schedule's index range with TBB. Each task takes a contiguous
// run of schedule indices, so a column schedule keeps a task inside one
// strip of the image.
struct CpuLaunch {
    int width, height;
    TileOrder order;  // the order smem, sep and stream tasks take tiles in

    template <class Schedule, class Op>
    void operator()(Schedule schedule, const Op& op) const {
        if constexpr (kStagesTiles<Schedule> && cpu::SeparableStencilOp<Op>) {
            note_kernel_path(KernelPath::cpu_separable_tiles);
            cpu::run_separable_tiles(schedule, op, width, height, order);
        } else if constexpr (std::is_same_v<Schedule, NaiveSchedule> || std::is_same_v<Schedule, VecSchedule>) {
            note_kernel_path(kIsColorOp<Op>   ? KernelPath::cpu_color_rows
                             : kIsBlendOp<Op> ? KernelPath::cpu_blend_rows
                                              : KernelPath::cpu_rows);
            // Naive is row-major: the same visit order as rows of x, without
            // mapping (a division) per pixel, so pointwise loops can vectorise.
            tbb::parallel_for(
                tbb::blocked_range<int>(0, height, std::max(1, 4096 / std::max(width, 1))), [&](const auto& rows) {
                    if constexpr (kIsColorOp<Op>) {
                        cpu::color_rows(op, rows.begin(), rows.end());  // cpu/color.cpp
                    } else if constexpr (kIsHsvOp<Op>) {
                        cpu::hsv_rows(op, rows.begin(), rows.end());
                    } else if constexpr (kIsBlendOp<Op>) {
                        cpu::blend_rows(op, rows.begin(), rows.end());
                    } else if constexpr (PerSampleOpType<Op>) {
                        // A row is one run of samples (threshold, scale, gamma).
                        using T = typename Op::Sample;
                        const int n = width * op.dst.channels;
                        if constexpr (std::is_same_v<T, std::uint8_t> && requires { op.table[0]; }) {
                            // 8-bit ops that hold their 256 results (scale, gamma): a table lookup.
                            for (int y = rows.begin(); y != rows.end(); ++y)
                                cpu::lut8_row(op.table, op.src.template row<const T>(y), op.dst.template row<T>(y), n);
                        } else {
                            for (int y = rows.begin(); y != rows.end(); ++y)
                                per_sample_row(op, op.src.template row<const T>(y), op.dst.template row<T>(y), n);
                        }
                    } else {
                        for (int y = rows.begin(); y != rows.end(); ++y)
                            for (int x = 0; x < width; ++x) op(x, y);
                    }
                });
        } else {
            note_kernel_path(KernelPath::cpu_index_map);
            constexpr std::uint32_t grain = 4096;
            const auto n = static_cast<std::uint32_t>(width) * static_cast<std::uint32_t>(height);
            tbb::parallel_for(tbb::blocked_range<std::uint32_t>(0, n, grain), [&](const auto& range) {
                for (std::uint32_t i = range.begin(); i != range.end(); ++i) {
                    const Pixel p = schedule.map(i, width, height);
                    op(p.x, p.y);
                }
            });
        }
    }
};

// The tile geometry of a node the CPU runs as a chain: its schedule's
// (smem, sep and stream: the tile-staging ones, which the executor fuses into).
TileSchedule chain_tiles(const ScheduleSpec& spec) {
    std::optional<TileSchedule> tiles;
    with_schedule(spec, [&](auto schedule) {
        if constexpr (kStagesTiles<decltype(schedule)>) tiles = schedule;
    });
    if (!tiles) throw std::logic_error("a fused node needs a smem, sep or stream schedule, not " + spec.to_string());
    return *tiles;
}

// A node with a fused colour node, a fused stencil or both: the chain
// through line buffers (cpu/pair_lines.hpp), each TBB task with its own stages.
// Border rules are run-time values (one instantiation per sample type and
// pair of filters, as pair_tiles.hpp's).
void run_chain_cpu(const FilterRun& node, const ImageView& src, const ImageView& dst) {
    if (dst.empty()) return;
    note_kernel_path(KernelPath::cpu_chain);
    const TileSchedule tiles = chain_tiles(node.schedule);
    const Border& b1 = node.fused_stencil ? node.fused_stencil->border : node.border;
    if (node.fused_stencil && (b1.mode == BorderMode::wrap || node.border.mode == BorderMode::wrap))
        throw std::logic_error("fused stencils do not take the wrap border");
    with_depth(src.depth, [&](auto sample) {
        using T = std::remove_cvref_t<decltype(sample)>;
        constexpr BorderMode any = BorderMode::reflect101;  // the sources carry the rule
        const auto constant = [](const Border& b) { return saturate_round<T>(static_cast<float>(b.value)); };
        // The colour node's output and the first stencil's: geometry only, their rows are lines.
        const ImageView lines{nullptr, dst.width, dst.height, dst.channels, dst.depth, 0};
        const StorageMatrix matrix =
            node.fused_color ? storage_matrix(*node.fused_color, src.depth, src.channels) : StorageMatrix{};
        const auto run = [&](const auto& pre, const auto& op) {
            using Pre = std::remove_cvref_t<decltype(pre)>;
            using Op = std::remove_cvref_t<decltype(op)>;
            using Stages = cpu::ChainStages<Pre, std::conditional_t<std::is_same_v<Pre, Op>, void, Op>>;
            cpu::for_each_tile(
                tiles, node.schedule.order, dst.width, dst.height,
                [&](int tile_w) { return std::make_unique<Stages>(pre, op, src, matrix, tile_w); },
                [](Stages& stages, int x0, int x1, int y0, int y1) { stages.run(x0, x1, y0, y1); });
        };
        const auto with_first = [&](const auto& source) {
            const Filter& filter = node.fused_stencil ? node.fused_stencil->filter : node.filter;
            with_stencil_op<T, any>(filter, source, node.fused_stencil ? lines : dst, [&](const auto& pre) {
                if (!node.fused_stencil) return run(pre, pre);
                using Mid = cpu::StencilLines<std::remove_cvref_t<decltype(pre)>>;
                const cpu::LineSource<T, Mid> from_pre{{lines, constant(node.border), node.border.mode}, nullptr};
                with_stencil_op<T, any>(node.filter, from_pre, dst, [&](const auto& op) { run(pre, op); });
            });
        };
        if (node.fused_color) {
            with_first(cpu::LineSource<T, cpu::ColorLines<T>>{{lines, constant(b1), b1.mode}, nullptr});
        } else {
            with_first(AnyBorderSource<T>{src, constant(b1), b1.mode});
        }
    });
}

}  // namespace

void run_node_cpu(const FilterRun& node, const ImageView& src, const ImageView& dst) {
    if (category_of(node.filter) == Category::window) return run_window_cpu(node, src, dst);
    if (node.fused_stencil || node.fused_color) return run_chain_cpu(node, src, dst);
    dispatch_node(node, src, dst, CpuLaunch{dst.width, dst.height, node.schedule.order});
}

void run_blend_cpu(const BlendFilter& blend, const ScheduleSpec& schedule, const ImageView& a, const ImageView& b,
                   const ImageView& dst) {
    dispatch_blend(blend, schedule, a, b, dst, CpuLaunch{dst.width, dst.height, schedule.order});
}

}  // namespace cbi
