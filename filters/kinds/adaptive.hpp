#pragma once
// adaptive:MAXVAL:mean|gaussian:BLOCK:C[:binary|binary_inv] =
// cv::adaptiveThreshold(src, dst, MAXVAL, ADAPTIVE_THRESH_MEAN_C or
// ADAPTIVE_THRESH_GAUSSIAN_C, THRESH_BINARY or THRESH_BINARY_INV, BLOCK, C),
// bit for bit, on 8-bit 1-channel images (what OpenCV takes; others are
// refused, cbi::Error). A compound kind: it runs as three nodes
// (FilterKind::expand), each bit-exact with OpenCV's own step:
//   1. mean = blur:BLOCK, or the Gaussian of BLOCK (sigma from BLOCK) as
//      sepfilter2d with its float taps: OpenCV blurs a float copy and rounds
//      (the 8-bit gaussian kind's fixed point would differ), always with the
//      replicate border (OpenCV's BORDER_REPLICATE|BORDER_ISOLATED);
//   2. d = blend:1:-1:IDELTA(src, mean), IDELTA = ceil(C) for binary and
//      floor(C) for binary_inv as OpenCV takes it; in exact integers and
//      saturated to 8 bits, d > 0 exactly when src - mean + IDELTA > 0;
//   3. threshold:0:MAXVAL:binary|binary_inv(d).
// OpenCV's binary is src - mean > -IDELTA ? MAXVAL : 0 (its 768-entry
// table), binary_inv the complement: the same comparisons.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "filters/kinds/args.hpp"
#include "filters/kinds/kind.hpp"
#include "filters/kinds/threshold.hpp"
#include "filters/ops.hpp"

namespace cbi {

struct AdaptiveFilter {
    double maxval = 255;
    bool gaussian = false;  // ADAPTIVE_THRESH_GAUSSIAN_C; else MEAN_C
    int block = 3;          // odd, 3..255
    double c = 0;
    bool inverse = false;  // THRESH_BINARY_INV
    friend bool operator==(const AdaptiveFilter&, const AdaptiveFilter&) = default;
};

template <>
struct FilterKind<AdaptiveFilter> {
    static constexpr std::string_view name = "adaptive",
                                      form = "adaptive:MAXVAL:mean|gaussian:BLOCK:C[:binary|binary_inv]",
                                      params = "maxval method block c type";
    static constexpr std::string_view help =
        "src > local mean - C ? MAXVAL : 0 over BLOCK x BLOCK (odd, 3..255); 8-bit 1-channel images";
    static constexpr std::string_view opencv = "cv::adaptiveThreshold(src, dst, MAXVAL, method, type, BLOCK, C)";
    static constexpr Category category = Category::window;
    static constexpr std::string_view examples[] = {"255:mean:11:2", "200:gaussian:5:-3.5:binary_inv",
                                                    "255:gaussian:31:7", "255:mean:3:0.5"};
    static constexpr KindDefault defaults[] = {
        // Never used: the node runs as its steps, which take their own kinds' rows.
        {true, 0, kAnyDepth, 0, "tile:32x8 tile:16x16 column:32"},
        {false, 0, kAnyDepth, 0, "naive"},
    };

    static AdaptiveFilter parse(std::string_view a);
    static std::string print(const AdaptiveFilter& f);
    static Footprint footprint(const AdaptiveFilter& f) { return {f.block, f.block}; }
    // OpenCV's border for it (the steps fix it for the blur in any case).
    static Border default_border(const AdaptiveFilter&) { return {BorderMode::replicate, 0}; }
    static Expansion expand(const AdaptiveFilter& f);
    // The image it takes: 8-bit, 1 channel (an empty string), or why not.
    static std::string refuses_input(const AdaptiveFilter& f, Depth depth, int channels);

    template <class T>
    static ThresholdOp<T> op(const AdaptiveFilter&, const ImageView&, const Border&, const ImageView&) {
        throw std::logic_error("adaptive runs as the steps it expands to (expand_compound)");
    }
};

}  // namespace cbi
