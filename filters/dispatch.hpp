#pragma once
// The one place where a node's runtime choices (depth x filter x border x
// schedule) become template arguments. Both backends include it: the CPU
// backend passes a launcher that walks the schedule with TBB, the CUDA
// backend one that launches a kernel. Kernels never branch on these axes.
#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>

#include "filters/filter.hpp"
#include "schedules/registry.hpp"

namespace cbi {

template <class F>
decltype(auto) with_depth(Depth depth, F&& f) {
    switch (depth) {
        case Depth::u16: return std::forward<F>(f)(std::uint16_t{});
        case Depth::f32: return std::forward<F>(f)(float{});
        case Depth::u8: break;
    }
    return std::forward<F>(f)(std::uint8_t{});
}

template <class F>
decltype(auto) with_border(BorderMode mode, F&& f) {
    using M = BorderMode;
    switch (mode) {
        case M::reflect: return std::forward<F>(f)(std::integral_constant<M, M::reflect>{});
        case M::replicate: return std::forward<F>(f)(std::integral_constant<M, M::replicate>{});
        case M::constant: return std::forward<F>(f)(std::integral_constant<M, M::constant>{});
        case M::wrap: return std::forward<F>(f)(std::integral_constant<M, M::wrap>{});
        case M::reflect101: break;
    }
    return std::forward<F>(f)(std::integral_constant<M, M::reflect101>{});
}

// The stencil-only tile schedules (the input read once per tile or strip):
// the CPU runs them tile by tile (cpu/separable.hpp); smem and sep also take
// fused colour nodes.
template <class Schedule>
constexpr bool kStagesTiles = std::is_same_v<Schedule, SmemTileSchedule> || std::is_same_v<Schedule, SepTileSchedule> ||
                              std::is_same_v<Schedule, StreamSchedule>;

// Builds the stencil op of `filter` reading `source` and writing `dst`
// (FilterKind<F>::op) and calls f(op). Pointwise kinds are not stencils: f
// is not called. B is the border of the op's type; sources with a run-time
// border rule pass any.
template <class T, BorderMode B, class Src, class F>
void with_stencil_op(const Filter& filter, const Src& source, const ImageView& dst, F&& f) {
    visit_kind(filter, [&](auto kind, const auto& params) {
        if constexpr (decltype(kind)::category == Category::stencil)
            f(decltype(kind)::template op<T, B, Src>(params, source, dst));
    });
}

// The per-pixel schedules (a thread or loop step computes the pixel its
// index maps to): naive, column:W, zigzag:W, tile:WxH; the only ones that run
// window kinds (Capabilities::window).
template <class Schedule>
constexpr bool kPerPixel = std::is_same_v<Schedule, NaiveSchedule> || std::is_same_v<Schedule, TileSchedule>;

// Builds the op of a window-kind node (FilterKind<F>::op<T>(params, src,
// border, dst)) and calls launch(schedule, op). The backends instantiate it
// in a translation unit of its own (cpu/window.cpp, cuda/window.cu): window
// kinds are not compiled into the stencil kernels' units.
template <class Launch>
void dispatch_window(const FilterRun& node, const ImageView& src, const ImageView& dst, Launch&& launch) {
    with_depth(src.depth, [&](auto sample) {
        using T = std::remove_cvref_t<decltype(sample)>;
        with_schedule(node.schedule, [&](auto schedule) {
            if constexpr (kPerPixel<decltype(schedule)>) {
                visit_kind(node.filter, [&](auto kind, const auto& params) {
                    if constexpr (decltype(kind)::category == Category::window)
                        launch(schedule, decltype(kind)::template op<T>(params, src, node.border, dst));
                    else
                        throw std::logic_error("dispatch_window: not a window kind");
                });
            } else {
                throw std::logic_error("window kinds run on per-pixel schedules only, not " +
                                       node.schedule.to_string());
            }
        });
    });
}

// How a stencil op takes its border rule: as a template argument (CUDA
// kernels, one per rule, resolved at compile time in every load) or as a
// run-time value (the CPU, whose loops resolve borders once per row or only
// outside the image: one instantiation for every rule; fused colour nodes
// run there as chains, not through dispatch_node).
enum class BorderBinding { compiled, run_time };

// Builds the op for `node` reading `src` and writing `dst` (geometry already
// validated by the executor) and calls launch(schedule, op). Window kinds go
// through dispatch_window.
template <BorderBinding Binding = BorderBinding::compiled, class Launch>
void dispatch_node(const FilterRun& node, const ImageView& src, const ImageView& dst, Launch&& launch) {
    if (category_of(node.filter) == Category::window) throw std::logic_error("dispatch_node: a window kind");
    with_depth(src.depth, [&](auto sample) {
        using T = std::remove_cvref_t<decltype(sample)>;  // (GCC 12 sees a reference in nested lambdas)
        with_schedule(node.schedule, [&](auto schedule) {
            if (category_of(node.filter) == Category::pointwise) {
                visit_kind(node.filter, [&](auto kind, const auto& params) {
                    if constexpr (decltype(kind)::category == Category::pointwise)
                        launch(schedule, decltype(kind)::template op<T>(params, src, dst));
                });
                return;
            }
            const T constant = saturate_round<T>(static_cast<float>(node.border.value));
            if constexpr (Binding == BorderBinding::run_time) {
                if (node.fused_color) throw std::logic_error("dispatch_node: a fused colour node runs as a chain");
                const AnyBorderSource<T> source{src, constant, node.border.mode};
                with_stencil_op<T, BorderMode::reflect101>(node.filter, source, dst,
                                                           [&](const auto& op) { launch(schedule, op); });
            } else {
                with_border(node.border.mode, [&](auto border) {
                    constexpr BorderMode B = decltype(border)::value;
                    const auto launch_stencil = [&](const auto& source) {
                        with_stencil_op<T, B>(node.filter, source, dst, [&](const auto& op) { launch(schedule, op); });
                    };
                    if constexpr (kStagesTiles<decltype(schedule)>) {
                        if (node.fused_color) {
                            // src is the colour node's input; the stencil reads its output.
                            const ImageView colored{nullptr,    src.width,
                                                    src.height, output_channels(*node.fused_color, src.channels),
                                                    src.depth,  0};
                            launch_stencil(ColorSource<T, B>{
                                {colored, src, storage_matrix(*node.fused_color, src.depth, src.channels), constant}});
                            return;
                        }
                    }
                    // The executor fuses only into tile-staging schedules, which compute each sample once.
                    if (node.fused_color) throw std::logic_error("a fused colour node needs a smem or sep schedule");
                    launch_stencil(BorderedSource<T, B>{src, constant});
                });
            }
        });
    });
}

// Builds the blend op for `a`, `b` -> `dst` and calls launch(schedule, op).
template <class Launch>
void dispatch_blend(const BlendFilter& blend, const ScheduleSpec& schedule_spec, const ImageView& a, const ImageView& b,
                    const ImageView& dst, Launch&& launch) {
    with_depth(a.depth, [&](auto sample) {
        using T = std::remove_cvref_t<decltype(sample)>;  // (GCC 12 sees a reference in nested lambdas)
        with_schedule(schedule_spec, [&](auto schedule) {
            launch(schedule, BlendOp<T>{a, b, dst, static_cast<float>(blend.alpha), static_cast<float>(blend.beta),
                                        static_cast<float>(blend.gamma)});
        });
    });
}

}  // namespace cbi
