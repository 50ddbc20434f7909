#include "filters/kinds/adaptive.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "filters/filter.hpp"

namespace cbi {

using Kind = FilterKind<AdaptiveFilter>;

AdaptiveFilter Kind::parse(std::string_view a) {
    const std::string where = " (" + std::string(form) + ")";
    const auto parts = args::split(a, ':');
    args::expect_fields(name, a, parts, 4, 5, form.substr(name.size() + 1));
    AdaptiveFilter f;
    if (!args::parse_double(parts[0], f.maxval))
        args::invalid("adaptive MAXVAL '" + std::string(parts[0]) + "' is not a number" + where);
    if (parts[1] == "gaussian")
        f.gaussian = true;
    else if (parts[1] != "mean")
        args::invalid("adaptive method '" + std::string(parts[1]) + "' must be mean or gaussian" + where);
    int block = 0;
    if (!args::parse_int(parts[2], block) || block < 3 || block > kMaxKernel || block % 2 == 0)
        args::invalid("adaptive block size '" + std::string(parts[2]) + "' must be an odd integer from 3 to 255" +
                      where);
    f.block = block;
    if (!args::parse_double(parts[3], f.c))
        args::invalid("adaptive C '" + std::string(parts[3]) + "' is not a number" + where);
    if (parts.size() == 5) {
        if (parts[4] == "binary_inv")
            f.inverse = true;
        else if (parts[4] != "binary")
            args::invalid("adaptive type '" + std::string(parts[4]) + "' must be binary or binary_inv" + where);
    }
    return f;
}

std::string Kind::print(const AdaptiveFilter& f) {
    return args::number(f.maxval) + (f.gaussian ? ":gaussian:" : ":mean:") + std::to_string(f.block) + ":" +
           args::number(f.c) + (f.inverse ? ":binary_inv" : "");
}

Expansion Kind::expand(const AdaptiveFilter& f) {
    // cv::adaptiveThreshold: idelta = cvCeil(C) for THRESH_BINARY, cvFloor(C) otherwise. C is clamped
    // first: any |idelta| above 255 already decides every pixel, and cvCeil of a value beyond int is undefined.
    const double c = std::clamp(f.c, -512.0, 512.0);
    const double idelta = f.inverse ? std::floor(c) : std::ceil(c);
    // The mean: OpenCV's box filter on the 8-bit image (cbi's blur, bit for bit), or its Gaussian
    // in float (adaptiveThreshold converts to CV_32F, blurs, and rounds back), which the float taps
    // of sepfilter2d reproduce; the 8-bit Gaussian's 1/256 weights differ from it on ~0.5% of pixels.
    Filter mean = BoxFilter{f.block};
    if (f.gaussian) {
        const GaussianKernel1D k = gaussian_weights(f.block, 0.0);
        const std::vector<double> taps(k.w, k.w + k.size);
        mean = SepFilter2DFilter{taps, taps};
    }
    ThresholdFilter t;
    t.thresh = 0;
    t.maxval = f.maxval;
    t.default_maxval = false;
    t.type = f.inverse ? ThresholdType::binary_inv : ThresholdType::binary;
    Expansion e;
    e.steps.push_back({mean, {kExpansionInput, kExpansionInput}, Border{BorderMode::replicate, 0}});
    e.steps.push_back({BlendFilter{1, -1, idelta}, {kExpansionInput, 0}});
    e.steps.push_back({Filter{t}, {1, 1}});
    return e;
}

std::string Kind::refuses_input(const AdaptiveFilter&, Depth depth, int channels) {
    if (depth == Depth::u8 && channels == 1) return {};
    return "needs an 8-bit 1-channel image (as cv::adaptiveThreshold; color:gray first), this one is " +
           std::to_string(channels) + "-channel " + depth_name(depth);
}

}  // namespace cbi
