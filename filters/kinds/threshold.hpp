#pragma once
// threshold:T[:MAXVAL[:TYPE]] = cv::threshold(src, dst, T, MAXVAL, TYPE),
// bit for bit, every channel alike. TYPE binary (default), binary_inv,
// trunc, tozero or tozero_inv; MAXVAL the depth's maximum when absent or
// empty (255, 65535; 1 for float). As OpenCV: on 8/16-bit images T is
// floored and MAXVAL rounded (to nearest even) and saturated, the
// comparison src > T is strict and exact in integers; float images compare
// and write in float. T beyond the depth's range acts as OpenCV's
// out-of-range cases do (every sample above, or none).
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "filters/kinds/args.hpp"
#include "filters/kinds/kind.hpp"
#include "filters/ops.hpp"

namespace cbi {

enum class ThresholdType : std::uint8_t { binary, binary_inv, trunc, tozero, tozero_inv };

struct ThresholdFilter {
    double thresh = 0;
    double maxval = 0;
    bool default_maxval = true;  // MAXVAL absent: the depth's maximum
    ThresholdType type = ThresholdType::binary;
    friend bool operator==(const ThresholdFilter&, const ThresholdFilter&) = default;
};

template <class T>
struct ThresholdOp : PerSampleOp<ThresholdOp<T>, T> {
    // The five types as one rule, its choices fixed per op (no switch per
    // sample, so CPU loops vectorise): above ? (keep_above ? src : hi) :
    // (keep_below ? src : lo).
    T thresh;        // integers: floor(T) clamped to [0, max] (all_above covers T < 0)
    bool all_above;  // integers: T < 0, every sample is above
    bool trunc_cmp;  // float trunc: above is !(src < T), as OpenCV's vector min(src, T)
                     // takes it (the second operand when equal or unordered: min(-0, +0) is +0)
    bool keep_above, keep_below;
    T hi, lo;  // what is written above / not above, unless kept

    CBI_HOST_DEVICE bool above(T v) const {
        if constexpr (std::is_same_v<T, float>)
            return trunc_cmp ? !(v < thresh) : v > thresh;
        else
            return all_above | (v > thresh);
    }
    CBI_HOST_DEVICE T sample(T v) const {
        const T a = keep_above ? v : hi, b = keep_below ? v : lo;
        return above(v) ? a : b;
    }
};

// The op's threshold, maxval and trunc value for a depth, as cv::threshold
// derives them (thresh.cpp: cvFloor(T), saturate_cast(cvRound(MAXVAL))).
template <class T>
ThresholdOp<T> threshold_op(const ThresholdFilter& f, const ImageView& src, const ImageView& dst);

template <>
struct FilterKind<ThresholdFilter> {
    static constexpr std::string_view name = "threshold", form = "threshold:T[:MAXVAL[:TYPE]]",
                                      params = "thresh maxval type";
    static constexpr std::string_view help =
        "src > T ? MAXVAL : 0 per sample; TYPE binary (default), binary_inv, trunc, tozero, tozero_inv; "
        "MAXVAL absent or empty: the depth's maximum (1 for float)";
    static constexpr std::string_view opencv = "cv::threshold(src, dst, T, MAXVAL, TYPE)";
    static constexpr Category category = Category::pointwise;
    static constexpr std::string_view examples[] = {"100.5", "0.25:200:binary_inv", "127::trunc", "40000::tozero",
                                                    "0.5:7:tozero_inv"};
    static constexpr KindDefault defaults[] = {
        // Not measured. One thread a pixel: the CUDA vec:N kernels take the
        // colour matrix and blend only (cuda/backend.cu launch_vec).
        {true, 0, kAnyDepth, 0, "naive tile:32x8 column:32"},
        {false, 0, kAnyDepth, 0, "naive"},
    };

    static ThresholdFilter parse(std::string_view a);
    static std::string print(const ThresholdFilter& f);
    static Footprint footprint(const ThresholdFilter&) { return {}; }
    template <class T>
    static ThresholdOp<T> op(const ThresholdFilter& f, const ImageView& src, const ImageView& dst) {
        return threshold_op<T>(f, src, dst);
    }
};

}  // namespace cbi
