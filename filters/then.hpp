#pragma once
// The per-sample kinds (is_per_sample: threshold, scale, gamma) as one
// value a kernel applies to each sample it stores (FilterRun::then): their
// ops side by side and which one applies, so that one instantiation of a
// stencil kernel serves every per-sample kind and none. The list is the kind
// list's pointwise kinds whose op is a PerSampleOp: a new per-sample kind
// joins it without changes here.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include "filters/filter.hpp"

namespace cbi {

namespace then_detail {

// std::tuple<Op> for a per-sample kind F at sample type T, else std::tuple<>.
template <class T, class F>
struct OpOf {
    using type = std::tuple<>;
};
template <class T, class F>
requires(FilterKind<F>::category == Category::pointwise &&
         PerSampleOpType<decltype(FilterKind<F>::template op<T>(std::declval<const F&>(), ImageView{},
                                                                ImageView{}))>) struct OpOf<T, F> {
    using type =
        std::tuple<decltype(FilterKind<F>::template op<T>(std::declval<const F&>(), ImageView{}, ImageView{}))>;
};

template <class T, class... Fs>
auto ops_of(std::type_identity<std::variant<Fs...>>)
    -> decltype(std::tuple_cat(std::declval<typename OpOf<T, Fs>::type>()...));

// The ops one after another; apply(i, v): the i-th op's sample(v), v for i outside the list.
// apply4(i, v): the same on the four 8-bit samples of v, with the op's
// sample4 where it has one (a threshold's byte-wise SIMD).
template <class... Ops>
struct Chain {
    CBI_HOST_DEVICE auto apply(int, auto v) const { return v; }
    CBI_HOST_DEVICE std::uint32_t apply4(int, std::uint32_t v) const { return v; }
};
template <class Op, class... Rest>
struct Chain<Op, Rest...> {
    Op op{};
    Chain<Rest...> rest{};
    template <class T>
    CBI_HOST_DEVICE T apply(int i, T v) const {
        return i == 0 ? op.sample(v) : rest.apply(i - 1, v);
    }
    CBI_HOST_DEVICE std::uint32_t apply4(int i, std::uint32_t v) const {
        if (i != 0) return rest.apply4(i - 1, v);
        if constexpr (requires { op.sample4(v); }) {
            return op.sample4(v);
        } else {
            std::uint32_t out = 0;
            for (int k = 0; k < 4; ++k)
                out |= static_cast<std::uint32_t>(op.sample(static_cast<std::uint8_t>(v >> (8 * k)))) << (8 * k);
            return out;
        }
    }
};
template <class Tuple>
struct ChainOf;
template <class... Ops>
struct ChainOf<std::tuple<Ops...>> {
    using type = Chain<Ops...>;
};

// Where F's op sits among the per-sample kinds' (-1: F is not one).
template <class T, class F>
constexpr int position() {
    int i = 0, pos = -1;
    for_each_kind([&]<class G>(std::type_identity<G>) {
        if constexpr (std::tuple_size_v<typename OpOf<T, G>::type> == 1) {
            if (std::is_same_v<F, G>) pos = i;
            ++i;
        }
    });
    return pos;
}

template <int I, class Chain, class Op>
void set_at(Chain& chain, const Op& op) {
    if constexpr (I == 0)
        chain.op = op;
    else
        set_at<I - 1>(chain.rest, op);
}

}  // namespace then_detail

template <class T>
struct ThenSamples {
    using Ops = decltype(then_detail::ops_of<T>(std::type_identity<Filter>{}));
    typename then_detail::ChainOf<Ops>::type ops{};
    int which = -1;  // the op that applies; -1: none

    CBI_HOST_DEVICE bool active() const { return which >= 0; }
    CBI_HOST_DEVICE T operator()(T v) const { return which < 0 ? v : ops.apply(which, v); }
    // The eight 8-bit samples of v (byte k: sample k).
    CBI_HOST_DEVICE unsigned long long bytes8(unsigned long long v) const requires std::is_same_v<T, std::uint8_t> {
        if (which < 0) return v;
        return ops.apply4(which, static_cast<std::uint32_t>(v)) |
               static_cast<unsigned long long>(ops.apply4(which, static_cast<std::uint32_t>(v >> 32))) << 32;
    }
};

// Whether the 8-bit op of a per-sample filter holds its 256 results (scale,
// gamma): the GPU's stencil kernels do not apply those (computed per sample
// there, a gamma's pow costs more than their own pass over a staged table).
inline bool looks_up_8bit(const Filter& f) {
    return std::visit(
        []<class F>(const F&) {
            using Op = typename then_detail::OpOf<std::uint8_t, F>::type;
            if constexpr (std::tuple_size_v<Op> == 1) return requires(const std::tuple_element_t<0, Op>& op) {
                    op.table[255];
                };
            else
                return false;
        },
        f);
}

// The ThenSamples of a node's `then` (empty: none) for outputs in dst.
template <class T>
ThenSamples<T> then_samples(const std::optional<Filter>& then, const ImageView& dst) {
    ThenSamples<T> out;
    if (!then) return out;
    if (!is_per_sample(*then)) throw std::logic_error(to_string(*then) + " is not a per-sample filter");
    std::visit(
        [&]<class F>(const F& params) {
            constexpr int i = then_detail::position<T, F>();
            if constexpr (i >= 0) {
                then_detail::set_at<i>(out.ops, FilterKind<F>::template op<T>(params, dst, dst));
                out.which = i;
            }
        },
        *then);
    return out;
}

}  // namespace cbi
