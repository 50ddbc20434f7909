#include "filters/cpu/then.hpp"

#include <cstdint>
#include <stdexcept>
#include <tuple>
#include <type_traits>

#include "filters/cpu/color.hpp"
#include "filters/cpu/lut8.hpp"
#include "filters/cpu/rows.hpp"
#include "filters/dispatch.hpp"
#include "filters/then.hpp"

namespace cbi::cpu {
namespace {

// The op is copied: stores through `samples` (8-bit ones alias anything)
// would otherwise make the loop reload its fields after each one, and not
// vectorise.
template <class Op, class T>
CBI_CPU_CLONES void per_sample_in_place(const Op& op, T* samples, int n) {
    const Op local = op;
    for (int i = 0; i < n; ++i) samples[i] = local.sample(samples[i]);
}

}  // namespace

Then::Then(const std::optional<Filter>& then, const ImageView& dst) {
    if (!then) return;
    if (!is_per_sample(*then)) throw std::logic_error(to_string(*then) + " is not a per-sample filter");
    with_depth(dst.depth, [&](auto sample) {
        using T = std::remove_cvref_t<decltype(sample)>;
        std::visit(
            [&]<class F>(const F& params) {
                if constexpr (std::tuple_size_v<typename then_detail::OpOf<T, F>::type> == 1) {  // is_per_sample
                    apply_ = [op = FilterKind<F>::template op<T>(params, dst, dst), dst](int x0, int x1, int y0,
                                                                                         int y1) {
                        const int n = (x1 - x0) * dst.channels;
                        for (int y = y0; y < y1; ++y) {
                            T* row = dst.row<T>(y) + static_cast<std::ptrdiff_t>(x0) * dst.channels;
                            if constexpr (std::is_same_v<T, std::uint8_t> && requires { op.table[0]; })
                                lut8_row(op.table, row, row, n);  // the 8-bit kinds that hold their results
                            else
                                per_sample_in_place(op, row, n);
                        }
                    };
                }
            },
            *then);
    });
}

Then::Then(const BlendFilter& blend, const ImageView& source, bool stencil_first, const std::optional<Filter>& then,
           const ImageView& dst) {
    with_depth(dst.depth, [&](auto sample) {
        using T = std::remove_cvref_t<decltype(sample)>;
        apply_ = [blend, source, stencil_first, dst, after = Then(then, dst)](int x0, int x1, int y0, int y1) {
            const ImageView s = source.crop(x0, 0, x1 - x0, source.height), d = dst.crop(x0, 0, x1 - x0, dst.height);
            blend_rows(BlendOp<T>{stencil_first ? d : s, stencil_first ? s : d, d, static_cast<float>(blend.alpha),
                                  static_cast<float>(blend.beta), static_cast<float>(blend.gamma)},
                       y0, y1);
            after(x0, x1, y0, y1);
        };
    });
}

}  // namespace cbi::cpu
