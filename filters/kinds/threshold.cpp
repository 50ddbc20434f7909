#include "filters/kinds/threshold.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace cbi {
namespace {

struct TypeName {
    ThresholdType type;
    bool otsu;
    std::string_view name;
};
constexpr TypeName kTypes[] = {
    {ThresholdType::binary, false, "binary"},         {ThresholdType::binary_inv, false, "binary_inv"},
    {ThresholdType::trunc, false, "trunc"},           {ThresholdType::tozero, false, "tozero"},
    {ThresholdType::tozero_inv, false, "tozero_inv"}, {ThresholdType::binary, true, "otsu"},
    {ThresholdType::binary_inv, true, "otsu_inv"}};

}  // namespace

using Kind = FilterKind<ThresholdFilter>;

ThresholdFilter Kind::parse(std::string_view a) {
    const auto parts = args::split(a, ':');
    args::expect_fields(name, a, parts, 1, 3, "T[:MAXVAL[:TYPE]]");
    ThresholdFilter f;
    if (!args::parse_double(parts[0], f.thresh))
        args::invalid("threshold T '" + std::string(parts[0]) + "' is not a number (threshold:T[:MAXVAL[:TYPE]])");
    if (parts.size() >= 2 && !parts[1].empty()) {
        if (!args::parse_double(parts[1], f.maxval))
            args::invalid("threshold MAXVAL '" + std::string(parts[1]) +
                          "' is not a number (threshold:T[:MAXVAL[:TYPE]]; empty: the depth's maximum)");
        f.default_maxval = false;
    }
    if (parts.size() == 3) {
        const auto it =
            std::find_if(std::begin(kTypes), std::end(kTypes), [&](const TypeName& t) { return t.name == parts[2]; });
        if (it == std::end(kTypes))
            args::invalid("threshold type '" + std::string(parts[2]) +
                          "' must be binary, binary_inv, trunc, tozero, tozero_inv, otsu or otsu_inv "
                          "(threshold:T[:MAXVAL[:TYPE]])");
        f.type = it->type;
        f.otsu = it->otsu;
    }
    return f;
}

std::string Kind::print(const ThresholdFilter& f) {
    std::string s = args::number(f.thresh);
    if (f.type == ThresholdType::binary && !f.otsu) return f.default_maxval ? s : s + ":" + args::number(f.maxval);
    s += ":" + (f.default_maxval ? std::string() : args::number(f.maxval)) + ":";
    for (const TypeName& t : kTypes)
        if (t.type == f.type && t.otsu == f.otsu) s += t.name;
    return s;
}

std::string Kind::refuses_input(const ThresholdFilter& f, Depth depth, int channels) {
    if (!f.otsu || (depth == Depth::u8 && channels == 1)) return {};
    return "otsu needs an 8-bit 1-channel image (as cv::threshold with THRESH_OTSU; color:gray first), this one is " +
           std::to_string(channels) + "-channel " + depth_name(depth);
}

int otsu_level(const std::uint32_t (&hist)[kOtsuBins], double pixels) {
    return otsu_level_of(hist, pixels);
}

ThresholdFilter at_otsu_level(const ThresholdFilter& f, int level) {
    ThresholdFilter t = f;
    t.thresh = level;
    t.otsu = false;
    return t;
}

template <class T>
ThresholdOp<T> threshold_op(const ThresholdFilter& f, const ImageView& src, const ImageView& dst) {
    // The level depends on the whole input: the backends find it first and pass at_otsu_level's node.
    if (f.otsu) throw std::logic_error("an otsu threshold runs at its level (at_otsu_level)");
    ThresholdOp<T> op{{src, dst}, {}, false, false, false, false, {}, {}};
    T thresh{}, maxval{}, trunc{};
    if constexpr (std::is_same_v<T, float>) {
        thresh = static_cast<float>(f.thresh);
        maxval = f.default_maxval ? 1.f : static_cast<float>(f.maxval);
        trunc = thresh;
        op.trunc_cmp = f.type == ThresholdType::trunc;
    } else {
        // cv::threshold: ithresh = cvFloor(T); imaxval = saturate_cast<T>(cvRound(MAXVAL)). T is
        // clamped to [-1, max] first (the same comparisons; cvFloor of a value beyond int is undefined).
        constexpr double hi = static_cast<double>(T(~T(0)));
        const int t = static_cast<int>(std::floor(std::clamp(f.thresh, -1.0, hi)));
        op.all_above = t < 0;
        thresh = static_cast<T>(std::max(t, 0));
        maxval = static_cast<T>(f.default_maxval ? hi : std::nearbyint(std::clamp(f.maxval, 0.0, hi)));
        trunc = thresh;  // above T < 0 trunc writes 0, saturated
    }
    op.thresh = thresh;
    switch (f.type) {
        case ThresholdType::binary: op.hi = maxval, op.lo = T(0); break;
        case ThresholdType::binary_inv: op.hi = T(0), op.lo = maxval; break;
        case ThresholdType::trunc: op.hi = trunc, op.keep_below = true; break;
        case ThresholdType::tozero: op.keep_above = true, op.lo = T(0); break;
        case ThresholdType::tozero_inv: op.hi = T(0), op.keep_below = true; break;
    }
    return op;
}

template ThresholdOp<std::uint8_t> threshold_op(const ThresholdFilter&, const ImageView&, const ImageView&);
template ThresholdOp<std::uint16_t> threshold_op(const ThresholdFilter&, const ImageView&, const ImageView&);
template ThresholdOp<float> threshold_op(const ThresholdFilter&, const ImageView&, const ImageView&);

}  // namespace cbi
