// The per-pixel toolbox kinds (issue 47): threshold, scale, gamma, hsv,
// hls against OpenCV bit for bit where OpenCV's path is exact, at edge
// values and on every 8-bit colour; the host tables against the per-sample
// arithmetic the GPU runs; bad arguments. The test matrix
// (test_filters_cpu) covers them on random images within the usual
// tolerances.
#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "filters/cpu/backend.hpp"
#include "filters/error.hpp"
#include "pipeline/executor.hpp"
#include "reference.hpp"

namespace cbi {
namespace {

using test::compare;
using test::random_image;

cv::Mat run_cpu(const std::string& filter, const cv::Mat& src, const char* schedule = "naive") {
    const FilterRun node{parse_filter(filter), Border{}, parse_schedule(schedule)};
    const int channels = output_channels(node.filter, src.channels());
    cv::Mat dst(src.size(), CV_MAKETYPE(src.depth(), channels));
    std::memset(dst.data, 0xA5, dst.total() * dst.elemSize());  // poison: every sample must be written
    run_node_cpu(node, view_of(src), view_of(dst));
    return dst;
}

cv::Mat reference_of(const std::string& filter, const cv::Mat& src) {
    return reference::opencv_reference(parse_filter(filter), Border{}, src);
}

// Samples that differ (cv::norm would hide a NaN).
int differences(const cv::Mat& a, const cv::Mat& b) {
    if (a.size() != b.size() || a.type() != b.type()) return -1;
    if (a.depth() == CV_32F) {
        int n = 0;
        const cv::Mat a1 = a.reshape(1), b1 = b.reshape(1);
        for (int y = 0; y < a1.rows; ++y)
            for (int x = 0; x < a1.cols; ++x) n += std::memcmp(&a1.at<float>(y, x), &b1.at<float>(y, x), 4) != 0;
        return n;
    }
    return cv::countNonZero(a.reshape(1) != b.reshape(1));
}

// Every 8- or 16-bit value once, in a 1-channel image (plus random floats).
cv::Mat every_value(Depth depth) {
    if (depth == Depth::u8) {
        cv::Mat m(1, 256, CV_8UC1);
        for (int i = 0; i < 256; ++i) m.at<std::uint8_t>(i) = static_cast<std::uint8_t>(i);
        return m;
    }
    if (depth == Depth::u16) {
        cv::Mat m(256, 256, CV_16UC1);
        for (int i = 0; i < 65536; ++i) m.at<std::uint16_t>(i) = static_cast<std::uint16_t>(i);
        return m;
    }
    cv::Mat m = random_image(300, 7, 1, Depth::f32, 5);
    const float specials[] = {0.f, -0.f, 1.f, 0.5f, -1.f, 1e-30f, 255.f, 3e38f};
    for (int i = 0; i < 8; ++i) m.at<float>(0, i) = specials[i];
    return m;
}

TEST(Threshold, EveryTypeAtEdgeValuesEqualsOpenCVBitForBit) {
    const char* types[] = {"binary", "binary_inv", "trunc", "tozero", "tozero_inv"};
    const double thresholds[] = {-1e9,  -1,  -0.5,  0,       0.25,  0.999, 1,     100.7, 254,
                                 254.5, 255, 255.5, 40000.5, 65534, 65535, 65536, 1e9};
    const char* maxvals[] = {"", "200", "127.5", "128.5", "300", "-5", "0.5", "70000"};
    for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32}) {
        const cv::Mat src = every_value(depth);
        for (const char* type : types)
            for (const double t : thresholds)
                for (const char* maxval : maxvals) {
                    const std::string text = "threshold:" + args::number(t) + ":" + maxval + ":" + type;
                    SCOPED_TRACE(text + " " + depth_name(depth));
                    EXPECT_EQ(differences(run_cpu(text, src), reference_of(text, src)), 0);
                }
    }
}

TEST(Threshold, RoundTripsAndDefaults) {
    for (const char* text : {"threshold:100", "threshold:100.5:200", "threshold:1::trunc", "threshold:-3:7:tozero_inv",
                             "threshold:0:0:binary_inv"})
        EXPECT_EQ(to_string(parse_filter(text)), text);
    EXPECT_EQ(to_string(parse_filter("threshold:5::binary")), "threshold:5");
    EXPECT_EQ(to_string(parse_filter("threshold:5:255:binary")), "threshold:5:255");
    // MAXVAL absent: the depth's maximum (1 for float).
    const cv::Mat f(1, 2, CV_32FC1, cv::Scalar(2.f));
    EXPECT_EQ(run_cpu("threshold:1", f).at<float>(0), 1.f);
    const cv::Mat u(1, 2, CV_16UC1, cv::Scalar(9));
    EXPECT_EQ(run_cpu("threshold:1", u).at<std::uint16_t>(0), 65535);
}

TEST(Scale, EveryValueEqualsConvertToBitForBit) {
    const double pairs[][2] = {{1.5, -20.25}, {0.7, 0},      {-1, 255},      {1.1, 0.3}, {0.5, 0.5},
                               {3.3, -0.5},   {1e-3, 127.5}, {-2.75, 70000}, {1, 0},     {0.1, 0.1}};
    for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32}) {
        const cv::Mat src = every_value(depth);
        for (const auto& p : pairs) {
            const std::string text = "scale:" + args::number(p[0]) + ":" + args::number(p[1]);
            SCOPED_TRACE(text + " " + depth_name(depth));
            EXPECT_EQ(differences(run_cpu(text, src), reference_of(text, src)), 0);
        }
    }
    // The host table of 8-bit equals the per-sample arithmetic the GPU runs.
    const ImageView none{};
    for (const auto& p : pairs) {
        const auto op = FilterKind<ScaleFilter>::op<std::uint8_t>(ScaleFilter{p[0], p[1]}, none, none);
        for (int i = 0; i < 256; ++i) ASSERT_EQ(op.table[i], op.compute(static_cast<std::uint8_t>(i))) << i;
    }
}

TEST(Gamma, PerSampleArithmeticEqualsTheHostTable) {
    const ImageView none{};
    for (const double g : {0.3, 0.45, 1.0, 1.8, 2.2, 7.0, 1e-3, 1e3}) {
        SCOPED_TRACE(g);
        const auto op8 = FilterKind<GammaFilter>::op<std::uint8_t>(GammaFilter{g}, none, none);
        const auto op16 = FilterKind<GammaFilter>::op<std::uint16_t>(GammaFilter{g}, none, none);
        for (int i = 0; i < 256; ++i) {
            const auto want = cv::saturate_cast<std::uint8_t>(255.0 * std::pow(i / 255.0, 1 / g));
            ASSERT_EQ(op8.table[i], want) << i;
            ASSERT_EQ(op8.compute(static_cast<std::uint8_t>(i)), want) << i;
        }
        for (int i = 0; i < 65536; ++i)
            ASSERT_EQ(op16.compute(static_cast<std::uint16_t>(i)),
                      cv::saturate_cast<std::uint16_t>(65535.0 * std::pow(i / 65535.0, 1 / g)))
                << i;
        for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32}) {
            const cv::Mat src = every_value(depth);
            const std::string text = "gamma:" + args::number(g);
            EXPECT_EQ(differences(run_cpu(text, src), reference_of(text, src)), 0) << depth_name(depth);
        }
    }
    // Float: no clamping above 1; samples <= 0 unchanged.
    cv::Mat f(1, 4, CV_32FC1);
    f.at<float>(0) = 4.f, f.at<float>(1) = -0.25f, f.at<float>(2) = 0.f, f.at<float>(3) = 0.25f;
    const cv::Mat got = run_cpu("gamma:0.5", f);
    EXPECT_EQ(got.at<float>(0), 16.f);
    EXPECT_EQ(got.at<float>(1), -0.25f);
    EXPECT_EQ(got.at<float>(2), 0.f);
    EXPECT_EQ(got.at<float>(3), 0.0625f);
}

// Every 8-bit colour, as a 4096 x 4096 BGR image.
cv::Mat every_color() {
    cv::Mat m(4096, 4096, CV_8UC3);
    for (int i = 0; i < 1 << 24; ++i) {
        auto* p = m.ptr<std::uint8_t>() + 3 * static_cast<std::size_t>(i);
        p[0] = static_cast<std::uint8_t>(i), p[1] = static_cast<std::uint8_t>(i >> 8),
        p[2] = static_cast<std::uint8_t>(i >> 16);
    }
    return m;
}

TEST(Hsv, EveryEightBitColourEqualsOpenCV) {
    const cv::Mat all = every_color();
    cv::Mat want;
    cv::cvtColor(all, want, cv::COLOR_BGR2HSV);
    EXPECT_EQ(differences(run_cpu("hsv", all), want), 0);  // bit for bit: OpenCV's integer path
    cv::cvtColor(all, want, cv::COLOR_BGR2HLS);
    const cv::Mat got = run_cpu("hls", all);
    const auto r = compare(got, want, 1, 0);
    EXPECT_TRUE(r.ok) << r.where;
    // OpenCV's float path as its vector loop runs it: equal but for its
    // scalar tails (8-pixel ends of each 32-pixel block), which round H
    // twice where the loop fuses.
    EXPECT_LE(differences(got, want), 1 << 10) << "of " << (1 << 24) * 3;
}

TEST(Hsv, AlphaIsKeptAndGrayIsReadAsRgb) {
    const cv::Mat bgra = random_image(33, 5, 4, Depth::u8, 3);
    for (const char* kind : {"hsv", "hls"}) {
        const cv::Mat got = run_cpu(kind, bgra);
        ASSERT_EQ(got.channels(), 4);
        std::vector<cv::Mat> a, b;
        cv::split(got, a);
        cv::split(bgra, b);
        EXPECT_EQ(differences(a[3], b[3]), 0);
        const cv::Mat gray = random_image(17, 3, 1, Depth::u8, 4);
        const cv::Mat out = run_cpu(kind, gray);
        ASSERT_EQ(out.channels(), 3);
        cv::Mat bgr, want;
        cv::cvtColor(gray, bgr, cv::COLOR_GRAY2BGR);
        cv::cvtColor(bgr, want, std::string(kind) == "hsv" ? cv::COLOR_BGR2HSV : cv::COLOR_BGR2HLS);
        EXPECT_EQ(differences(out, want), 0) << kind;
    }
}

TEST(Toolbox, EverySchedulesGivesTheNaiveResult) {
    const cv::Mat src = random_image(37, 11, 3, Depth::u8, 8);
    for (const char* f : {"threshold:100:200:trunc", "scale:1.5:-3", "gamma:2.2", "hsv", "hls"}) {
        const cv::Mat want = run_cpu(f, src);
        for (const ScheduleSpec& s : example_schedules()) {
            if (!supports(s, parse_filter(f))) continue;
            EXPECT_EQ(differences(run_cpu(f, src, s.to_string().c_str()), want), 0) << f << " " << s.to_string();
        }
    }
}

TEST(SepFilter2D, EveryScheduleGivesTheNaiveResultBitExactly) {
    unsigned seed = 40;
    // The 8-bit tile schedules sum exact taps in integers: int16 columns (the
    // first three), int32 columns (the next two), float sums (the last).
    for (const char* f :
         {"sepfilter2d:1,2,1;-1,0,1", "sepfilter2d:0.5,0.5;1,1,1,1", "sepfilter2d:1,-2,3,-2,1;2",
          "sepfilter2d:1,6,15,20,15,6,1;0.015625,0.09375,0.234375,0.3125,0.234375,0.09375,0.015625",
          "sepfilter2d:1,6,15,20,15,6,1;-1,-4,-5,0,5,4,1", "sepfilter2d:0.1,0.2,0.4,0.2,0.1;0.3,0.4,0.3"})
        for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32})
            for (const cv::Size size : {cv::Size{1, 1}, cv::Size{37, 23}, cv::Size{5, 300}}) {
                const cv::Mat src = random_image(size.width, size.height, 3, depth, seed++);
                const cv::Mat want = run_cpu(f, src);
                for (const ScheduleSpec& s : example_schedules()) {
                    if (!supports(s, parse_filter(f))) continue;
                    EXPECT_EQ(differences(run_cpu(f, src, s.to_string().c_str()), want), 0)
                        << f << " " << s.to_string() << " " << depth_name(depth) << " " << size;
                }
            }
}

TEST(SepFilter2D, EqualsOpenCVOnEveryBorderAndMatchesAWideKernel) {
    // 255 taps a side, within 1 of OpenCV on 8-bit.
    std::string wide = "sepfilter2d:";
    for (int i = 0; i < 255; ++i) wide += (i ? "," : "") + std::to_string(1 + i % 7);
    wide += ";";
    for (int i = 0; i < 31; ++i) wide += (i ? "," : "") + args::number(0.001 * (i - 15));
    const cv::Mat src = random_image(300, 40, 1, Depth::u8, 2);
    for (const char* border : {"reflect101", "reflect", "replicate", "constant:9", "wrap"}) {
        const FilterRun node{parse_filter(wide), parse_border(border), ScheduleSpec{}};
        cv::Mat got(src.size(), src.type());
        run_node_cpu(node, view_of(src), view_of(got));
        const auto r = compare(got, reference::opencv_reference(node.filter, node.border, src), 1, 0);
        EXPECT_TRUE(r.ok) << border << ": " << r.where;
    }
    EXPECT_EQ(to_string(parse_filter("sepfilter2d:1,2,1;-1,0,1.5")), "sepfilter2d:1,2,1;-1,0,1.5");
}

// Through the executor: rank-1 kernels run as the sepfilter2d they expand to.
cv::Mat run_sequence_cpu(const std::string& filter, const std::string& border, const cv::Mat& src,
                         const char* schedule = nullptr) {
    const FilterRun node{parse_filter(filter), parse_border(border),
                         schedule ? parse_schedule(schedule) : ScheduleSpec{}};
    const FilterRun nodes[] = {node};
    return as_mat(run_sequence(nodes, view_of(src), RunOptions{}).view()).clone();
}

std::string random_kernel(int w, int h, unsigned seed) {
    cv::RNG rng(seed);
    std::string s = "filter2d:";
    for (int r = 0; r < h; ++r)
        for (int c = 0; c < w; ++c)
            s += (c ? "," : r ? ";" : "") + args::number(std::round(rng.uniform(-1.0, 1.0) * 64) / 64);
    return s;
}

TEST(Filter2D, KernelsOfEveryShapeEqualOpenCV) {
    unsigned seed = 60;
    // 2-D kernels up to 32x32 (OpenCV's DFT path from 50 or 130 taps), even sides, one row, one column.
    for (const cv::Size k : {cv::Size{3, 3}, cv::Size{2, 2}, cv::Size{4, 1}, cv::Size{1, 5}, cv::Size{7, 7},
                             cv::Size{15, 15}, cv::Size{6, 9}, cv::Size{32, 32}})
        for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32}) {
            const std::string f = random_kernel(k.width, k.height, seed++);
            const cv::Mat src = random_image(97, 41, 3, depth, seed++);
            for (const char* border : {"reflect101", "replicate", "constant:3", "wrap", "reflect"}) {
                const cv::Mat got = run_sequence_cpu(f, border, src);
                const cv::Mat want = reference::opencv_reference(parse_filter(f), parse_border(border), src);
                const auto r = compare(got, want, 1, 1e-4, reference::output_scale(parse_filter(f), src));
                EXPECT_TRUE(r.ok) << k << " " << depth_name(depth) << " " << border << ": " << r.where << " max "
                                  << r.max_diff;
            }
        }
}

TEST(Filter2D, RankOneKernelsRunAsSepFilter2DUpTo255) {
    EXPECT_EQ(expansion_of(parse_filter("filter2d:1,2,1;2,4,2;1,2,1")).steps.size(), 1u);
    EXPECT_EQ(expansion_of(parse_filter("filter2d:-1,0,1;-2,0,2;-1,0,1")).steps.size(), 1u);  // Sobel x
    EXPECT_TRUE(expansion_of(parse_filter("filter2d:0,-1,0;-1,5,-1;0,-1,0")).steps.empty());
    // 255x255 of rank 1 (a box): parsed, run separably, equal to OpenCV.
    std::string box = "filter2d:";
    for (int r = 0; r < 255; ++r)
        for (int c = 0; c < 255; ++c) box += (c ? "," : r ? ";" : "") + std::string(c % 2 ? "0.5" : "1");
    const cv::Mat src = random_image(64, 300, 1, Depth::f32, 3);
    const cv::Mat got = run_sequence_cpu(box, "reflect101", src);
    const cv::Mat want = reference::opencv_reference(parse_filter(box), Border{}, src);
    const auto r = compare(got, want, 1, 1e-4, reference::output_scale(parse_filter(box), src));
    EXPECT_TRUE(r.ok) << r.where << " max " << r.max_diff;
    // 63x63 of full rank: cv::filter2D on the naive schedule (over kDirectFilter2DTaps), equal to OpenCV.
    const std::string k63 = random_kernel(63, 63, 5), k63x20 = random_kernel(20, 63, 6);
    for (const Depth depth : {Depth::u8, Depth::f32})
        for (const std::string& f : {k63, k63x20}) {
            const cv::Mat square = random_image(90, 70, 3, depth, 7);
            for (const char* border : {"reflect101", "constant:3"}) {
                const cv::Mat got63 = run_sequence_cpu(f, border, square);
                const cv::Mat want63 = reference::opencv_reference(parse_filter(f), parse_border(border), square);
                const auto r63 = compare(got63, want63, 1, 1e-4, reference::output_scale(parse_filter(f), square));
                EXPECT_TRUE(r63.ok) << depth_name(depth) << " " << border << ": " << r63.where << " max "
                                    << r63.max_diff;
            }
        }
    EXPECT_EQ(to_string(parse_filter("filter2d:0,-1,0;-1,5,-1;0,-1,0.5")), "filter2d:0,-1,0;-1,5,-1;0,-1,0.5");
}

// Kernels of full rank past 63x63 up to 255x255: on the naive schedule
// OpenCV's cv::filter2D (its DFT), equal to OpenCV's result on every border
// (constant and wrap pad first, as the reference does). An index-map
// schedule sums directly: within 1 (float: 1e-4 of the scale) of OpenCV.
TEST(Filter2D, FullRankKernelsUpTo255x255EqualOpenCV) {
    unsigned seed = 90;
    for (const cv::Size k : {cv::Size{64, 64}, cv::Size{101, 70}, cv::Size{255, 255}}) {
        const std::string f = random_kernel(k.width, k.height, seed++);
        EXPECT_TRUE(expansion_of(parse_filter(f)).steps.empty()) << k;
        for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32})
            for (const int channels : {1, 3, 4}) {
                const cv::Mat src = random_image(k.width == 255 ? 300 : 131, 97, channels, depth, seed++);
                for (const char* border : {"reflect101", "replicate", "constant:3", "wrap", "reflect", "constant"}) {
                    const cv::Mat want = reference::opencv_reference(parse_filter(f), parse_border(border), src);
                    const cv::Mat got = run_sequence_cpu(f, border, src);
                    EXPECT_EQ(differences(got, want), 0) << k << " " << depth_name(depth) << " " << border;
                }
            }
        // The direct sum, on a smaller image (every output costs all taps).
        const cv::Mat small = random_image(23, 17, 3, Depth::u8, seed++);
        for (const char* border : {"reflect101", "wrap"}) {
            const cv::Mat want = reference::opencv_reference(parse_filter(f), parse_border(border), small);
            const cv::Mat got = run_sequence_cpu(f, border, small, "column:32");
            const auto r = compare(got, want, 1, 1e-4, reference::output_scale(parse_filter(f), small));
            EXPECT_TRUE(r.ok) << k << " column:32 " << border << ": " << r.where << " max " << r.max_diff;
        }
    }
    // The text form of a 255x255 kernel is printed back as parsed.
    const std::string big = random_kernel(255, 255, 3);
    EXPECT_EQ(to_string(parse_filter(big)), big);
}

TEST(Filter2D, EveryPerPixelScheduleGivesTheNaiveResult) {
    const std::string f = random_kernel(5, 3, 9);
    for (const Depth depth : {Depth::u8, Depth::f32}) {
        const cv::Mat src = random_image(37, 23, 4, depth, 10);
        const cv::Mat want = run_sequence_cpu(f, "reflect101", src, "naive");
        for (const ScheduleSpec& s : example_schedules()) {
            if (!supports(s, parse_filter(f))) continue;
            EXPECT_EQ(differences(run_sequence_cpu(f, "reflect101", src, s.to_string().c_str()), want), 0)
                << s.to_string();
        }
    }
}

TEST(Adaptive, EqualsOpenCVBitForBitAndRefusesOtherImages) {
    unsigned seed = 80;
    for (const char* f :
         {"adaptive:255:mean:11:2", "adaptive:200:gaussian:5:-3.5:binary_inv", "adaptive:255:gaussian:31:7",
          "adaptive:255:mean:3:0.5", "adaptive:127.5:mean:3:-0.5:binary", "adaptive:255:gaussian:9:2.5:binary_inv",
          "adaptive:255:mean:255:0", "adaptive:300:mean:5:1e9", "adaptive:255:gaussian:3:-1e9:binary_inv",
          "adaptive:255:gaussian:3:7", "adaptive:255:gaussian:11:7", "adaptive:9:gaussian:21:-4:binary_inv"})
        for (const cv::Size size : {cv::Size{1, 1}, cv::Size{2, 9}, cv::Size{37, 23}, cv::Size{200, 150}}) {
            // Photos have flat runs (src == mean), where C's rounding decides: mix them in.
            cv::Mat src = random_image(size.width, size.height, 1, Depth::u8, seed++);
            src(cv::Rect(0, 0, (size.width + 1) / 2, size.height)).setTo(cv::Scalar(100));
            const cv::Mat got = run_sequence_cpu(f, "reflect101", src);  // the node's border is not the blur's
            EXPECT_EQ(differences(got, reference_of(f, src)), 0) << f << " " << size;
        }
    EXPECT_EQ(expansion_of(parse_filter("adaptive:255:mean:11:2")).steps.size(), 3u);
    EXPECT_EQ(to_string(parse_filter("adaptive:255:gaussian:11:-2.5:binary_inv")),
              "adaptive:255:gaussian:11:-2.5:binary_inv");
    EXPECT_EQ(to_string(parse_filter("adaptive:255:mean:11:2:binary")), "adaptive:255:mean:11:2");
    for (const auto& [depth, channels] :
         {std::pair{Depth::u8, 3}, std::pair{Depth::u16, 1}, std::pair{Depth::f32, 1}}) {
        const cv::Mat src = random_image(8, 8, channels, depth, 3);
        try {
            run_sequence_cpu("adaptive:255:mean:3:2", "replicate", src);
            ADD_FAILURE() << "took a " << channels << "-channel " << depth_name(depth) << " image";
        } catch (const Error& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find("needs an 8-bit 1-channel image"), std::string::npos) << what;
            EXPECT_EQ(what.find('\n'), std::string::npos) << what;
        }
    }
    // The document chain: gray, then adaptive, runs on a colour photo.
    const cv::Mat bgr = random_image(64, 48, 3, Depth::u8, 5);
    const Graph g = parse_pipeline("color:gray | adaptive:255:gaussian:11:2");
    GraphExecutor ex(g, RunOptions{});
    cv::Mat gray, want;
    cv::cvtColor(bgr, gray, cv::COLOR_BGR2GRAY);
    cv::adaptiveThreshold(gray, want, 255, cv::ADAPTIVE_THRESH_GAUSSIAN_C, cv::THRESH_BINARY, 11, 2);
    EXPECT_EQ(differences(as_mat(ex.run(view_of(bgr)).front()).clone(), want), 0);
}

// cv::threshold with THRESH_OTSU: the image and the level it chose.
std::pair<cv::Mat, double> opencv_otsu(const cv::Mat& src, double maxval, bool inverse) {
    cv::Mat out;
    const double level =
        cv::threshold(src, out, 0, maxval, (inverse ? cv::THRESH_BINARY_INV : cv::THRESH_BINARY) | cv::THRESH_OTSU);
    return {out, level};
}

// The in-memory edge cases (test::otsu_images) and the photos of samples/
// and the shared folder as gray, cropped to odd sizes.
std::vector<std::pair<std::string, cv::Mat>> otsu_test_images() {
    std::vector<std::pair<std::string, cv::Mat>> out = test::otsu_images();
    for (const std::string& dir : {test::samples_dir(), std::string(CBI_SHARED_IMAGES_DIR)}) {
        if (!std::filesystem::is_directory(dir)) continue;
        for (const auto& e : std::filesystem::directory_iterator(dir)) {
            const std::string ext = e.path().extension().string();
            if (ext != ".jpg" && ext != ".png") continue;
            const cv::Mat gray = cv::imread(e.path().string(), cv::IMREAD_GRAYSCALE);
            if (gray.empty()) continue;
            const int w = gray.cols - (gray.cols % 2 == 0), h = gray.rows - (gray.rows % 2 == 0);
            out.emplace_back(e.path().filename().string(), gray(cv::Rect(0, 0, w, h)).clone());
        }
    }
    return out;
}

TEST(ThresholdOtsu, LevelAndImageEqualOpenCVOnPhotosRandomAndEdgeCases) {
    const auto images = otsu_test_images();
    ASSERT_GT(images.size(), test::otsu_images().size()) << "no photos found";
    for (const auto& [name, src] : images) {
        SCOPED_TRACE(name + " " + std::to_string(src.cols) + "x" + std::to_string(src.rows));
        // The level itself, from the histogram as the backends build it.
        std::uint32_t hist[kOtsuBins] = {};
        for (int y = 0; y < src.rows; ++y)
            for (int x = 0; x < src.cols; ++x) ++hist[src.at<std::uint8_t>(y, x)];
        const auto [want, level] = opencv_otsu(src, 255, false);
        EXPECT_EQ(otsu_level(hist, static_cast<double>(src.total())), level);
        EXPECT_EQ(differences(run_cpu("threshold:0:255:otsu", src), want), 0);
        EXPECT_EQ(differences(run_cpu("threshold:99:200.5:otsu_inv", src), opencv_otsu(src, 200.5, true).first), 0);
        EXPECT_EQ(differences(run_cpu("threshold:0::otsu", src), want), 0);  // MAXVAL absent: 255
        EXPECT_EQ(differences(run_cpu("threshold:0:300:otsu_inv", src), opencv_otsu(src, 300, true).first), 0);
        EXPECT_EQ(differences(run_cpu("threshold:0:0:otsu", src), opencv_otsu(src, 0, false).first), 0);
        // Through the executor, as the CLI and Python run it.
        EXPECT_EQ(differences(run_sequence_cpu("threshold:0:255:otsu", "reflect101", src), want), 0);
    }
}

// The level is the whole image's whatever the schedule: tiles, strips and
// the TBB tasks that run them all compare with it. The top and bottom parts
// of the image have different levels of their own.
TEST(ThresholdOtsu, EverySchedulesResultIsTheWholeImagesLevel) {
    cv::Mat src = random_image(301, 1203, 1, Depth::u8, 21);
    src(cv::Rect(0, 0, 301, 500)) /= 3;  // auto's timing band (256 middle rows) is all above
    const cv::Mat want = opencv_otsu(src, 255, false).first;
    for (const ScheduleSpec& s : example_schedules()) {
        if (!supports(s, parse_filter("threshold:0:255:otsu"))) continue;
        SCOPED_TRACE(s.to_string());
        EXPECT_EQ(differences(run_cpu("threshold:0:255:otsu", src, s.to_string().c_str()), want), 0);
        EXPECT_EQ(differences(run_sequence_cpu("threshold:0:255:otsu", "reflect101", src, s.to_string().c_str()), want),
                  0);
    }
    // auto times candidates on a band of rows (the band's own level); the run that is kept is the whole image's.
    GraphExecutor ex(parse_pipeline("threshold:0:255:otsu@auto"), RunOptions{});
    for (int run = 0; run < 2; ++run)
        EXPECT_EQ(differences(as_mat(ex.run(view_of(src)).front()).clone(), want), 0) << "run " << run;
}

TEST(ThresholdOtsu, AfterGrayOnAColourPhotoAndBesideOtherNodes) {
    const cv::Mat photo = cv::imread(test::samples_dir() + "/butterfly.jpg", cv::IMREAD_COLOR);
    ASSERT_FALSE(photo.empty());
    const cv::Mat gray = run_sequence_cpu("color:gray", "reflect101", photo);
    GraphExecutor ex(parse_pipeline("color:gray | threshold:0:255:otsu_inv"), RunOptions{});
    EXPECT_EQ(differences(as_mat(ex.run(view_of(photo)).front()).clone(), opencv_otsu(gray, 255, true).first), 0);
    // After a blur (whose CPU chain runs in tiles): the level of the blurred image.
    const cv::Mat blurred = run_sequence_cpu("blur:5", "reflect101", gray);
    GraphExecutor chain(parse_pipeline("color:gray | blur:5 | threshold:0:255:otsu"), RunOptions{});
    EXPECT_EQ(differences(as_mat(chain.run(view_of(photo)).front()).clone(), opencv_otsu(blurred, 255, false).first),
              0);
}

TEST(ThresholdOtsu, RefusesImagesOtherThan8Bit1ChannelInOneLine) {
    for (const auto& [depth, channels] :
         {std::pair{Depth::u8, 3}, std::pair{Depth::u8, 4}, std::pair{Depth::u16, 1}, std::pair{Depth::f32, 1}}) {
        SCOPED_TRACE(std::to_string(channels) + "-channel " + depth_name(depth));
        const cv::Mat src = random_image(9, 7, channels, depth, 3);
        EXPECT_FALSE(refuses_input(parse_filter("threshold:0:255:otsu"), depth, channels).empty());
        EXPECT_TRUE(refuses_input(parse_filter("threshold:0:255"), depth, channels).empty());
        // Through the executor (before anything runs) and the backend's node.
        for (const bool executor : {true, false}) {
            try {
                if (executor)
                    run_sequence_cpu("threshold:0:255:otsu_inv", "reflect101", src);
                else
                    run_cpu("threshold:0:255:otsu", src);
                ADD_FAILURE() << "took the image";
            } catch (const Error& e) {
                const std::string what = e.what();
                EXPECT_NE(what.find("needs an 8-bit 1-channel image"), std::string::npos) << what;
                EXPECT_NE(what.find("threshold:0:255:otsu"), std::string::npos) << what;
                EXPECT_EQ(what.find('\n'), std::string::npos) << what;
            }
        }
    }
}

TEST(ThresholdOtsu, ParsesAndPrintsItsTypes) {
    for (const char* text : {"threshold:0:255:otsu", "threshold:0::otsu_inv", "threshold:7.5:1:otsu"})
        EXPECT_EQ(to_string(parse_filter(text)), text);
    const Filter parsed = parse_filter("threshold:0:200:otsu_inv");
    const auto& f = std::get<ThresholdFilter>(parsed);
    EXPECT_TRUE(f.otsu);
    EXPECT_EQ(f.type, ThresholdType::binary_inv);
    EXPECT_NE(parse_filter("threshold:0:255:otsu"), parse_filter("threshold:0:255"));
}

TEST(Toolbox, BadArgumentsAreOneLineNamingTheForm) {
    const char* bad[] = {"threshold:",
                         "threshold:x",
                         "threshold:1:y",
                         "threshold:1:2:otsu_binary",
                         "threshold:1:2:OTSU",
                         "threshold:1:2:binary:4",
                         "threshold:nan",
                         "scale:",
                         "scale:a",
                         "scale:1:b",
                         "scale:1:2:3",
                         "gamma:0",
                         "gamma:-1",
                         "gamma:",
                         "gamma:x",
                         "gamma:inf",
                         "hsv:1",
                         "hls:full",
                         "sepfilter2d:",
                         "sepfilter2d:1,2,1",
                         "sepfilter2d:1,2;3;4",
                         "sepfilter2d:1,,2;1",
                         "sepfilter2d:1,a;1",
                         "sepfilter2d:;1",
                         "sepfilter2d:1;1;",
                         "filter2d:",
                         "filter2d:1,2;3",
                         "filter2d:1,2;3,x",
                         "filter2d:;",
                         "filter2d:1,,2",
                         "filter2d:1;2;",
                         "adaptive:255:mean:4:2",
                         "adaptive:255:mean:1:2",
                         "adaptive:255:median:5:2",
                         "adaptive:255:mean:5",
                         "adaptive:255:mean:5:2:trunc",
                         "adaptive:x:mean:5:2",
                         "adaptive:255:mean:5:c",
                         "adaptive:255:mean:257:2",
                         "adaptive:"};
    std::string long_list = "sepfilter2d:1;";
    for (int i = 0; i < 256; ++i) long_list += i ? ",1" : "1";
    std::vector<std::string> texts(std::begin(bad), std::end(bad));
    texts.push_back(long_list);
    for (const std::string& text : texts) {
        try {
            parse_filter(text);
            ADD_FAILURE() << text << " was accepted";
        } catch (const std::invalid_argument& e) {
            const std::string what = e.what();
            EXPECT_EQ(what.find('\n'), std::string::npos) << what;
            const std::string kind = text.substr(0, text.find(':'));
            EXPECT_NE(what.find(kind), std::string::npos) << what;
        }
    }
}

}  // namespace
}  // namespace cbi
