#pragma once
// Test support shared by the CPU and GPU suites: OpenCV reference outputs
// for every filter, random images, and comparisons with the documented
// tolerances (DESIGN.md section 3). On failure the images are written to
// the test's temp dir with the parameters in the file name.
#include <gtest/gtest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <tuple>
#include <variant>
#include <vector>

#include "filters/filter.hpp"
#include "pipeline/opencv.hpp"

namespace cbi::test {

// The samples folder: $CBI_SAMPLES_DIR when set (the GPU bundle sets it),
// else the source tree's.
inline std::string samples_dir() {
    const char* dir = std::getenv("CBI_SAMPLES_DIR");
    return dir && *dir ? dir : CBI_SAMPLES_DIR;
}

inline int cv_border(BorderMode m) {
    switch (m) {
        case BorderMode::reflect101: return cv::BORDER_REFLECT_101;
        case BorderMode::reflect: return cv::BORDER_REFLECT;
        case BorderMode::replicate: return cv::BORDER_REPLICATE;
        case BorderMode::constant: return cv::BORDER_CONSTANT;
        case BorderMode::wrap: return cv::BORDER_WRAP;
    }
    return cv::BORDER_DEFAULT;
}

// The filter test matrix shared by the CPU and GPU suites.
inline const char* const kFilters[] = {
    "blur:1",     "blur:3",      "blur:9",      "gaussian:3", "gaussian:5:1.2", "gaussian:9",
    "sobel:x:1",  "sobel:y:1",   "sobel:mag:3", "sobel:x:5",  "sobel:y:7",      "sobel:mag:7",
    "color:gray", "color:sepia", "color:ycrcb", "color:0.5,0.25,0.25,10,-0.2,1.1,0.1,-5,0.3,0.3,0.3,0"};
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
// tested separately).
template <std::size_t F, std::size_t D>
std::vector<std::tuple<const char*, Depth, int>> filter_matrix(const char* const (&filters)[F], const Depth (&depths)[D]) {
    std::vector<std::tuple<const char*, Depth, int>> all;
    for (const char* f : filters)
        for (const Depth d : depths)
            for (int c : {1, 3, 4})
                if (c != 1 || !std::holds_alternative<ColorFilter>(parse_filter(f))) all.emplace_back(f, d, c);
    return all;
}

// Random samples over the depth's whole range (floats in [-1, 2)), never all zeros.
inline cv::Mat random_image(int width, int height, int channels, Depth depth, unsigned seed) {
    cv::Mat m(height, width, cv_type(depth, channels));
    cv::RNG rng(seed);
    if (depth == Depth::u8) rng.fill(m, cv::RNG::UNIFORM, 0, 256);
    else if (depth == Depth::u16) rng.fill(m, cv::RNG::UNIFORM, 0, 65536);
    else rng.fill(m, cv::RNG::UNIFORM, -1.0, 2.0);
    return m;
}

// Applies an OpenCV stencil with our border. Constant borders go through
// cv::copyMakeBorder, since cv::blur/GaussianBlur/Sobel take no value, and
// so does wrap, which OpenCV's filter engine refuses (columnBorderType !=
// BORDER_WRAP) but copyMakeBorder implements.
template <class F>
cv::Mat with_border(const cv::Mat& src, const Border& border, int radius, F&& filter) {
    if (border.mode != BorderMode::constant && border.mode != BorderMode::wrap) {
        cv::Mat out;
        filter(src, out, cv_border(border.mode));
        return out;
    }
    cv::Mat padded, out;
    cv::copyMakeBorder(src, padded, radius, radius, radius, radius, cv_border(border.mode),
                       cv::Scalar::all(border.value));
    filter(padded, out, cv::BORDER_REPLICATE);  // every tap of the centre lies inside the padding
    return out(cv::Rect(radius, radius, src.cols, src.rows)).clone();
}

// Reference rows R', G', B' on (R, G, B) applied to a BGR(A) Mat.
inline cv::Mat transform_rgb(const cv::Mat& src, const double rgb[3][4]) {
    cv::Mat m(3, 4, CV_32F);
    for (int r = 0; r < 3; ++r) {  // to storage order: rows and columns B, G, R
        for (int c = 0; c < 3; ++c) m.at<float>(r, c) = static_cast<float>(rgb[2 - r][2 - c]);
        m.at<float>(r, 3) = static_cast<float>(rgb[2 - r][3]);
    }
    cv::Mat bgr, out;
    if (src.channels() == 4) cv::cvtColor(src, bgr, cv::COLOR_BGRA2BGR); else bgr = src;
    cv::transform(bgr, out, m);
    return out;
}

inline cv::Mat keep_alpha(const cv::Mat& src, const cv::Mat& color3) {
    if (src.channels() != 4) return color3;
    std::vector<cv::Mat> planes, alpha;
    cv::split(color3, planes);
    cv::split(src, alpha);
    planes.push_back(alpha[3]);
    cv::Mat out;
    cv::merge(planes, out);
    return out;
}

// What OpenCV computes for this node (DESIGN.md section 3).
inline cv::Mat opencv_reference(const Node& node, const cv::Mat& src) {
    const int depth = src.depth();
    if (const auto* f = std::get_if<BoxFilter>(&node.filter))
        return with_border(src, node.border, f->ksize / 2, [&](const cv::Mat& s, cv::Mat& d, int b) {
            cv::blur(s, d, {f->ksize, f->ksize}, {-1, -1}, b);
        });
    if (const auto* f = std::get_if<GaussianFilter>(&node.filter))
        return with_border(src, node.border, f->ksize / 2, [&](const cv::Mat& s, cv::Mat& d, int b) {
            cv::GaussianBlur(s, d, {f->ksize, f->ksize}, f->sigma, f->sigma, b);
        });
    if (const auto* f = std::get_if<SobelFilter>(&node.filter)) {
        const int radius = f->ksize == 1 ? 1 : f->ksize / 2;
        return with_border(src, node.border, radius, [&](const cv::Mat& s, cv::Mat& d, int b) {
            cv::Mat gx, gy, v;
            if (f->mode != SobelMode::y) cv::Sobel(s, gx, CV_32F, 1, 0, f->ksize, 1, 0, b);
            if (f->mode != SobelMode::x) cv::Sobel(s, gy, CV_32F, 0, 1, f->ksize, 1, 0, b);
            if (f->mode == SobelMode::x) v = cv::abs(gx);
            else if (f->mode == SobelMode::y) v = cv::abs(gy);
            else {
                // cv::magnitude wants 1-channel planes; sqrt(gx^2 + gy^2) per channel.
                cv::Mat g2;
                cv::multiply(gx, gx, v);
                cv::multiply(gy, gy, g2);
                cv::sqrt(v + g2, v);
            }
            v.convertTo(d, depth);
        });
    }
    const auto& c = std::get<ColorFilter>(node.filter);
    cv::Mat out;
    switch (c.preset) {
        case ColorPreset::gray:
            cv::cvtColor(src, out, src.channels() == 4 ? cv::COLOR_BGRA2GRAY : cv::COLOR_BGR2GRAY);
            return out;
        case ColorPreset::ycrcb: {
            cv::Mat bgr;
            if (src.channels() == 4) cv::cvtColor(src, bgr, cv::COLOR_BGRA2BGR); else bgr = src;
            cv::cvtColor(bgr, out, cv::COLOR_BGR2YCrCb);
            return keep_alpha(src, out);
        }
        case ColorPreset::sepia: {
            const double sepia[3][4] = {{.393, .769, .189, 0}, {.349, .686, .168, 0}, {.272, .534, .131, 0}};
            return keep_alpha(src, transform_rgb(src, sepia));
        }
        case ColorPreset::custom: break;
    }
    double m[3][4];
    for (int r = 0; r < 3; ++r)
        for (int k = 0; k < 4; ++k) m[r][k] = c.rgb_matrix[r * 4 + k];
    return keep_alpha(src, transform_rgb(src, m));
}

// Largest difference, and whether it is within tolerance: integers within
// `int_tol`; floats within rel * max(|ref|, scale), where scale is the peak
// magnitude of the reference and the input, so values that cancel to near
// zero (Sobel on a flat image) are judged against the data's scale
// (see output_scale).
struct Comparison {
    bool ok = true;
    double max_diff = 0;
    std::string where;
};

inline Comparison compare(const cv::Mat& got, const cv::Mat& ref, double int_tol, double rel, double input_peak = 0) {
    Comparison c;
    if (got.size() != ref.size() || got.type() != ref.type()) {
        c.ok = false;
        c.where = "geometry " + cv::typeToString(got.type()) + " vs " + cv::typeToString(ref.type());
        return c;
    }
    cv::Mat g, r;
    got.convertTo(g, CV_64F);
    ref.convertTo(r, CV_64F);
    g = g.reshape(1);
    r = r.reshape(1);
    double peak = 0;
    cv::minMaxLoc(cv::abs(r), nullptr, &peak);
    peak = std::max(peak, input_peak);
    const bool is_float = got.depth() == CV_32F;
    for (int y = 0; y < r.rows; ++y)
        for (int x = 0; x < r.cols; ++x) {
            const double a = g.at<double>(y, x), b = r.at<double>(y, x);
            const double d = std::abs(a - b);
            const double tol = is_float ? rel * std::max(std::abs(b), peak) : int_tol;
            if (!(d <= tol)) {  // NaN fails
                if (c.ok) c.where = "first at sample (" + std::to_string(x) + "," + std::to_string(y) + "): got " +
                                    std::to_string(a) + " want " + std::to_string(b);
                c.ok = false;
            }
            c.max_diff = std::max(c.max_diff, d);
        }
    return c;
}

inline double peak_magnitude(const cv::Mat& m) {
    double lo = 0, hi = 0;
    cv::minMaxLoc(m.reshape(1), &lo, &hi);
    return std::max(std::abs(lo), std::abs(hi));
}

// The magnitude a node's output can reach: the input's peak times the
// kernel's L1 gain (Sobel 7x7: 20 * 64). Float errors scale with it.
inline double output_scale(const Node& node, const cv::Mat& src) {
    double gain = 1;
    if (const auto* f = std::get_if<SobelFilter>(&node.filter)) {
        const SobelKernels k = sobel_kernels(f->ksize);
        double d = 0, s = 0;
        for (int i = 0; i < k.deriv_size; ++i) d += std::abs(k.deriv[i]);
        for (int i = 0; i < k.smooth_size; ++i) s += std::abs(k.smooth[i]);
        gain = d * s;
    }
    return gain * peak_magnitude(src);
}

// Saves the images of a failed comparison for inspection; returns where.
inline std::string dump_failure(const std::string& name, const cv::Mat& got, const cv::Mat& ref) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / "cbi-test-failures";
    fs::create_directories(dir);
    std::string safe = name;
    for (char& ch : safe)
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '.') ch = '_';
    const auto ext = got.depth() == CV_32F ? ".tiff" : ".png";
    try {
        cv::imwrite((dir / (safe + "-got" + ext)).string(), got);
        cv::imwrite((dir / (safe + "-want" + ext)).string(), ref);
    } catch (const cv::Exception&) {
        return "(could not save images)";
    }
    return (dir / safe).string() + "-{got,want}" + ext;
}

}  // namespace cbi::test
