#pragma once
// The one list of filter kinds: the Filter variant. Everything that walks
// the kinds (parsing, printing, the CLI flags, --list-filters, the default
// table, dispatch on both backends, Python, fuzzing, the test matrix) is
// generated from it, so adding a kind is its header plus one line here.
#include <type_traits>
#include <utility>
#include <variant>

#include "filters/kinds/adaptive.hpp"
#include "filters/kinds/bilateral.hpp"
#include "filters/kinds/box.hpp"
#include "filters/kinds/color.hpp"
#include "filters/kinds/filter2d.hpp"
#include "filters/kinds/gamma.hpp"
#include "filters/kinds/gaussian.hpp"
#include "filters/kinds/hsv.hpp"
#include "filters/kinds/laplacian.hpp"
#include "filters/kinds/median.hpp"
#include "filters/kinds/morphology.hpp"
#include "filters/kinds/scale.hpp"
#include "filters/kinds/scharr.hpp"
#include "filters/kinds/sepfilter2d.hpp"
#include "filters/kinds/sobel.hpp"
#include "filters/kinds/threshold.hpp"

namespace cbi {

using Filter = std::variant<BoxFilter, GaussianFilter, SobelFilter, ScharrFilter, LaplacianFilter, ColorFilter,
                            ErodeFilter, DilateFilter, OpenFilter, CloseFilter, GradientFilter, TophatFilter,
                            BlackhatFilter, MedianFilter, BilateralFilter, ThresholdFilter, ScaleFilter, GammaFilter,
                            HsvFilter, HlsFilter, SepFilter2DFilter, Filter2DFilter, AdaptiveFilter>;

// Calls fn(std::type_identity<F>{}) for every kind F, in the list's order.
template <class Fn>
constexpr void for_each_kind(Fn&& fn) {
    [&]<class... Fs>(std::type_identity<std::variant<Fs...>>) {
        (fn(std::type_identity<Fs>{}), ...);
    }(std::type_identity<Filter>{});
}

// The FilterKind of the alternative `filter` holds, as fn(kind, params).
template <class Fn>
decltype(auto) visit_kind(const Filter& filter, Fn&& fn) {
    return std::visit([&]<class F>(const F& params) -> decltype(auto) { return fn(FilterKind<F>{}, params); }, filter);
}

}  // namespace cbi
