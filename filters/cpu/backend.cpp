#include "filters/cpu/backend.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

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
#include "filters/cpu/then.hpp"
#include "filters/dispatch.hpp"
#include "filters/error.hpp"
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

// A schedule's index -> pixel map, a chunk of indices at a time, without
// its type: the per-pixel loop is instantiated per op, not per op and
// schedule.
struct PixelMap {
    const void* schedule;
    void (*fill)(const void* schedule, std::uint32_t first, int n, int width, int height, Pixel* out);

    template <class Schedule>
    static PixelMap of(const Schedule& s) {
        return {&s, [](const void* p, std::uint32_t first, int n, int width, int height, Pixel* out) {
                    const auto& schedule = *static_cast<const Schedule*>(p);
                    for (int k = 0; k < n; ++k)
                        out[k] = schedule.map(first + static_cast<std::uint32_t>(k), width, height);
                }};
    }
};

// Rows of a naive (or vec) schedule: row-major, the same visit order as
// rows of x, without mapping (a division) per pixel, so pointwise loops can
// vectorise.
template <class Op>
void run_rows(const Op& op, int width, int height, const cpu::Then& then) {
    note_kernel_path(kIsColorOp<Op>   ? KernelPath::cpu_color_rows
                     : kIsBlendOp<Op> ? KernelPath::cpu_blend_rows
                                      : KernelPath::cpu_rows);
    // Pointwise ops: tasks of at least 64 KiB (below that a task costs more to hand to another thread than to
    // run). Per-pixel ops (a stencil on naive) cost far more per pixel: 4096 pixels, so that an interrupt, which
    // cancels between tasks, stops them soon.
    constexpr bool kCheap = kIsColorOp<Op> || kIsHsvOp<Op> || kIsBlendOp<Op> || PerSampleOpType<Op>;
    const std::size_t row_bytes = std::max<std::size_t>(op.dst.row_bytes(), 1);
    const int grain = kCheap ? static_cast<int>(std::max<std::size_t>(1, (std::size_t{1} << 16) / row_bytes))
                             : std::max(1, 4096 / std::max(width, 1));
    tbb::parallel_for(tbb::blocked_range<int>(0, height, grain), [&](const auto& rows) {
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
        then(0, width, rows.begin(), rows.end());
    });
}

// Walks the schedule's index range with TBB. Each task takes a contiguous
// run of schedule indices, so a column schedule keeps a task inside one
// strip of the image.
template <class Op>
void run_mapped(const PixelMap& map, const Op& op, int width, int height, const cpu::Then& then) {
    note_kernel_path(KernelPath::cpu_index_map);
    constexpr std::uint32_t grain = 4096;
    constexpr int kChunk = 256;
    const auto n = static_cast<std::uint32_t>(width) * static_cast<std::uint32_t>(height);
    tbb::parallel_for(tbb::blocked_range<std::uint32_t>(0, n, grain), [&](const auto& range) {
        Pixel pixels[kChunk];
        for (std::uint32_t i = range.begin(); i < range.end(); i += kChunk) {
            const int k = static_cast<int>(std::min<std::uint32_t>(kChunk, range.end() - i));
            map.fill(map.schedule, i, k, width, height, pixels);
            for (int j = 0; j < k; ++j) {
                op(pixels[j].x, pixels[j].y);
                if (then) then(pixels[j].x, pixels[j].x + 1, pixels[j].y, pixels[j].y + 1);
            }
        }
    });
}

// The tile-staging schedules (kStagesTiles: smem:WxH, sep:WxH, stream)
// run the separable stencils tile by tile through row-sum buffers
// (cpu/separable.hpp); naive and vec run rows; every other schedule and op
// is evaluated per pixel in the schedule's order.
struct CpuLaunch {
    int width, height;
    TileOrder order;  // the order smem, sep and stream tasks take tiles in
    const cpu::Then& then;

    template <class Schedule, class Op>
    void operator()(Schedule schedule, const Op& op) const {
        if constexpr (kStagesTiles<Schedule> && cpu::SeparableStencilOp<Op>) {
            note_kernel_path(KernelPath::cpu_separable_tiles);
            cpu::run_separable_tiles(schedule, op, width, height, order, then);
        } else if constexpr (std::is_same_v<Schedule, NaiveSchedule> || std::is_same_v<Schedule, VecSchedule>) {
            run_rows(op, width, height, then);
        } else {
            run_mapped(PixelMap::of(schedule), op, width, height, then);
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
// Border rules are run-time values and the stages meet through line
// interfaces: one instantiation per sample type, kind and source.
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
        // Each stencil is built once per kind and source (never per pair of
        // kinds): its stage comes from a factory the tasks call.
        cpu::ChainPlan<T> plan;
        plan.width = dst.width;
        plan.colour = node.fused_color.has_value();
        plan.wrap = b1.mode == BorderMode::wrap;
        const bool pair = node.fused_stencil.has_value();
        const auto build_first = [&](const auto& source) {
            const Filter& filter = pair ? node.fused_stencil->filter : node.filter;
            with_stencil_op<T, any>(filter, source, pair ? lines : dst, [&](const auto& pre) {
                using Pre = std::remove_cvref_t<decltype(pre)>;
                plan.h1 = stencil_halo(pre);
                plan.colour_channels = pre.src.view.channels;
                plan.colour_rows = cpu::ring_rows(pre);
                if (pair) {
                    plan.first = [pre](cpu::Lines<T>* from, int max_width, int capacity) {
                        return std::unique_ptr<cpu::StencilStage<T>>(
                            new cpu::StencilLines<Pre>(pre, from, max_width, capacity));
                    };
                } else {
                    plan.last = [pre](cpu::Lines<T>* from, int tile_w) {
                        return std::unique_ptr<cpu::TileStage<T>>(new cpu::TileStageOf<Pre>(pre, from, tile_w));
                    };
                }
            });
        };
        if (plan.colour) {
            build_first(cpu::LineSource<T>{{lines, constant(b1), b1.mode}, nullptr});
        } else {
            build_first(AnyBorderSource<T>{src, constant(b1), b1.mode});
        }
        if (pair) {
            const cpu::LineSource<T> from_first{{lines, constant(node.border), node.border.mode}, nullptr};
            with_stencil_op<T, any>(node.filter, from_first, dst, [&](const auto& op) {
                using Op = std::remove_cvref_t<decltype(op)>;
                plan.h2 = stencil_halo(op);
                plan.mid_rows = cpu::ring_rows(op);
                plan.last = [op](cpu::Lines<T>* from, int tile_w) {
                    return std::unique_ptr<cpu::TileStage<T>>(new cpu::TileStageOf<Op>(op, from, tile_w));
                };
            });
        }
        if (!plan.last) throw std::logic_error("a fused chain needs stencils");
        const cpu::Then then(node.then, dst);
        cpu::for_each_tile(
            tiles, node.schedule.order, dst.width, dst.height,
            [&](int tile_w) { return std::make_unique<cpu::ChainStages<T>>(plan, src, matrix, tile_w); },
            [&](cpu::ChainStages<T>& stages, int x0, int x1, int y0, int y1) {
                stages.run(x0, x1, y0, y1);
                then(x0, x1, y0, y1);
            });
    });
}

// The histogram of every sample of an 8-bit 1-channel image, rows split
// across TBB tasks (each with its own bins, added at the end).
struct Histogram {
    std::uint32_t bins[kOtsuBins] = {};
};
Histogram histogram_u8(const ImageView& src) {
    return tbb::parallel_reduce(
        tbb::blocked_range<int>(0, src.height, std::max(1, 65536 / std::max(src.width, 1))), Histogram{},
        [&](const tbb::blocked_range<int>& rows, Histogram h) {
            for (int y = rows.begin(); y != rows.end(); ++y) {
                const std::uint8_t* row = src.row<const std::uint8_t>(y);
                for (int x = 0; x < src.width; ++x) ++h.bins[row[x]];
            }
            return h;
        },
        [](Histogram a, const Histogram& b) {
            for (int i = 0; i < kOtsuBins; ++i) a.bins[i] += b.bins[i];
            return a;
        });
}

// An otsu threshold node as the plain threshold at Otsu's level of src, the
// node's whole input: the level is found before any pixel is written, so the
// schedule's tiles and tasks all compare with the one value. (A tuning run
// on a band of rows finds the band's level; only its time is kept.)
FilterRun at_otsu_level(const FilterRun& node, const ImageView& src) {
    const auto& f = std::get<ThresholdFilter>(node.filter);
    if (const std::string why = FilterKind<ThresholdFilter>::refuses_input(f, src.depth, src.channels); !why.empty())
        throw Error(to_string(node.filter), why);
    FilterRun run = node;
    run.filter = at_otsu_level(f, otsu_level(histogram_u8(src).bins, static_cast<double>(src.pixels())));
    return run;
}

bool is_otsu(const Filter& f) {
    const auto* t = std::get_if<ThresholdFilter>(&f);
    return t && t->otsu;
}

}  // namespace

void run_node_cpu(const FilterRun& node, const ImageView& src, const ImageView& dst) {
    if (category_of(node.filter) == Category::window) return run_window_cpu(node, src, dst);
    if (node.fused_stencil || node.fused_color) return run_chain_cpu(node, src, dst);
    const cpu::Then then(node.then, dst);
    if (is_otsu(node.filter)) {
        if (dst.empty()) return;
        return dispatch_node<BorderBinding::run_time>(at_otsu_level(node, src), src, dst,
                                                      CpuLaunch{dst.width, dst.height, node.schedule.order, then});
    }
    dispatch_node<BorderBinding::run_time>(node, src, dst, CpuLaunch{dst.width, dst.height, node.schedule.order, then});
}

void run_blend_cpu(const BlendFilter& blend, const ScheduleSpec& schedule, const ImageView& a, const ImageView& b,
                   const ImageView& dst, const std::optional<Filter>& then) {
    const cpu::Then apply(then, dst);
    dispatch_blend(blend, schedule, a, b, dst, CpuLaunch{dst.width, dst.height, schedule.order, apply});
}

void run_blend_of_stencil_cpu(const BlendRun& run, const ImageView& src, const ImageView& dst) {
    if (run.a.has_value() == run.b.has_value()) throw std::logic_error("a CPU fused blend takes one stencil");
    const FilterRun node{run.a ? *run.a : *run.b, run.border, run.schedule};
    if (category_of(node.filter) != Category::stencil) throw std::logic_error("a CPU fused blend takes a stencil");
    const cpu::Then then(run.blend, src, run.a.has_value(), run.then, dst);
    dispatch_node<BorderBinding::run_time>(node, src, dst, CpuLaunch{dst.width, dst.height, node.schedule.order, then});
}

}  // namespace cbi
