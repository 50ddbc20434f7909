#pragma once
// The one place where a node's runtime choices (depth x filter x border x
// schedule) become template arguments. Both backends include it: the CPU
// backend passes a launcher that walks the schedule with TBB, the CUDA
// backend one that launches a kernel. Kernels never branch on these axes.
#include <cstdint>
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

// Builds the op for `node` reading `src` and writing `dst` (geometry already
// validated by the executor) and calls launch(schedule, op).
template <class Launch>
void dispatch_node(const Node& node, const ImageView& src, const ImageView& dst, Launch&& launch) {
    with_depth(src.depth, [&](auto sample) {
        using T = decltype(sample);
        with_schedule(node.schedule, [&](auto schedule) {
            if (const auto* color = std::get_if<ColorFilter>(&node.filter)) {
                launch(schedule, ColorOp<T>{src, dst, storage_matrix(*color, src.depth)});
                return;
            }
            with_border(node.border.mode, [&](auto border) {
                constexpr BorderMode B = decltype(border)::value;
                const BorderedSource<T, B> source{src, saturate_round<T>(static_cast<float>(node.border.value))};
                if (const auto* box = std::get_if<BoxFilter>(&node.filter)) {
                    launch(schedule, BoxOp<T, B>{{source, dst}, box->ksize});
                } else if (const auto* gauss = std::get_if<GaussianFilter>(&node.filter)) {
                    GaussianOp<T, B> op{{source, dst}, gauss->ksize, {}};
                    const auto kernel = gaussian_weights(gauss->ksize, gauss->sigma);
                    for (int i = 0; i < gauss->ksize; ++i) op.weights[i] = static_cast<float>(kernel.w[i]);
                    launch(schedule, op);
                } else if (const auto* sobel = std::get_if<SobelFilter>(&node.filter)) {
                    launch(schedule, SobelOp<T, B>{{source, dst}, sobel->mode, sobel_kernels(sobel->ksize)});
                }
            });
        });
    });
}

// Builds the blend op for `a`, `b` -> `dst` and calls launch(schedule, op).
template <class Launch>
void dispatch_blend(const BlendFilter& blend, const ScheduleSpec& schedule_spec, const ImageView& a, const ImageView& b,
                    const ImageView& dst, Launch&& launch) {
    with_depth(a.depth, [&](auto sample) {
        using T = decltype(sample);
        with_schedule(schedule_spec, [&](auto schedule) {
            launch(schedule, BlendOp<T>{a, b, dst, static_cast<float>(blend.alpha), static_cast<float>(blend.beta),
                                        static_cast<float>(blend.gamma)});
        });
    });
}

}  // namespace cbi
