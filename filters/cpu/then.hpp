#pragma once
// A per-sample node applied in place to the rectangles of a node's output as
// the node's tasks finish them (FilterRun::then), while they are in cache:
// the node and the one after it in one pass over memory. Also a blend of the
// node and its source (a fused blend, BlendRun with one stencil side).
#include <functional>
#include <optional>

#include "filters/filter.hpp"

namespace cbi::cpu {

class Then {
public:
    Then() = default;  // applies nothing
    // `then` must be empty or a per-sample filter (is_per_sample).
    Then(const std::optional<Filter>& then, const ImageView& dst);
    // A blend of a stencil and the stencil's source (an unsharp mask, an
    // adaptive threshold's difference) applied to the stencil's output in
    // place, then `then`: dst = blend(dst, source) where the stencil is the
    // blend's first operand, blend(source, dst) where it is the second.
    Then(const BlendFilter& blend, const ImageView& source, bool stencil_first, const std::optional<Filter>& then,
         const ImageView& dst);
    explicit operator bool() const { return static_cast<bool>(apply_); }
    // Every sample of columns [x0, x1) of rows [y0, y1) of dst.
    void operator()(int x0, int x1, int y0, int y1) const {
        if (apply_) apply_(x0, x1, y0, y1);
    }

private:
    std::function<void(int, int, int, int)> apply_;
};

}  // namespace cbi::cpu
