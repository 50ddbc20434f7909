#include "filters/cpu_backend.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "filters/chain.hpp"
#include "filters/cpu_color.hpp"
#include "filters/cpu_separable.hpp"
#include "filters/dispatch.hpp"
#include "filters/kernel_path.hpp"

namespace cbi {
namespace {

template <class Op>
constexpr bool kIsColorOp = false;
template <class T>
constexpr bool kIsColorOp<ColorOp<T>> = true;

// The tile-staging schedules (kStagesTiles: smem:WxH, sep:WxH) run the
// separable stencils tile by tile through row-sum buffers
// (cpu_separable.hpp); every other schedule and op is evaluated per pixel in
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
            note_kernel_path(kIsColorOp<Op> ? KernelPath::cpu_color_rows : KernelPath::cpu_rows);
            // Naive is row-major: the same visit order as rows of x, without
            // mapping (a division) per pixel, so pointwise loops can vectorise.
            tbb::parallel_for(tbb::blocked_range<int>(0, height, std::max(1, 4096 / std::max(width, 1))),
                              [&](const auto& rows) {
                                  if constexpr (kIsColorOp<Op>) {
                                      cpu::color_rows(op, rows.begin(), rows.end());  // cpu_color.cpp
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

// A node with a fused_stencil (filters/chain.hpp): TBB tasks take runs of
// tiles in the node's TileOrder, each with its own tile buffer.
void run_chain_cpu(const FilterRun& node, const ImageView& src, const ImageView& dst) {
    if (dst.empty()) return;
    note_kernel_path(KernelPath::cpu_chain);
    const TileSchedule tile = chain_tile_size(node.schedule);
    with_chain_ops(node, src, dst, [&](const auto& pre, const auto& op) {
        const ChainLayout L = chain_layout(tile.tile_width, tile.tile_height, pre, op);
        const int tiles_x = (dst.width + L.tile_w - 1) / L.tile_w, tiles_y = (dst.height + L.tile_h - 1) / L.tile_h;
        tbb::parallel_for(tbb::blocked_range<int>(0, tiles_x * tiles_y), [&](const auto& tiles) {
            std::vector<std::max_align_t> buffer(L.bytes / sizeof(std::max_align_t) + 1);
            for (int t = tiles.begin(); t != tiles.end(); ++t) {
                const Pixel tile = node.schedule.order.map(static_cast<std::uint32_t>(t), tiles_x, tiles_y);
                chain_tile(pre, op, L, reinterpret_cast<unsigned char*>(buffer.data()), tile.x, tile.y, SoloTeam{});
            }
        });
    });
}

}  // namespace

void run_node_cpu(const FilterRun& node, const ImageView& src, const ImageView& dst) {
    if (node.fused_stencil) return run_chain_cpu(node, src, dst);
    dispatch_node(node, src, dst, CpuLaunch{dst.width, dst.height, node.schedule.order});
}

void run_blend_cpu(const BlendFilter& blend, const ScheduleSpec& schedule, const ImageView& a, const ImageView& b,
                   const ImageView& dst) {
    dispatch_blend(blend, schedule, a, b, dst, CpuLaunch{dst.width, dst.height, schedule.order});
}

}  // namespace cbi
