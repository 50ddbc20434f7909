#pragma once
// Test support shared by the CPU and GPU suites: the filter matrices and
// their GoogleTest parameters, on top of apps/reference/opencv_reference.hpp
// (OpenCV reference outputs for every filter, random images, comparisons
// with the documented tolerances, failure dumps), which cbi-bench uses too.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "apps/reference/opencv_reference.hpp"
#include "filters/filter.hpp"
#include "pipeline/opencv.hpp"

namespace cbi::test {

// The samples folder: $CBI_SAMPLES_DIR when set (the GPU bundle sets it),
// else the source tree's.
inline std::string samples_dir() {
    const char* dir = std::getenv("CBI_SAMPLES_DIR");
    return dir && *dir ? dir : CBI_SAMPLES_DIR;
}

// 8-bit 1-channel images for Otsu's threshold, made in memory (the GPU
// host decodes no files): odd sizes, and the method's edge cases: one value
// (no split, level 0), two values (every level between them ties: the first
// is kept), adjacent values, a class below FLT_EPSILON of the pixels
// (skipped), every value once, 1x1; then random and two-humped images.
inline std::vector<std::pair<std::string, cv::Mat>> otsu_images() {
    std::vector<std::pair<std::string, cv::Mat>> out;
    out.emplace_back("constant 0", cv::Mat(23, 37, CV_8UC1, cv::Scalar(0)));
    out.emplace_back("constant 100, 1x1", cv::Mat(1, 1, CV_8UC1, cv::Scalar(100)));
    out.emplace_back("constant 255", cv::Mat(7, 31, CV_8UC1, cv::Scalar(255)));
    cv::RNG rng(47);
    const auto two_valued = [&](int w, int h, int a, int b, double share_b) {
        cv::Mat m(h, w, CV_8UC1, cv::Scalar(a));
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x)
                if (rng.uniform(0.0, 1.0) < share_b) m.at<std::uint8_t>(y, x) = static_cast<std::uint8_t>(b);
        return m;
    };
    out.emplace_back("two values 30 200", two_valued(57, 33, 30, 200, 0.3));
    out.emplace_back("two values 0 255, half", two_valued(64, 1, 0, 255, 0.5));
    out.emplace_back("two values 100 101", two_valued(41, 29, 100, 101, 0.6));
    out.emplace_back("two values 254 255", two_valued(1, 17, 254, 255, 0.5));
    cv::Mat one_bright(17, 63, CV_8UC1, cv::Scalar(0));
    one_bright.at<std::uint8_t>(8, 40) = 255;
    out.emplace_back("one bright pixel", one_bright);
    // 1 pixel in 9e6, below FLT_EPSILON (1.19e-7): OpenCV skips that class.
    cv::Mat lone(2999, 3001, CV_8UC1, cv::Scalar(10));
    lone.at<std::uint8_t>(1500, 1500) = 250;
    out.emplace_back("a class below FLT_EPSILON", lone);
    cv::Mat three = two_valued(99, 51, 20, 120, 0.4);
    for (int y = 0; y < three.rows; y += 3) three.row(y).setTo(cv::Scalar(240));
    out.emplace_back("three values", three);
    cv::Mat ramp(3, 511, CV_8UC1);
    for (int x = 0; x < ramp.cols; ++x) ramp.col(x).setTo(cv::Scalar(x / 2));
    out.emplace_back("every value alike", ramp);
    out.emplace_back("random 1x1", reference::random_image(1, 1, 1, Depth::u8, 3));
    out.emplace_back("random 17x1", reference::random_image(17, 1, 1, Depth::u8, 4));
    out.emplace_back("random 257x129", reference::random_image(257, 129, 1, Depth::u8, 5));
    out.emplace_back("random 1000x3", reference::random_image(1000, 3, 1, Depth::u8, 6));
    for (const auto& [w, h, m1, m2, sd] :
         {std::tuple{333, 97, 70.0, 180.0, 20.0}, std::tuple{1999, 1001, 40.0, 90.0, 25.0},
          std::tuple{4097, 3, 128.0, 140.0, 60.0}}) {
        cv::Mat m(h, w, CV_8UC1);
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x)
                m.at<std::uint8_t>(y, x) =
                    cv::saturate_cast<std::uint8_t>(rng.gaussian(sd) + (rng.uniform(0, 3) == 0 ? m2 : m1));
        out.emplace_back("two humps " + std::to_string(w) + "x" + std::to_string(h), m);
    }
    return out;
}

using reference::compare;
using reference::Comparison;
using reference::dump_failure;
using reference::keep_alpha;
using reference::peak_magnitude;
using reference::random_image;
using reference::transform_rgb;

// The filter test matrix shared by the CPU and GPU suites: every kind's
// examples (FilterKind<F>::examples), as pipeline stages "NAME:ARGS".
inline const std::vector<const char*>& all_filters() {
    static const std::vector<std::string> texts = [] {
        std::vector<std::string> out;
        for_each_kind([&]<class F>(std::type_identity<F>) {
            for (std::string_view args : FilterKind<F>::examples)
                out.push_back(std::string(FilterKind<F>::name) + (args.empty() ? "" : ":") + std::string(args));
        });
        return out;
    }();
    static const std::vector<const char*> pointers = [] {
        std::vector<const char*> out;
        for (const std::string& t : texts) out.push_back(t.c_str());
        return out;
    }();
    return pointers;
}
inline const std::vector<const char*>& kFilters = all_filters();
inline const char* const kBorders[] = {"reflect101", "reflect", "replicate", "constant", "constant:7", "wrap"};
inline const cv::Size kSizes[] = {{1, 1}, {1, 17}, {17, 1}, {31, 7}, {257, 129}, {1000, 3}};
inline const Depth kDepths[] = {Depth::u8, Depth::u16, Depth::f32};

// The schedules the filter matrices sweep: every registered example, or the
// comma-separated list in CBI_TEST_SCHEDULES (the GPU host's sanitizer runs
// use it to fit a device call).
inline std::vector<ScheduleSpec> matrix_schedules() {
    const char* only = std::getenv("CBI_TEST_SCHEDULES");
    if (only == nullptr || *only == '\0') return example_schedules();
    std::vector<ScheduleSpec> out;
    std::string_view rest = only;
    while (!rest.empty()) {
        const auto comma = rest.find(',');
        out.push_back(parse_schedule(rest.substr(0, comma)));
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
    return out;
}

using MatrixParam = std::tuple<const char*, Depth, int>;

// gtest names such as "gaussian_5_1_2_8u_c3".
inline std::string matrix_name(const ::testing::TestParamInfo<MatrixParam>& info) {
    std::string name = std::string(std::get<0>(info.param)) + "_" + depth_name(std::get<1>(info.param)) + "_c" +
                       std::to_string(std::get<2>(info.param));
    for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return name;
}

// (filter, depth, channels) for every filter x depth x {1, 3, 4} channels,
// less the combinations a filter refuses (colour matrices on 1 channel,
// tested separately; refuses_input: adaptive's 8-bit 1-channel).
template <std::size_t D>
std::vector<std::tuple<const char*, Depth, int>> filter_matrix(const std::vector<const char*>& filters,
                                                               const Depth (&depths)[D]) {
    std::vector<std::tuple<const char*, Depth, int>> all;
    for (const char* f : filters)
        for (const Depth d : depths)
            for (int c : {1, 3, 4})
                if ((c != 1 || !std::holds_alternative<ColorFilter>(parse_filter(f))) &&
                    refuses_input(parse_filter(f), d, c).empty())  // adaptive: 8-bit 1-channel (tested apart)
                    all.emplace_back(f, d, c);
    return all;
}

// How far an integer output may be from OpenCV's: 1, but 2 for the 16-bit
// Gaussian with K > 9, where OpenCV 4.6 runs a bit-exact fixed-point path
// (ufixedpoint32) that cbi's float weights do not reproduce
// (docs/filters.md#gaussian); 0 for the median, which is exact.
inline double int_tolerance(const FilterRun& node, Depth depth) {
    if (std::holds_alternative<MedianFilter>(node.filter)) return 0.0;
    // 8- and 16-bit gray compute cv::cvtColor's fixed point: bit for bit.
    const auto* color = std::get_if<ColorFilter>(&node.filter);
    if (color && color->preset == ColorPreset::gray) return 0.0;
    const auto* g = std::get_if<GaussianFilter>(&node.filter);
    return g && depth == Depth::u16 && g->ksize > 9 ? 2.0 : 1.0;
}

// How far a float output may be from OpenCV's, relative to the data's
// scale: 1e-5, but 1e-4 for bilateral, whose OpenCV reference interpolates
// exp in a table over the image's range (docs/filters.md#bilateral).
inline double float_tolerance(const FilterRun& node) {
    return std::holds_alternative<BilateralFilter>(node.filter) ? 1e-4 : 1e-5;
}

// What OpenCV computes for this node (its filter and border).
inline cv::Mat opencv_reference(const FilterRun& node, const cv::Mat& src) {
    return reference::opencv_reference(node.filter, node.border, src);
}

// The magnitude the node's output can reach (reference::output_scale).
inline double output_scale(const FilterRun& node, const cv::Mat& src) {
    return reference::output_scale(node.filter, src);
}

}  // namespace cbi::test
