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

using reference::compare;
using reference::Comparison;
using reference::cv_border;
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
