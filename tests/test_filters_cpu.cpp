// CPU backend against OpenCV: every filter x depth x channel count x border
// on awkward sizes, every schedule against the naive order (bit-exact, each
// pixel written once), views of a larger image, and real photos.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <opencv2/imgcodecs.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include <tbb/task_arena.h>

#include "filters/cpu/backend.hpp"
#include "filters/cpu/bilateral.hpp"
#include "filters/cpu/color.hpp"
#include "filters/cpu/rank.hpp"
#include "filters/cpu/separable.hpp"
#include "pipeline/defaults.hpp"
#include "pipeline/error.hpp"
#include "pipeline/executor.hpp"
#include "reference.hpp"

namespace cbi {
namespace {

namespace fs = std::filesystem;
using test::compare;
using test::opencv_reference;
using namespace test;

bool is_color(const Filter& f) {
    return category_of(f) == Category::pointwise;
}  // pointwise: no border

// 8/16-bit within 1 of OpenCV (median: exactly), float within 1e-5 relative
// (bilateral: 1e-4) (docs/testing.md).
test::Comparison check_against_opencv(const FilterRun& node, const cv::Mat& src, const cv::Mat& got) {
    return compare(got, opencv_reference(node, src),
                   test::int_tolerance(node, src.depth() == CV_16U ? Depth::u16 : Depth::u8),
                   test::float_tolerance(node), test::output_scale(node, src));
}

cv::Mat run_cpu(const FilterRun& node, const cv::Mat& src) {
    const FilterRun nodes[] = {node};
    Image out = run_sequence(nodes, view_of(src), RunOptions{});
    return as_mat(out.view()).clone();
}

class CpuVsOpenCV : public ::testing::TestWithParam<MatrixParam> {};

TEST_P(CpuVsOpenCV, AllBordersAndSizes) {
    const auto [filter_text, depth, channels] = GetParam();
    const Filter filter = parse_filter(filter_text);
    unsigned seed = 1;
    for (const char* border_text : kBorders) {
        if (is_color(filter) && border_text != kBorders[0]) continue;  // pointwise: no border
        const FilterRun node{filter, parse_border(border_text), ScheduleSpec{}};
        for (const cv::Size size : kSizes) {
            const cv::Mat src = random_image(size.width, size.height, channels, depth, seed++);
            const std::string name = std::string(filter_text) + "-" + border_text + "-" + depth_name(depth) + "-c" +
                                     std::to_string(channels) + "-" + std::to_string(size.width) + "x" +
                                     std::to_string(size.height);
            SCOPED_TRACE(name);
            const cv::Mat got = run_cpu(node, src);
            const auto result = check_against_opencv(node, src, got);
            EXPECT_TRUE(result.ok) << result.where << "; max diff " << result.max_diff
                                   << "; images: " << test::dump_failure(name, got, opencv_reference(node, src));
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Matrix, CpuVsOpenCV, ::testing::ValuesIn(test::filter_matrix(kFilters, kDepths)), matrix_name);

// Poisons dst, runs the node, and checks every sample was written: the
// poison (0xA5 bytes; a NaN for float) never survives a correct run.
cv::Mat run_poisoned(const FilterRun& node, const cv::Mat& src, int out_channels) {
    cv::Mat dst(src.size(), CV_MAKETYPE(src.depth(), out_channels));
    dst.setTo(cv::Scalar::all(0));
    std::memset(dst.data, 0xA5, dst.total() * dst.elemSize());
    run_node_cpu(node, view_of(src), view_of(dst));
    return dst;
}

// Runs `node` (its schedule ignored) under naive and under each of
// `tile_schedules`, and asserts every tiled result equals the naive one byte
// for byte (memcmp: bit-exact, and NaN poison would compare unequal).
void expect_tiles_equal_naive(FilterRun node, const cv::Mat& src, int out_channels,
                              std::initializer_list<const char*> tile_schedules, const std::string& trace) {
    node.schedule = parse_schedule("naive");
    const cv::Mat want = run_poisoned(node, src, out_channels);
    for (const char* schedule : tile_schedules) {
        node.schedule = parse_schedule(schedule);
        SCOPED_TRACE(trace + " " + schedule);
        const cv::Mat got = run_poisoned(node, src, out_channels);
        ASSERT_EQ(got.total() * got.elemSize(), want.total() * want.elemSize());
        ASSERT_EQ(std::memcmp(got.data, want.data, want.total() * want.elemSize()), 0);
    }
}

TEST(CpuSchedules, EveryScheduleGivesTheNaiveResultBitExactly) {
    const char* filters[] = {"blur:5",      "gaussian:7:2", "sobel:mag:3", "laplacian:1",     "laplacian:5",
                             "color:sepia", "median:5",     "median:9",    "bilateral:5:30:5"};
    const cv::Size sizes[] = {{1, 1}, {31, 7}, {257, 129}, {33, 40}};
    unsigned seed = 100;
    for (const char* filter_text : filters)
        for (const Depth depth : kDepths)
            for (const cv::Size size : sizes) {
                const cv::Mat src = random_image(size.width, size.height, 3, depth, seed++);
                FilterRun node{parse_filter(filter_text), parse_border("reflect101"), ScheduleSpec{}};
                const cv::Mat naive = run_poisoned(node, src, 3);
                for (const ScheduleSpec& schedule : example_schedules()) {
                    if (!supports(schedule, node.filter))
                        continue;  // refused when a graph is built (tested in test_graph)
                    node.schedule = schedule;
                    SCOPED_TRACE(std::string(filter_text) + " " + depth_name(depth) + " " + schedule.to_string() + " " +
                                 std::to_string(size.width) + "x" + std::to_string(size.height));
                    const cv::Mat got = run_poisoned(node, src, 3);
                    // memcmp: bit-exact, and NaN poison would compare unequal.
                    ASSERT_EQ(std::memcmp(got.data, naive.data, got.total() * got.elemSize()), 0);
                }
            }
}

// Integer box sizes the row kernels have no case for (the mean by a
// run-time multiplier, cpu/separable.hpp) equal the naive schedule's exact
// mean and OpenCV (8-bit bit for bit), also at the sums' extremes (all
// samples at the maximum, and a few one below).
TEST(CpuSchedules, BoxOfAnySizeRoundsItsMeanAsOpenCV) {
    unsigned seed = 700;
    for (const int k : {11, 13, 17, 57, 101, 255})
        for (const Depth depth : {Depth::u8, Depth::u16})
            for (const int fill : {-1, 0, 1})  // random, all maximum, all maximum but a few
                for (const char* border_text : {"reflect101", "replicate", "constant:3"}) {
                    cv::Mat src = random_image(67, 45, 3, depth, seed++);
                    const double top = depth == Depth::u8 ? 255 : 65535;
                    if (fill >= 0) src.setTo(cv::Scalar::all(top));
                    if (fill == 1) src(cv::Rect(20, 10, 3, 2)).setTo(cv::Scalar::all(top - 1));
                    FilterRun node{BoxFilter{k}, parse_border(border_text), parse_schedule("sep:256x256")};
                    SCOPED_TRACE("blur:" + std::to_string(k) + " " + depth_name(depth) + " fill " +
                                 std::to_string(fill) + " " + border_text);
                    const cv::Mat got = run_cpu(node, src);
                    if (k <= 17) {  // the naive schedule's exact mean, a division a sample: slow at large K
                        node.schedule = parse_schedule("naive");
                        ASSERT_EQ(cv::norm(got, run_cpu(node, src), cv::NORM_INF), 0);
                    }
                    // OpenCV's 16-bit box scales its sums in float: 1 off where the mean is near a half.
                    const auto r = compare(got, opencv_reference(node, src), depth == Depth::u8 ? 0 : 1, 0);
                    ASSERT_TRUE(r.ok) << r.where << "; max diff " << r.max_diff;
                }
}

// Tile strategies with a traversal order over their tiles (+ORDER): every
// order gives the row-major result bit for bit, on sizes with many tiles,
// clipped edge tiles, orders wider or taller than the grid of tiles.
TEST(CpuSchedules, EveryTileOrderGivesTheRowMajorResultBitExactly) {
    const char* strategies[] = {"sep:5x3", "smem:4x2", "stream:6x2", "sep:16x8"};
    const char* orders[] = {"+naive",    "+column:1", "+column:2", "+column:4", "+column:1000",   "+zigzag:1",
                            "+zigzag:3", "+tile:2x3", "+tile:3x2", "+tile:1x1", "+tile:1000x1000"};
    const cv::Size sizes[] = {{37, 23}, {1, 1}, {200, 3}};
    unsigned seed = 300;
    for (const char* filter_text : {"blur:3", "gaussian:5", "sobel:mag:3"})
        for (const Depth depth : {Depth::u8, Depth::f32})
            for (const int channels : {1, 3})
                for (const cv::Size size : sizes) {
                    const cv::Mat src = random_image(size.width, size.height, channels, depth, seed++);
                    FilterRun node{parse_filter(filter_text), parse_border("reflect101"), ScheduleSpec{}};
                    for (const char* strategy : strategies) {
                        node.schedule = parse_schedule(strategy);
                        const cv::Mat want = run_poisoned(node, src, channels);
                        for (const char* order : orders) {
                            node.schedule = parse_schedule(std::string(strategy) + order);
                            SCOPED_TRACE(std::string(filter_text) + " " + depth_name(depth) + " c" +
                                         std::to_string(channels) + " " + node.schedule.to_string() + " " +
                                         std::to_string(size.width) + "x" + std::to_string(size.height));
                            const cv::Mat got = run_poisoned(node, src, channels);
                            ASSERT_EQ(std::memcmp(got.data, want.data, want.total() * want.elemSize()), 0);
                        }
                    }
                }
}

// A source that records the pixels the tiled path reads, in order: row()
// notes the row, at() the pixel. Not stored (kStored false), so every
// sample goes through at() (cpu/separable.hpp, load_padded_row).
struct RecordingSource : BorderedSource<std::uint8_t, BorderMode::reflect101> {
    static constexpr bool kStored = false;
    std::vector<Pixel>* reads;
    int* row_y;
    const std::uint8_t* row(int y) const {
        *row_y = y;
        return BorderedSource::row(y);
    }
    std::uint8_t at(const std::uint8_t* r, int x, int c) const {
        if (c == 0) reads->push_back({x, *row_y});
        return BorderedSource::at(r, x, c);
    }
};

// TBB tasks take tiles in the schedule's order: with one thread and a 1x1
// box (a tile reads only its own pixels) the tiles are read in exactly the
// order TileOrder::map gives.
TEST(CpuSchedules, TilesAreVisitedInTheScheduleOrder) {
    const int width = 23, height = 11, tw = 4, th = 3;  // 6 x 4 tiles, the last column and row clipped
    const int tiles_x = 6, tiles_y = 4;
    const cv::Mat src = random_image(width, height, 1, Depth::u8, 9);
    cv::Mat dst(height, width, CV_8UC1);
    for (const char* text : {"sep:4x3", "sep:4x3+column:2", "sep:4x3+zigzag:3", "sep:4x3+tile:4x3", "sep:4x3+column:1",
                             "smem:4x3+tile:2x2"}) {
        const ScheduleSpec spec = parse_schedule(text);
        std::vector<Pixel> reads;
        int row_y = 0;
        const RecordingSource source{{view_of(src), 0}, &reads, &row_y};
        const BoxOp<std::uint8_t, BorderMode::reflect101, RecordingSource> op{{source, view_of(dst)}, 1};
        tbb::task_arena one_thread(1);
        one_thread.execute([&] { cpu::run_separable_tiles(tile_schedule(tw, th), op, width, height, spec.order); });
        std::vector<std::pair<int, int>> visited, want;
        for (const Pixel p : reads) {
            const std::pair<int, int> tile{p.x / tw, p.y / th};
            if (visited.empty() || visited.back() != tile) visited.push_back(tile);
        }
        for (int t = 0; t < tiles_x * tiles_y; ++t) {
            const Pixel tile = spec.order.map(static_cast<std::uint32_t>(t), tiles_x, tiles_y);
            want.emplace_back(tile.x, tile.y);
        }
        EXPECT_EQ(visited, want) << text;
        EXPECT_EQ(cv::norm(dst, src, cv::NORM_INF), 0.0) << text;  // a 1x1 box copies
    }
}

// Wide float box sums slide (cpu/separable.hpp): within rounding of the
// per-pixel direct sums, and exactly them where a window holds an Inf or a
// NaN (those rows are recomputed directly).
TEST(CpuSchedules, WideFloatBoxSumsSlideWithinRoundingAndKeepInfAndNaN) {
    for (const int channels : {1, 3}) {
        cv::Mat src = random_image(301, 157, channels, Depth::f32, 42);
        cv::Mat big = src.clone();
        big.forEach<float>([](float& v, const int*) { v *= 1000.f; });
        src.ptr<float>(40)[17 * channels] = std::numeric_limits<float>::infinity();
        src.ptr<float>(90)[200 * channels] = -std::numeric_limits<float>::infinity();
        src.ptr<float>(130)[5 * channels] = std::numeric_limits<float>::quiet_NaN();
        for (const cv::Mat& image : {src, big})
            for (const char* schedule : {"sep:256x256", "sep:64x32", "smem:37x41"}) {
                SCOPED_TRACE(std::string(schedule) + " channels " + std::to_string(channels));
                FilterRun node{parse_filter("blur:31"), parse_border("reflect101"), ScheduleSpec{}};
                const cv::Mat naive = run_poisoned(node, image, channels);
                node.schedule = parse_schedule(schedule);
                const cv::Mat got = run_poisoned(node, image, channels);
                int finite = 0;
                for (int y = 0; y < got.rows; ++y)
                    for (int i = 0; i < got.cols * channels; ++i) {
                        const float a = got.ptr<float>(y)[i], b = naive.ptr<float>(y)[i];
                        if (std::isfinite(b)) {
                            ++finite;
                            ASSERT_NEAR(a, b, 1e-5 * std::max(1.f, std::abs(b))) << "at " << i << "," << y;
                        } else {
                            ASSERT_EQ(std::isnan(a), std::isnan(b)) << "at " << i << "," << y;
                            if (!std::isnan(b)) {
                                ASSERT_EQ(a, b) << "at " << i << "," << y;
                            }
                        }
                    }
                EXPECT_GT(finite, got.rows * got.cols * channels / 2);
            }
    }
}

// 8-bit Gaussian blur is OpenCV's bit-exact fixed point (GaussianOp): equal
// to cv::GaussianBlur sample for sample, on every border, size, channel
// count, kernel and schedule, not just within the tolerance of 1.
TEST(CpuKernels, EightBitGaussianEqualsOpenCVBitForBit) {
    const char* filters[] = {"gaussian:1",   "gaussian:3",    "gaussian:5",     "gaussian:7",
                             "gaussian:9",   "gaussian:11",   "gaussian:3:0.5", "gaussian:5:1.3",
                             "gaussian:9:4", "gaussian:15:2", "gaussian:31"};
    const char* schedules[] = {"naive", "sep:64x32", "smem:16x8", "stream:32x16", "column:8"};
    unsigned seed = 300;
    for (const char* filter_text : filters)
        for (const char* border_text : kBorders)
            for (const cv::Size size : kSizes)
                for (const int channels : {1, 3, 4}) {
                    const cv::Mat src = random_image(size.width, size.height, channels, Depth::u8, seed++);
                    FilterRun node{parse_filter(filter_text), parse_border(border_text), ScheduleSpec{}};
                    const cv::Mat want = opencv_reference(node, src);
                    for (const char* schedule : schedules) {
                        node.schedule = parse_schedule(schedule);
                        if (!supports(node.schedule, node.filter)) continue;
                        SCOPED_TRACE(std::string(filter_text) + " " + border_text + " " + schedule + " " +
                                     std::to_string(size.width) + "x" + std::to_string(size.height) + "x" +
                                     std::to_string(channels));
                        ASSERT_EQ(cv::norm(run_poisoned(node, src, channels), want, cv::NORM_INF), 0.0);
                    }
                }
}

// The tiled 8-bit Gaussian runs vectors of 16 (row sums) and 32 (column
// sums) samples and finishes each row's tail sample by sample: odd widths
// and tiles, every channel count, and all-255 images (the largest row sums,
// 255 * 256 = 65280 in uint16) equal the per-pixel path byte for byte.
TEST(CpuKernels, EightBitGaussianTilesEqualPerPixelPathAtOddWidths) {
    unsigned seed = 900;
    for (const char* filter_text : {"gaussian:3", "gaussian:5", "gaussian:9", "gaussian:15:2"})
        for (const int width : {1, 2, 15, 17, 33, 65, 131})
            for (const int channels : {1, 3, 4})
                for (const bool saturated : {false, true}) {
                    cv::Mat src = random_image(width, 23, channels, Depth::u8, seed++);
                    if (saturated) src.setTo(cv::Scalar::all(255));
                    const FilterRun node{parse_filter(filter_text), parse_border("reflect101"), ScheduleSpec{}};
                    expect_tiles_equal_naive(node, src, channels, {"sep:7x5", "sep:256x256", "smem:32x8"},
                                             std::string(filter_text) + " width " + std::to_string(width) + " x" +
                                                 std::to_string(channels) + (saturated ? " all 255" : ""));
                    if (saturated) {
                        ASSERT_EQ(cv::countNonZero(run_poisoned(node, src, channels).reshape(1) != 255), 0);
                    }
                }
}

// The 8-bit Sobel's tiles (int16 row sums; cpu_sobel8's vector column
// passes and finish where the gradients fit int16, KSIZE 1 to 5; the generic
// int32 column sums for KSIZE 7) equal the per-pixel path bit for bit: at
// widths that leave vector tails, on random samples, on samples of only 0
// and 255 (the largest gradients, magnitudes that saturate) and on a step
// edge from 255 to levels that change from row to row.
TEST(CpuKernels, EightBitSobelTilesEqualPerPixelPathAtOddWidths) {
    unsigned seed = 1300;
    for (const char* filter_text : {"sobel:x:3", "sobel:y:3", "sobel:mag:3", "sobel:x:5", "sobel:y:5", "sobel:mag:5",
                                    "sobel:x:7", "sobel:y:7", "sobel:mag:7", "sobel:mag:1"})
        for (const char* border_text : {"reflect101", "replicate", "constant:255"})
            for (const int width : {1, 2, 15, 17, 33, 65, 131})
                for (const int channels : {1, 3, 4})
                    for (const char* content : {"random", "0 and 255", "step"}) {
                        cv::Mat src = random_image(width, 23, channels, Depth::u8, seed++);
                        if (std::string_view(content) == "0 and 255") {
                            cv::threshold(src, src, 127, 255, cv::THRESH_BINARY);
                        } else if (std::string_view(content) == "step") {  // 255 on the right, 11 * y on the left
                            for (int y = 0; y < src.rows; ++y)
                                for (int x = 0; x < width; ++x)
                                    for (int c = 0; c < channels; ++c)
                                        src.ptr<std::uint8_t>(y)[x * channels + c] =
                                            static_cast<std::uint8_t>(x > width / 2 ? 255 : y * 11);
                        }
                        const FilterRun node{parse_filter(filter_text), parse_border(border_text), ScheduleSpec{}};
                        expect_tiles_equal_naive(node, src, channels, {"sep:7x5", "sep:256x256", "smem:32x8"},
                                                 std::string(filter_text) + " " + border_text + " width " +
                                                     std::to_string(width) + " x" + std::to_string(channels) + " " +
                                                     content);
                    }
}

// Float sums (Gaussian on 32f and 16u, Sobel on 32f) run their taps through
// cpu_float_taps' AVX2 blocks of 64, 16 and 8 sums and the generic loop for
// a row's tail: odd widths and heights, tiles that leave every block size
// and a tail, 1, 3 and 4 channels, and all -0.0 images (a sum starts at
// +0, so -0 products give +0) equal the per-pixel path bit for bit.
TEST(CpuKernels, FloatTapTilesEqualPerPixelPathAtOddWidths) {
    unsigned seed = 1700;
    const std::tuple<const char*, Depth> cases[] = {
        {"gaussian:1", Depth::f32},  {"gaussian:3", Depth::f32},  {"gaussian:5", Depth::f32},
        {"gaussian:9", Depth::f32},  {"gaussian:31", Depth::f32}, {"gaussian:9", Depth::u16},
        {"sobel:mag:3", Depth::f32}, {"sobel:x:5", Depth::f32},   {"sobel:y:7", Depth::f32},
        {"laplacian:1", Depth::f32}, {"laplacian:3", Depth::f32}, {"laplacian:7", Depth::f32}};
    for (const auto& [filter_text, depth] : cases)
        for (const cv::Size size : {cv::Size{1, 3}, cv::Size{15, 9}, cv::Size{33, 40}, cv::Size{131, 23}})
            for (const int channels : {1, 3, 4})
                for (const bool negative_zero : {false, true}) {
                    if (negative_zero && depth != Depth::f32) continue;
                    cv::Mat src = random_image(size.width, size.height, channels, depth, seed++);
                    if (negative_zero) src.setTo(cv::Scalar::all(-0.0));
                    const FilterRun node{parse_filter(filter_text), parse_border("reflect101"), ScheduleSpec{}};
                    expect_tiles_equal_naive(node, src, channels, {"sep:7x5", "sep:256x256", "smem:32x8", "sep:88x13"},
                                             std::string(filter_text) + " " + depth_name(depth) + " " +
                                                 std::to_string(size.width) + "x" + std::to_string(size.height) + " x" +
                                                 std::to_string(channels) + (negative_zero ? " all -0" : ""));
                }
}

TEST(CpuViews, RoiInputIsFilteredAsAnIsolatedImage) {
    const cv::Mat big = random_image(300, 200, 3, Depth::u8, 7);
    const cv::Mat roi = big(cv::Rect(13, 21, 101, 77));  // strided, not contiguous
    ASSERT_FALSE(roi.isContinuous());
    for (const char* filter_text : {"blur:9", "gaussian:5", "sobel:mag:3", "color:ycrcb"}) {
        const FilterRun node{parse_filter(filter_text), Border{}, parse_schedule("column:32")};
        const auto r = check_against_opencv(node, roi.clone(), run_cpu(node, roi));
        EXPECT_TRUE(r.ok) << filter_text << ": " << r.where;
    }
}

TEST(CpuViews, RoiOutputWritesOnlyItsRectangle) {
    const cv::Mat src = random_image(64, 48, 1, Depth::u16, 8);
    cv::Mat canvas(100, 100, CV_16UC1, cv::Scalar(4242));
    cv::Mat window = canvas(cv::Rect(10, 20, 64, 48));
    const FilterRun node{parse_filter("gaussian:5"), Border{}, parse_schedule("tile:16x16")};
    run_node_cpu(node, view_of(src), view_of(window));
    EXPECT_TRUE(check_against_opencv(node, src, window.clone()).ok);
    cv::Mat outside = canvas.clone();
    window = outside(cv::Rect(10, 20, 64, 48));
    window.setTo(4242);
    EXPECT_EQ(cv::countNonZero(outside != 4242), 0) << "pixels outside the view changed";
}

TEST(CpuBorders, BorderIndexEqualsOpenCVAtExtremeCoordinates) {
    for (int n : {1, 2, 3, 7, 100})
        for (int p = -3 * n - 5; p <= 4 * n + 5; ++p) {
            SCOPED_TRACE("p=" + std::to_string(p) + " n=" + std::to_string(n));
            EXPECT_EQ(border_index<BorderMode::reflect101>(p, n), cv::borderInterpolate(p, n, cv::BORDER_REFLECT_101));
            EXPECT_EQ(border_index<BorderMode::reflect>(p, n), cv::borderInterpolate(p, n, cv::BORDER_REFLECT));
            EXPECT_EQ(border_index<BorderMode::replicate>(p, n), cv::borderInterpolate(p, n, cv::BORDER_REPLICATE));
            EXPECT_EQ(border_index<BorderMode::wrap>(p, n), cv::borderInterpolate(p, n, cv::BORDER_WRAP));
            EXPECT_EQ(border_index<BorderMode::constant>(p, n), cv::borderInterpolate(p, n, cv::BORDER_CONSTANT));
        }
}

TEST(CpuKernels, GaussianWeightsEqualOpenCV) {
    for (int k : {1, 3, 5, 7, 9, 31})
        for (double sigma : {0.0, 0.5, 1.2, 3.0}) {
            const cv::Mat ref = cv::getGaussianKernel(k, sigma, CV_64F);
            const auto w = gaussian_weights(k, sigma);
            ASSERT_EQ(w.size, k);
            for (int i = 0; i < k; ++i) EXPECT_NEAR(w.w[i], ref.at<double>(i), 1e-15) << k << " " << sigma;
        }
}

// The GPU's 8-bit box mean divides by k*k with a multiply (quotient_magic):
// equal to the integer division for every sum up to 255 k^2 + k^2/2 for
// k <= 31 (all of them), and at every multiple of k^2 and its neighbours
// (where a too-small multiplier would first go wrong) up to kMaxKernel.
TEST(CpuKernels, BoxMeanByMultiplyEqualsIntegerDivision) {
    for (std::uint32_t k = 1; k <= static_cast<std::uint32_t>(kMaxKernel); ++k) {
        const std::uint32_t n = k * k, top = 255 * n + n / 2;
        const std::uint64_t magic = quotient_magic(n);
        if (k <= 31) {
            for (std::uint32_t x = 0; x <= top; ++x)
                ASSERT_EQ(quotient_by_magic(x, magic), x / n) << "k " << k << " x " << x;
        } else {
            for (std::uint32_t q = 0; q <= 256; ++q)
                for (std::int64_t x : {std::int64_t{q} * n - 1, std::int64_t{q} * n, std::int64_t{q} * n + 1})
                    if (x >= 0 && x <= top) {
                        ASSERT_EQ(quotient_by_magic(static_cast<std::uint32_t>(x), magic), x / n)
                            << "k " << k << " x " << x;
                    }
        }
    }
}

TEST(CpuKernels, SobelKernelsEqualOpenCV) {
    for (int k : {1, 3, 5, 7}) {
        cv::Mat kx, ky;
        cv::getDerivKernels(kx, ky, 1, 0, k, false, CV_32F);
        const SobelKernels s = sobel_kernels(k);
        ASSERT_EQ(s.deriv_size, kx.total());
        ASSERT_EQ(s.smooth_size, ky.total());
        for (int i = 0; i < s.deriv_size; ++i) EXPECT_EQ(s.deriv[i], kx.at<float>(i)) << k;
        for (int i = 0; i < s.smooth_size; ++i) EXPECT_EQ(s.smooth[i], ky.at<float>(i)) << k;
    }
}

// cv::Laplacian's kernels: getSobelKernels(2, 0, KSIZE); KSIZE 1 and 3 use
// the 3x3 kernels [0 1 0; 1 -4 1; 0 1 0] and [2 0 2; 0 -8 0; 2 0 2], which
// are d2x + d2y of these.
TEST(CpuKernels, LaplacianKernelsEqualOpenCV) {
    for (int k : {1, 3, 5, 7}) {
        cv::Mat kx, ky;
        cv::getDerivKernels(kx, ky, 2, 0, k, false, CV_32F);
        const SobelKernels s = laplacian_kernels(k);
        ASSERT_EQ(s.deriv_size, kx.total());
        ASSERT_EQ(s.smooth_size, ky.total());
        for (int i = 0; i < s.deriv_size; ++i) EXPECT_EQ(s.deriv[i], kx.at<float>(i)) << k;
        for (int i = 0; i < s.smooth_size; ++i) EXPECT_EQ(s.smooth[i], ky.at<float>(i)) << k;
    }
    const int cross[3][3] = {{0, 1, 0}, {1, -4, 1}, {0, 1, 0}}, ring[3][3] = {{2, 0, 2}, {0, -8, 0}, {2, 0, 2}};
    for (int k : {1, 3}) {
        const SobelKernels s = laplacian_kernels(k);
        for (int y = 0; y < 3; ++y)
            for (int x = 0; x < 3; ++x) {
                // d2x: deriv across x, smooth down y (centred); d2y the transpose.
                const auto tap = [&](const int* w, int n, int i) {
                    return std::abs(i - 1) <= n / 2 ? w[i - 1 + n / 2] : 0;
                };
                const int sum = tap(s.deriv, s.deriv_size, x) * tap(s.smooth, s.smooth_size, y) +
                                tap(s.smooth, s.smooth_size, x) * tap(s.deriv, s.deriv_size, y);
                EXPECT_EQ(sum, (k == 1 ? cross : ring)[y][x]) << k << " at " << x << "," << y;
            }
    }
}

// Colour matrices on 1-channel images read them as R = G = B: gray of a gray image is that image, bit for bit (NaN payloads,
// signalling NaNs, -0.0 and Inf included); every other matrix gives what it
// gives on cv::cvtColor(GRAY2BGR) of the image, bit for bit. For every CPU
// schedule that runs colour, odd sizes, whole images and views at odd
// offsets, outputs written into a view of a poisoned canvas.

// The gray images each case runs on: a whole image, a view inside a larger
// one, and for float a view holding special values.
std::vector<std::pair<std::string, cv::Mat>> gray_inputs(cv::Size size, Depth depth, unsigned seed) {
    std::vector<std::pair<std::string, cv::Mat>> out;
    out.emplace_back("whole", random_image(size.width, size.height, 1, depth, seed));
    const cv::Mat big = random_image(size.width + 4, size.height + 3, 1, depth, seed + 1);
    out.emplace_back("view", big(cv::Rect(3, 1, size.width, size.height)));
    if (depth == Depth::f32) {
        cv::Mat special = big.clone()(cv::Rect(1, 2, size.width, size.height));
        const std::uint32_t bits[] = {0x7fc00000u, 0xffc00001u,          0x7f800001u /* signalling */, 0x7f800000u,
                                      0xff800000u, 0x80000000u /* -0 */, 0x00000001u /* denormal */,   0x7f7fffffu,
                                      0xff7fffffu};
        cv::RNG rng(seed);
        for (int i = 0; i < 3 * static_cast<int>(std::size(bits)); ++i)
            std::memcpy(&special.ptr<float>(rng.uniform(0, size.height))[rng.uniform(0, size.width)],
                        &bits[i % std::size(bits)], sizeof(float));
        out.emplace_back("specials", special);
    }
    return out;
}

// Runs node on src into a view at (1, 2) of a canvas poisoned with 0xA5
// bytes; asserts no byte outside the view changed and returns the view.
cv::Mat run_into_canvas(const FilterRun& node, const cv::Mat& src, int out_channels) {
    cv::Mat canvas(src.rows + 3, src.cols + 2, CV_MAKETYPE(src.depth(), out_channels));
    std::memset(canvas.data, 0xA5, canvas.total() * canvas.elemSize());
    const cv::Rect inner(1, 2, src.cols, src.rows);
    run_node_cpu(node, view_of(src), view_of(canvas(inner)));
    const cv::Mat out = canvas(inner).clone();
    for (int y = inner.y; y < inner.y + inner.height; ++y)
        std::memset(canvas.ptr(y) + inner.x * canvas.elemSize(), 0xA5, inner.width * canvas.elemSize());
    EXPECT_EQ(std::count_if(canvas.datastart, canvas.dataend, [](unsigned char b) { return b != 0xA5; }), 0)
        << "a byte outside the output view was written";
    return out;
}

// Equal bytes, except that float NaNs compare as NaN: in matrix arithmetic
// x86 keeps one operand's payload, and which one may differ between the
// vector and the scalar paths (see RowsMatchPerPixelBitForBit).
bool same_samples(const cv::Mat& a, const cv::Mat& b) {
    if (a.size() != b.size() || a.type() != b.type()) return false;
    const cv::Mat x = a.isContinuous() ? a : a.clone(), y = b.isContinuous() ? b : b.clone();
    if (a.depth() != CV_32F) return std::memcmp(x.data, y.data, x.total() * x.elemSize()) == 0;
    const float* p = x.ptr<float>();
    const float* q = y.ptr<float>();
    for (std::size_t i = 0; i < x.total() * x.channels(); ++i)
        if (std::isnan(p[i]) ? !std::isnan(q[i]) : std::memcmp(&p[i], &q[i], sizeof(float)) != 0) return false;
    return true;
}

const cv::Size kGraySizes[] = {{1, 1}, {17, 1}, {1, 9}, {31, 7}, {67, 45}, {1000, 3}};

std::vector<ScheduleSpec> colour_schedules(const Filter& filter) {
    std::vector<ScheduleSpec> out;
    for (const ScheduleSpec& s : example_schedules())
        if (supports(s, filter)) out.push_back(s);
    return out;
}

TEST(CpuColor, GrayOfAGrayImageIsThatImageBitForBit) {
    const Filter gray = parse_filter("color:gray");
    const auto schedules = colour_schedules(gray);
    ASSERT_GE(schedules.size(), 5u);  // naive, column, zigzag, tile, vec
    unsigned seed = 2000;
    for (const Depth depth : kDepths)
        for (const cv::Size size : kGraySizes)
            for (const auto& [what, src] : gray_inputs(size, depth, seed += 2))
                for (const ScheduleSpec& schedule : schedules) {
                    SCOPED_TRACE(std::string(depth_name(depth)) + " " + std::to_string(size.width) + "x" +
                                 std::to_string(size.height) + " " + what + " " + schedule.to_string());
                    const cv::Mat got = run_into_canvas(FilterRun{gray, Border{}, schedule}, src, 1);
                    const cv::Mat want = src.clone();
                    ASSERT_EQ(got.type(), want.type());
                    ASSERT_EQ(std::memcmp(got.data, want.data, want.total() * want.elemSize()), 0);
                }
}

TEST(CpuColor, MatricesOnAGrayImageEqualTheSameOnGrayToBgrBitForBit) {
    const char* colours[] = {"color:sepia", "color:ycrcb", "color:0.5,0.25,0.25,10,-0.2,1.1,0.1,-5,0.3,0.3,0.3,0",
                             "color:1.5,-0.25,0.1,0.3,0.3,0.3,-2,0.5,2.5"};
    unsigned seed = 2500;
    for (const char* colour : colours) {
        const Filter filter = parse_filter(colour);
        for (const Depth depth : kDepths)
            for (const cv::Size size : kGraySizes)
                for (const auto& [what, src] : gray_inputs(size, depth, seed += 2)) {
                    cv::Mat bgr;
                    cv::cvtColor(src, bgr, cv::COLOR_GRAY2BGR);
                    const cv::Mat want = run_poisoned(FilterRun{filter, Border{}, parse_schedule("naive")}, bgr, 3);
                    if (what != "specials") {  // NaN is never within a tolerance
                        const auto r = check_against_opencv(FilterRun{filter, Border{}, ScheduleSpec{}}, bgr, want);
                        ASSERT_TRUE(r.ok) << colour << " " << depth_name(depth) << ": " << r.where;
                    }
                    for (const ScheduleSpec& schedule : colour_schedules(filter)) {
                        SCOPED_TRACE(std::string(colour) + " " + depth_name(depth) + " " + std::to_string(size.width) +
                                     "x" + std::to_string(size.height) + " " + what + " " + schedule.to_string());
                        const cv::Mat got = run_into_canvas(FilterRun{filter, Border{}, schedule}, src, 3);
                        ASSERT_TRUE(same_samples(got, want));
                        if (what != "specials") {
                            ASSERT_EQ(std::memcmp(got.data, want.data, want.total() * want.elemSize()), 0);
                        }
                    }
                }
    }
}

// Through the executor: channel counts follow (sepia of gray: 3 channels,
// so it blends with a 3-channel image, not with the 1-channel input; gray
// of gray: 1), and a chain equals the same chain on GRAY2BGR of the image.
TEST(CpuColor, GraphsTakeGrayImages) {
    for (const Depth depth : kDepths) {
        SCOPED_TRACE(depth_name(depth));
        const cv::Mat src = random_image(67, 45, 1, depth, 77);
        cv::Mat bgr;
        cv::cvtColor(src, bgr, cv::COLOR_GRAY2BGR);
        for (const char* pipeline : {"color:sepia | gaussian:5@sep:32x8", "color:ycrcb | sobel:mag@column:16",
                                     "color:gray@vec:4 | blur:3@smem:16x8"}) {
            GraphExecutor on_gray(parse_pipeline(pipeline), RunOptions{}),
                on_bgr(parse_pipeline(pipeline), RunOptions{});
            const cv::Mat got = as_mat(on_gray.run(view_of(src)).front()).clone();
            const cv::Mat want = as_mat(on_bgr.run(view_of(bgr)).front()).clone();
            if (std::string_view(pipeline).starts_with("color:gray")) {  // gray of gray: the image itself
                const FilterRun blur{parse_filter("blur:3"), Border{}, ScheduleSpec{}};
                EXPECT_EQ(cv::norm(got, run_cpu(blur, src), cv::NORM_INF), 0.0) << pipeline;
                EXPECT_EQ(on_gray.channels_of(2), 1);
            } else {
                EXPECT_EQ(on_gray.channels_of(2), 3);
                ASSERT_EQ(got.type(), want.type()) << pipeline;
                EXPECT_EQ(std::memcmp(got.data, want.data, want.total() * want.elemSize()), 0) << pipeline;
            }
        }
        // gray of gray blends with the 1-channel input: the image itself, twice.
        Graph same;
        same.add_output(same.add_blend("mix", BlendFilter{0.5, 0.5, 0},
                                       same.add_filter("gray", parse_filter("color:gray"), Graph::input()),
                                       Graph::input()));
        GraphExecutor ex(same, RunOptions{});
        const cv::Mat mixed = as_mat(ex.run(view_of(src)).front()).clone();
        EXPECT_LE(cv::norm(mixed, src, cv::NORM_INF), depth == Depth::f32 ? 1e-6 : 0.0);
        // sepia of gray has 3 channels: blending it with the 1-channel input is refused.
        Graph mismatch;
        mismatch.add_output(mismatch.add_blend(
            "mix", BlendFilter{}, mismatch.add_filter("sepia", parse_filter("color:sepia"), Graph::input()),
            Graph::input()));
        GraphExecutor bad(mismatch, RunOptions{});
        try {
            bad.prepare(src.cols, src.rows, 1, depth);
            FAIL() << "a 3- and 1-channel blend was accepted";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("blend inputs 'sepia' and 'input' have 3 and 1 channels"),
                      std::string::npos)
                << e.what();
        }
    }
}

TEST(CpuColor, OutputChannels) {
    EXPECT_EQ(output_channels(parse_filter("color:gray"), 1), 1);
    EXPECT_EQ(output_channels(parse_filter("color:sepia"), 1), 3);
    EXPECT_EQ(output_channels(parse_filter("color:ycrcb"), 1), 3);
    EXPECT_EQ(output_channels(parse_filter("color:sepia"), 3), 3);
    EXPECT_EQ(output_channels(parse_filter("color:sepia"), 4), 4);
    EXPECT_EQ(output_channels(parse_filter("color:gray"), 4), 1);
    EXPECT_THROW(output_channels(parse_filter("color:gray"), 2), Error);
}

TEST(CpuColor, GrayDropsAlphaAndOthersKeepIt) {
    const cv::Mat src = random_image(9, 4, 4, Depth::u8, 4);
    const FilterRun gray{parse_filter("color:gray"), Border{}, ScheduleSpec{}};
    EXPECT_EQ(run_cpu(gray, src).channels(), 1);
    const FilterRun sepia{parse_filter("color:sepia"), Border{}, ScheduleSpec{}};
    const cv::Mat out = run_cpu(sepia, src);
    ASSERT_EQ(out.channels(), 4);
    std::vector<cv::Mat> a, b;
    cv::split(out, a);
    cv::split(src, b);
    EXPECT_EQ(cv::countNonZero(a[3] != b[3]), 0);
}

// The row loop the CPU backend runs for colour matrices (AVX2 steps, then
// ColorOp<T>::sample for each row's rest) against ColorOp<T>::operator()
// pixel by pixel, bit for bit: widths around the vector steps (32 pixels
// for 8-bit, 16 for 16-bit, 8 for float), views with unaligned rows,
// matrices that saturate both ways (far beyond int32 too) and hit exact .5
// ties, and for float NaN and +-Inf samples. NaNs only compare as NaN:
// with two NaN operands x86 keeps the first one's payload and sign, and the
// compiler may swap the operands of a scalar + or * (the GPU gives one
// canonical NaN anyway).
template <class T>
bool same_sample(T a, T b) {
    if constexpr (std::is_same_v<T, float>)
        if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
void expect_color_rows_match_per_pixel(Depth depth) {
    const float hi = std::is_same_v<T, float> ? 1.f : static_cast<float>(std::numeric_limits<T>::max());
    const float inf = std::numeric_limits<float>::infinity();
    const StorageMatrix matrices[] = {
        {{{0.5f, 0.5f, 0.5f, 0.f}, {0.5f, 0.f, 0.f, 0.5f}, {1.5f, -0.5f, 0.25f, -0.5f}}, 3},      // ties
        {{{2.f, 1.f, 1.f, hi / 3}, {-1.f, -0.3f, 0.2f, 0.f}, {0.393f, 0.769f, 0.189f, 0.f}}, 3},  // saturate
        {{{1e30f, 0.f, 0.f, 0.f}, {-1e30f, 1.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 3e9f}}, 3},            // beyond int32
        {{{inf, -inf, 0.f, 0.f}, {inf, 0.f, 0.f, -inf}, {0.f, 1.f, inf, 0.f}}, 3},  // NaN (inf * 0, inf - inf), +-inf
        {{{0.114f, 0.587f, 0.299f, 0.f}}, 1},                                       // gray
        {{{0.5f, -0.5f, 0.5f, 0.5f}}, 1},
    };
    unsigned seed = 50;
    // 1 -> 3: the AVX2 step reads one vector as B = G = R; 1 -> 1: gray of gray, a copy.
    for (const auto& [ci, co] : {std::pair{3, 3}, {3, 1}, {4, 4}, {4, 1}, {1, 3}, {1, 1}})
        for (const int width : {1, 7, 8, 15, 16, 31, 32, 33, 67, 1000})
            for (StorageMatrix matrix : matrices) {
                if ((matrix.rows == 1) != (co == 1)) continue;
                matrix.step = color_step(ci);  // as storage_matrix sets them
                matrix.copy = ci == 1 && co == 1;
                // A view inside a larger image: rows start at odd addresses and have gaps.
                const cv::Mat big = random_image(width + 3, 5, ci, depth, seed++);
                cv::Mat src = big(cv::Rect(1, 1, width, 3));
                if constexpr (std::is_same_v<T, float>) {
                    const float special[] = {std::numeric_limits<float>::quiet_NaN(), inf, -inf, 1e38f};
                    cv::RNG rng(seed);
                    for (int i = 0; i < width; ++i)
                        src.ptr<float>(rng.uniform(0, 3))[rng.uniform(0, width * ci)] = special[i % 4];
                }
                cv::Mat got(3, width, cv_type(depth, co), cv::Scalar::all(7)), want = got.clone();
                cpu::color_rows(ColorOp<T>{view_of(src), view_of(got), matrix}, 0, 3);
                const ColorOp<T> op{view_of(src), view_of(want), matrix};
                for (int y = 0; y < 3; ++y)
                    for (int x = 0; x < width; ++x) op(x, y);
                for (int y = 0; y < 3; ++y)
                    for (int i = 0; i < width * co; ++i)
                        ASSERT_TRUE(same_sample(got.ptr<T>(y)[i], want.ptr<T>(y)[i]))
                            << depth_name(depth) << " " << ci << "->" << co << " width " << width << " matrix "
                            << matrix.m[0][0] << " at row " << y << " sample " << i << ": " << +got.ptr<T>(y)[i]
                            << " vs " << +want.ptr<T>(y)[i];
            }
}

TEST(CpuColor, RowsMatchPerPixelBitForBit) {
    expect_color_rows_match_per_pixel<std::uint8_t>(Depth::u8);
    expect_color_rows_match_per_pixel<std::uint16_t>(Depth::u16);
    expect_color_rows_match_per_pixel<float>(Depth::f32);
}

// The blend's row loop (AVX2 steps, then BlendOp<T>::sample for each row's
// rest) against BlendOp<T>::operator() pixel by pixel, bit for bit: widths
// around the vector steps, views with unaligned rows and gaps, weights
// that saturate both ways and hit exact .5 ties, and for float NaN and
// +-Inf samples (NaNs compare only as NaN, as above).
template <class T>
void expect_blend_rows_match_per_pixel(Depth depth) {
    const float inf = std::numeric_limits<float>::infinity();
    const BlendFilter blends[] = {{0.5, 0.5, 0},    {1.5, -0.5, 0}, {4, -4, 128},
                                  {1.6, -0.6, 0.3}, {-1, 2, 1e10},  {1e30, -1e30, 0}};
    unsigned seed = 70;
    for (const int ch : {1, 3, 4})
        for (const int width : {1, 7, 8, 15, 16, 31, 32, 33, 67, 1000})
            for (const BlendFilter& blend : blends) {
                const cv::Mat big_a = random_image(width + 3, 5, ch, depth, seed++);
                const cv::Mat big_b = random_image(width + 2, 4, ch, depth, seed++);
                cv::Mat a = big_a(cv::Rect(1, 1, width, 3)), b = big_b(cv::Rect(2, 0, width, 3));
                if constexpr (std::is_same_v<T, float>) {
                    const float special[] = {std::numeric_limits<float>::quiet_NaN(), inf, -inf, 1e38f};
                    cv::RNG rng(seed);
                    for (int i = 0; i < width; ++i)
                        (i % 2 ? a : b).ptr<float>(rng.uniform(0, 3))[rng.uniform(0, width * ch)] = special[i % 4];
                }
                cv::Mat got(3, width, cv_type(depth, ch), cv::Scalar::all(7)), want = got.clone();
                const auto op = [&](const cv::Mat& out) {
                    return BlendOp<T>{view_of(a),
                                      view_of(b),
                                      view_of(out),
                                      static_cast<float>(blend.alpha),
                                      static_cast<float>(blend.beta),
                                      static_cast<float>(blend.gamma)};
                };
                cpu::blend_rows(op(got), 0, 3);
                for (int y = 0; y < 3; ++y)
                    for (int x = 0; x < width; ++x) op(want)(x, y);
                for (int y = 0; y < 3; ++y)
                    for (int i = 0; i < width * ch; ++i)
                        ASSERT_TRUE(same_sample(got.ptr<T>(y)[i], want.ptr<T>(y)[i]))
                            << depth_name(depth) << " " << ch << " ch width " << width << " " << to_string(blend)
                            << " at row " << y << " sample " << i << ": " << +got.ptr<T>(y)[i] << " vs "
                            << +want.ptr<T>(y)[i];
            }
}

TEST(CpuBlend, RowsMatchPerPixelBitForBit) {
    expect_blend_rows_match_per_pixel<std::uint8_t>(Depth::u8);
    expect_blend_rows_match_per_pixel<std::uint16_t>(Depth::u16);
    expect_blend_rows_match_per_pixel<float>(Depth::f32);
}

TEST(CpuChain, ChainEqualsComposedReferences) {
    const cv::Mat src = random_image(120, 90, 3, Depth::u8, 11);
    const FilterRun nodes[] = {{parse_filter("color:gray"), Border{}, parse_schedule("column:32")},
                               {parse_filter("gaussian:5"), Border{}, parse_schedule("zigzag:16")},
                               {parse_filter("sobel:mag:3"), Border{}, parse_schedule("tile:32x8")}};
    const Image out = run_sequence(nodes, view_of(src), RunOptions{});
    // Stage by stage against OpenCV applied to cbi's previous stage, so the
    // +-1 tolerance does not compound.
    cv::Mat stage = src;
    for (const FilterRun& node : nodes) {
        const FilterRun one[] = {node};
        const cv::Mat got = as_mat(run_sequence(one, view_of(stage), RunOptions{}).view()).clone();
        EXPECT_TRUE(check_against_opencv(node, stage, got).ok) << to_string(node.filter);
        stage = got;
    }
    EXPECT_EQ(cv::norm(stage, as_mat(out.view()), cv::NORM_INF), 0.0);
}

// A fused stencil pair (pair_tiles.hpp) takes its tiles in the node's order:
// every order gives the row-major result bit for bit.
TEST(CpuChain, FusedStencilPairsGiveTheRowMajorResultInEveryTileOrder) {
    unsigned seed = 500;
    for (const Depth depth : {Depth::u8, Depth::f32})
        for (const int channels : {1, 3})
            for (const cv::Size size : {cv::Size{37, 23}, cv::Size{1, 1}, cv::Size{200, 3}}) {
                const cv::Mat src = random_image(size.width, size.height, channels, depth, seed++);
                const Border border = parse_border("reflect101");
                for (const char* strategy : {"sep:5x3", "smem:4x4"}) {
                    FilterRun node{parse_filter("sobel:mag:3"), border, parse_schedule(strategy), std::nullopt,
                                   FusedStencil{parse_filter("gaussian:5"), border}};
                    const cv::Mat want = run_poisoned(node, src, channels);
                    for (const char* order : {"+column:1", "+column:3", "+zigzag:2", "+tile:2x3", "+tile:1000x1"}) {
                        node.schedule = parse_schedule(std::string(strategy) + order);
                        SCOPED_TRACE(std::string(depth_name(depth)) + " c" + std::to_string(channels) + " " +
                                     node.schedule.to_string() + " " + std::to_string(size.width) + "x" +
                                     std::to_string(size.height));
                        const cv::Mat got = run_poisoned(node, src, channels);
                        ASSERT_EQ(std::memcmp(got.data, want.data, want.total() * want.elemSize()), 0);
                    }
                }
            }
}

TEST(CpuParse, FilterStringsRoundTripAndBadOnesAreRejected) {
    for (const char* text : {"blur:9", "gaussian:5", "gaussian:5:1.2", "sobel:x:1", "sobel:mag:7", "laplacian:1",
                             "laplacian:7", "color:gray", "color:sepia", "color:ycrcb"})
        EXPECT_EQ(to_string(parse_filter(text)), text);
    EXPECT_EQ(to_string(parse_filter("laplacian")), "laplacian:1");  // cv::Laplacian's default KSIZE
    for (const char* bad : {"blur:0",         "blur:-3",       "blur:4",
                            "blur:abc",       "blur:",         "blur:257",
                            "blur:9.0",       "gaussian:3:-1", "gaussian:3:x",
                            "gaussian:3:1:2", "sobel:z",       "sobel:x:2",
                            "sobel:x:9",      "laplacian:2",   "laplacian:9",
                            "laplacian:x",    "laplacian:3:3", "laplacian:-1",
                            "color:purple",   "color:1,2,3",   "color:1,2,3,4,5,6,7,8,nan",
                            "unsharp:3"})
        EXPECT_THROW(parse_filter(bad), std::invalid_argument) << bad;
    for (const char* bad : {"mirror", "constant:x", "reflect:3", ""})
        EXPECT_THROW(parse_border(bad), std::invalid_argument) << bad;
    EXPECT_EQ(parse_border("constant:7").value, 7.0);
}

// Window kinds: the median and the bilateral filter.

void median_step_at(std::uint32_t* v, int a, int b) {
    const std::uint32_t x = v[a], y = v[b];
    v[a] = std::min(x, y), v[b] = std::max(x, y);
}

// The selection networks give the median of every 0-1 input (and so of
// every input: the 0-1 principle), 64 inputs at a time in the bits of a word.
template <int N>
void expect_network_selects_the_median() {
    const auto& net = kMedianNetwork<N>;
    long wrong = 0;
    const std::uint64_t inputs = std::uint64_t{1} << N;
    for (std::uint64_t base = 0; base < inputs; base += 64) {
        std::uint64_t w[N], in[N];
        for (int i = 0; i < N; ++i) {
            std::uint64_t bits = 0;
            for (int lane = 0; lane < 64; ++lane) bits |= (((base + lane) >> i) & 1u) << lane;
            w[i] = in[i] = bits;
        }
        for (int c = 0; c < net.count; ++c) {
            const std::uint64_t a = w[net.a[c]], b = w[net.b[c]];
            w[net.a[c]] = a & b;
            w[net.b[c]] = a | b;
        }
        for (int lane = 0; lane < 64 && base + lane < inputs; ++lane) {
            int ones = 0;
            for (int i = 0; i < N; ++i) ones += static_cast<int>((in[i] >> lane) & 1u);
            wrong += static_cast<int>((w[net.median] >> lane) & 1u) != (ones > N / 2 ? 1 : 0);
        }
    }
    EXPECT_EQ(wrong, 0) << N << " inputs, " << net.count << " comparators";
}

TEST(CpuMedian, NetworksSelectTheMedianOfEveryZeroOneInput) {
    expect_network_selects_the_median<9>();
    expect_network_selects_the_median<25>();
    EXPECT_LE(kMedianNetwork<9>.count, 20);
    EXPECT_LE(kMedianNetwork<25>.count, 132);
}

// Two windows sharing their first S inputs (the GPU's two rows a thread:
// K x (K - 1) samples): the network's comparators before
// median_network_prefix(S) read only those, so running them once and the
// rest on each window's copy gives both medians.
template <int N, int S>
void expect_shared_prefix_gives_both_medians() {
    constexpr int p = median_network_prefix<N>(S);
    const auto& net = kMedianNetwork<N>;
    for (int c = 0; c < p; ++c) ASSERT_TRUE(net.a[c] < S && net.b[c] < S);
    std::mt19937 random(N);
    for (int trial = 0; trial < 2000; ++trial) {
        std::uint32_t v[N], u[N], a[N], b[N];
        for (int i = 0; i < N; ++i) v[i] = a[i] = random() % 7;
        for (int i = 0; i < N; ++i) u[i] = b[i] = i < S ? v[i] : random() % 7;
        for (int c = 0; c < p; ++c) median_step_at(v, net.a[c], net.b[c]);
        for (int i = 0; i < S; ++i) u[i] = v[i];
        for (int c = p; c < net.count; ++c)
            median_step_at(v, net.a[c], net.b[c]), median_step_at(u, net.a[c], net.b[c]);
        std::sort(a, a + N), std::sort(b, b + N);
        ASSERT_EQ(v[net.median], a[N / 2]);
        ASSERT_EQ(u[net.median], b[N / 2]);
    }
}

TEST(CpuMedian, NetworksSharePrefixesBetweenNeighbouringRows) {
    expect_shared_prefix_gives_both_medians<9, 6>();
    expect_shared_prefix_gives_both_medians<25, 20>();
    // Most of the work is shared: for 25 samples 103 of 132 comparators.
    EXPECT_GE(median_network_prefix<9>(6), 7);
    EXPECT_GE(median_network_prefix<25>(20), 100);
}

TEST(CpuMedian, FloatKeysFollowTheTotalOrderAndReadBack) {
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    const float ordered[] = {-nan, -inf, -3.5f, -1e-40f, -0.f, 0.f, 1e-40f, 1.f, 3.4e38f, inf, nan};
    for (std::size_t i = 0; i + 1 < std::size(ordered); ++i)
        EXPECT_LT(rank_key(ordered[i]), rank_key(ordered[i + 1])) << i;
    for (const float v : ordered) {
        const float back = from_rank_key<float>(rank_key(v));
        EXPECT_EQ(std::memcmp(&back, &v, sizeof v), 0) << v;
    }
    EXPECT_EQ(from_rank_key<std::uint16_t>(rank_key(std::uint16_t{65535})), 65535);
}

// The GPU's 1-bit radix selection and the CPU's 8-bit digits both give the
// nth_element of the keys, at every rank, with and without key bounds.
TEST(CpuMedian, RadixSelectionEqualsNthElementForOneAndEightBitDigits) {
    cv::RNG rng(7);
    for (const int bits : {8, 16, 32})
        for (const int n : {1, 2, 9, 49, 50, 121}) {
            std::vector<std::uint32_t> keys(static_cast<std::size_t>(n));
            for (auto& k : keys) {
                k = bits == 32 ? static_cast<std::uint32_t>(rng.next()) : rng.next() & ((1u << bits) - 1u);
                if (rng.uniform(0, 4) == 0) k = keys[0];  // duplicates
                if (bits == 32 && rng.uniform(0, 3) == 0)
                    k = (keys[0] & 0xffff0000u) | (k & 0xffffu);  // shared top bits
            }
            const auto visit = [&](auto&& fn) {
                for (const std::uint32_t k : keys) fn(k);
            };
            const std::uint32_t lo = *std::min_element(keys.begin(), keys.end()),
                                hi = *std::max_element(keys.begin(), keys.end());
            const std::uint32_t all = bits == 32 ? 0xffffffffu : (1u << bits) - 1u;
            for (int rank = 0; rank < n; ++rank) {
                std::vector<std::uint32_t> sorted = keys;
                std::nth_element(sorted.begin(), sorted.begin() + rank, sorted.end());
                SCOPED_TRACE(std::to_string(bits) + " bits, " + std::to_string(n) + " keys, rank " +
                             std::to_string(rank));
                EXPECT_EQ(radix_select<1>(visit, bits, rank, lo, hi), sorted[rank]);
                EXPECT_EQ(radix_select<1>(visit, bits, rank, 0u, all), sorted[rank]);
                EXPECT_EQ(radix_select<8>(visit, bits, rank, 0u, all), sorted[rank]);
                EXPECT_EQ(radix_select<8>(visit, bits, rank, lo, hi), sorted[rank]);
            }
        }
}

// 16u and 32f at every K (OpenCV stops at 5; the reference is a brute-force
// nth_element), 8u at K >= 7 (OpenCV's histograms), K larger than the image,
// 1x1 and single rows and columns, every border.
TEST(CpuMedian, AnyKernelSizeDepthAndBorderEqualsTheReference) {
    // Heights of odd and even rows a task (K = 5 takes two output rows at once).
    const cv::Size sizes[] = {{1, 1}, {1, 9}, {9, 1}, {23, 19}, {5, 4}, {37, 2}, {40, 13}};
    unsigned seed = 4000;
    for (const int k : {1, 3, 5, 7, 9, 11, 31})
        for (const Depth depth : kDepths)
            for (const int channels : {1, 3, 4})
                for (const char* border_text : kBorders)
                    for (const cv::Size size : sizes) {
                        if (k == 31 && size.area() > 20) continue;  // K far above the image: small ones
                        const cv::Mat src = random_image(size.width, size.height, channels, depth, seed++);
                        const FilterRun node{MedianFilter{k}, parse_border(border_text), ScheduleSpec{}};
                        SCOPED_TRACE("median:" + std::to_string(k) + " " + border_text + " " + depth_name(depth) +
                                     " c" + std::to_string(channels) + " " + std::to_string(size.width) + "x" +
                                     std::to_string(size.height));
                        const cv::Mat got = run_cpu(node, src);
                        const auto r = check_against_opencv(node, src, got);
                        ASSERT_TRUE(r.ok) << r.where;
                    }
}

// 16-bit samples at K >= 7 run a two-level histogram: medians that jump
// across many blocks of 256 values up and down, values on block edges (0,
// 255, 256, 65535), runs of equal values, on rows wide enough to slide far.
TEST(CpuMedian, SixteenBitHistogramFollowsJumpsAcrossBlocks) {
    cv::Mat src(37, 211, CV_16UC3);
    cv::RNG rng(31);
    const std::uint16_t edges[] = {0, 1, 255, 256, 257, 511, 512, 32767, 32768, 65279, 65280, 65535};
    for (int y = 0; y < src.rows; ++y)
        for (int x = 0; x < src.cols * 3; ++x) {
            const int band = (x / 3 / 17 + y / 9) % 4;  // patches of low, high, edge and random values
            auto& v = src.ptr<std::uint16_t>(y)[x];
            v = band == 0   ? static_cast<std::uint16_t>(rng.uniform(0, 300))
                : band == 1 ? static_cast<std::uint16_t>(rng.uniform(65000, 65536))
                : band == 2 ? edges[rng.uniform(0, static_cast<int>(std::size(edges)))]
                            : static_cast<std::uint16_t>(rng.uniform(0, 65536));
        }
    for (const int k : {7, 15, 33})
        for (const char* border_text : {"replicate", "constant:65535", "constant:0", "wrap"}) {
            const FilterRun node{MedianFilter{k}, parse_border(border_text), ScheduleSpec{}};
            SCOPED_TRACE("median:" + std::to_string(k) + " " + border_text);
            const auto r = check_against_opencv(node, src, run_cpu(node, src));
            EXPECT_TRUE(r.ok) << r.where;
        }
}

// Float samples at K >= 7 run through their ranks among a band's distinct
// keys (the naive schedule): bands of many distinct values (every sample
// its own: blocks of 256 and 65536 ranks crossed), few (levels), NaN,
// infinities and signed zeros.
TEST(CpuMedian, FloatRanksEqualTheReference) {
    // A band of 38 rows of 1806 samples holds over 65536 distinct keys at K = 7.
    cv::Mat wide(38, 1800, CV_32FC1), noise(70, 300, CV_32FC1), levels(61, 89, CV_32FC3);
    cv::RNG rng(77);
    rng.fill(wide, cv::RNG::UNIFORM, -1e6, 1e6);
    wide.forEach<float>([](float& v, const int* at) { v += 1e4f * static_cast<float>(at[1]); });  // medians rise
    rng.fill(noise, cv::RNG::UNIFORM, -1e6, 1e6);
    rng.fill(levels, cv::RNG::UNIFORM, 0, 4);
    levels.forEach<cv::Vec3f>([](cv::Vec3f& v, const int*) {
        for (int c = 0; c < 3; ++c) v[c] = std::floor(v[c]) / 3.f;
    });
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    const float specials[] = {nan, -nan, inf, -inf, 0.f, -0.f};
    for (int i = 0; i < 400; ++i)
        levels.ptr<float>(rng.uniform(0, levels.rows))[rng.uniform(0, levels.cols * 3)] = specials[i % 6];
    const struct {
        int k;
        cv::Mat src;
    } cases[] = {{7, wide}, {31, noise}, {31, levels}, {101, levels(cv::Rect(3, 2, 41, 29))}};
    for (const auto& [k, src] : cases)
        for (const char* border_text : {"replicate", "reflect101", "constant:-2", "wrap"}) {
            const FilterRun node{MedianFilter{k}, parse_border(border_text), ScheduleSpec{}};
            SCOPED_TRACE("median:" + std::to_string(k) + " " + border_text + " " + std::to_string(src.cols) + "x" +
                         std::to_string(src.rows));
            const cv::Mat got = run_cpu(node, src);
            // The per-pixel radix selection (tile schedules) orders NaN and -0 as the rank path does;
            // nth_element, the reference, cannot: it takes the noise only. memcmp: NaN and -0 must come back
            // as the samples they are.
            FilterRun per_pixel = node;
            per_pixel.schedule = parse_schedule("tile:16x16");
            const cv::Mat want = src.type() == CV_32FC3 ? run_cpu(per_pixel, src) : opencv_reference(node, src);
            ASSERT_EQ(std::memcmp(got.data, want.data, got.total() * got.elemSize()), 0);
        }
}

// The rank histogram's block moves, directly: windows mixing low and high
// keys (ranks below and above 65536 and 131072) make the median jump
// whole blocks of 256 and 65536 ranks both ways, from the first pixel of
// a row on; against nth_element over the same keys.
TEST(CpuMedian, RankHistogramJumpsWholeBlocksBothWays) {
    cv::RNG rng(5);
    const int k = 5, rows = 4, width = 40000, in_width = width + k - 1;
    std::vector<std::uint32_t> keys(static_cast<std::size_t>(rows + k - 1) * in_width);
    for (auto& key : keys) key = rng.uniform(0, 2) ? 0xC0000000u + (rng.next() >> 2) : rng.next() >> 2;
    std::vector<std::uint32_t> got(static_cast<std::size_t>(rows) * width);
    cpu::median_key_rows(k, keys.data(), in_width, 1, width, rows, got.data(), width);
    std::vector<std::uint32_t> window(k * k);
    for (int y = 0; y < rows; ++y)
        for (int x = 0; x < width; ++x) {
            for (int j = 0; j < k; ++j)
                for (int i = 0; i < k; ++i)
                    window[j * k + i] = keys[static_cast<std::size_t>(y + j) * in_width + x + i];
            std::nth_element(window.begin(), window.begin() + k * k / 2, window.end());
            ASSERT_EQ(got[static_cast<std::size_t>(y) * width + x], window[k * k / 2]) << x << "," << y;
        }
}

TEST(CpuMedian, LargestKernelOnATinyImage) {
    for (const Depth depth : kDepths) {
        const cv::Mat src = random_image(3, 2, 3, depth, 77);
        for (const char* border_text : {"replicate", "reflect101", "constant:7", "wrap"}) {
            const FilterRun node{MedianFilter{255}, parse_border(border_text), ScheduleSpec{}};
            const auto r = check_against_opencv(node, src, run_cpu(node, src));
            EXPECT_TRUE(r.ok) << depth_name(depth) << " " << border_text << ": " << r.where;
        }
    }
}

TEST(CpuMedian, DefaultBorderIsReplicateAsOpenCV) {
    const Border b = FilterKind<MedianFilter>::default_border(MedianFilter{5});
    EXPECT_EQ(b.mode, BorderMode::replicate);
    // cv::medianBlur itself, on a photo, bit for bit.
    const cv::Mat photo = cv::imread(test::samples_dir() + "/butterfly.jpg", cv::IMREAD_UNCHANGED);
    ASSERT_FALSE(photo.empty());
    for (const int k : {3, 5, 7, 15}) {
        const FilterRun node{MedianFilter{k}, b, parse_schedule("tile:16x16")};
        cv::Mat want;
        cv::medianBlur(photo, want, k);
        const cv::Mat got = run_cpu(node, photo);
        EXPECT_EQ(cv::norm(got, want, cv::NORM_INF), 0) << k;
    }
}

// NaN is a value above +inf (and -NaN below -inf): a window with NaN in it
// has a definite median, the same at every position and schedule.
TEST(CpuMedian, NanSortsAboveInfinity) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    cv::Mat src(1, 3, CV_32FC1);
    src.at<float>(0, 0) = nan, src.at<float>(0, 1) = inf, src.at<float>(0, 2) = 1.f;
    // 3x3 replicate windows: x=0 holds nan x6, inf x3; x=1 nan, inf, 1 x3 each; x=2 inf x3, 1 x6.
    const cv::Mat got = run_cpu(FilterRun{MedianFilter{3}, Border{BorderMode::replicate, 0}, ScheduleSpec{}}, src);
    EXPECT_TRUE(std::isnan(got.at<float>(0, 0)));
    EXPECT_EQ(got.at<float>(0, 1), inf);
    EXPECT_EQ(got.at<float>(0, 2), 1.f);
}

// e^x from multiplies and adds only, for the bilateral weights: within 4e-6
// of std::exp relative (7e-7 from -10 to 0), e^0 exactly 1, 0 below -86.9
// (2^round(x log2 e) below the normal floats), NaN kept.
TEST(CpuBilateral, ExpPolynomialIsCloseToStdExp) {
    EXPECT_EQ(exp_nonpositive(0.f), 1.f);
    EXPECT_EQ(exp_nonpositive(-87.f), 0.f);
    EXPECT_EQ(exp_nonpositive(-std::numeric_limits<float>::max()), 0.f);
    EXPECT_TRUE(std::isnan(exp_nonpositive(std::numeric_limits<float>::quiet_NaN())));
    double worst = 0, worst_near = 0;
    for (float x = -86.9f; x <= 0.f; x += 0.000731f) {
        const double want = std::exp(static_cast<double>(x)), error = std::abs(exp_nonpositive(x) - want) / want;
        worst = std::max(worst, error);
        if (x >= -10.f) worst_near = std::max(worst_near, error);
    }
    EXPECT_LT(worst, 4e-6);
    EXPECT_LT(worst_near, 7e-7);
    EXPECT_GT(exp_nonpositive(-86.89f), 0.f);
}

// The bilateral rows the naive schedule runs (8-bit and float, 1 and 3
// channels: vectors of 8 or 16 pixels a tap, then the op for each row's
// rest) against BilateralOp<T>::operator() pixel by pixel, bit for bit:
// widths around the vector steps, a view inside a larger image, radii
// whose space weights leave the table (r > 12), three borders; float with
// NaN, +-inf and -0 samples (NaNs compare as NaN, as same_sample says).
template <class T>
void expect_bilateral_rows_match_per_pixel(Depth depth) {
    unsigned seed = 60;
    for (const char* text : {"bilateral:5:0.4:2", "bilateral:9:75:75", "bilateral:0:30:9"})
        for (const int channels : {1, 3})
            for (const int width : {1, 7, 8, 9, 16, 17, 33, 70})
                for (const char* border : {"reflect101", "constant:7", "wrap"}) {
                    const cv::Mat big = random_image(width + 3, 9, channels, depth, seed++);
                    cv::Mat src = big(cv::Rect(1, 1, width, 7));
                    if constexpr (std::is_same_v<T, float>) {
                        const float special[] = {std::numeric_limits<float>::quiet_NaN(),
                                                 std::numeric_limits<float>::infinity(),
                                                 -std::numeric_limits<float>::infinity(), -0.f};
                        if (width > 8) src.ptr<float>(3)[5 * channels] = special[seed % 4];
                    }
                    const BilateralFilter f = std::get<BilateralFilter>(parse_filter(text));
                    cv::Mat got(7, width, src.type(), cv::Scalar::all(3)), want = got.clone();
                    const auto op = [&](cv::Mat& out) {
                        return FilterKind<BilateralFilter>::op<T>(f, view_of(src), parse_border(border), view_of(out));
                    };
                    if (!cpu::bilateral_rows(op(got), 0, 7)) GTEST_SKIP() << "this CPU has no AVX2";
                    const BilateralOp<T> per_pixel = op(want);
                    for (int y = 0; y < 7; ++y)
                        for (int x = 0; x < width; ++x) per_pixel(x, y);
                    for (int y = 0; y < 7; ++y)
                        for (int i = 0; i < width * channels; ++i)
                            ASSERT_TRUE(same_sample(got.ptr<T>(y)[i], want.ptr<T>(y)[i]))
                                << text << " " << border << " " << depth_name(depth) << " c" << channels << " width "
                                << width << " at row " << y << " sample " << i << ": " << +got.ptr<T>(y)[i] << " vs "
                                << +want.ptr<T>(y)[i];
                }
}

TEST(CpuBilateral, RowsMatchPerPixelBitForBit) {
    expect_bilateral_rows_match_per_pixel<std::uint8_t>(Depth::u8);
    expect_bilateral_rows_match_per_pixel<float>(Depth::f32);
}

// 16u, 4 channels, and the 32f path with 4 channels (OpenCV refuses them):
// the same definition in double; D <= 0 and even D as OpenCV reads them.
TEST(CpuBilateral, DepthsAndChannelsOpenCVRefusesEqualTheDefinition) {
    const char* filters[] = {"bilateral:5:3000:3", "bilateral:4:20:1", "bilateral:0:500:1.2", "bilateral:7:0.4:2"};
    unsigned seed = 5000;
    for (const char* filter_text : filters)
        for (const Depth depth : kDepths)
            for (const int channels : {1, 3, 4})
                for (const char* border_text : kBorders)
                    for (const cv::Size size : {cv::Size(1, 1), cv::Size(1, 7), cv::Size(19, 11)}) {
                        const cv::Mat src = random_image(size.width, size.height, channels, depth, seed++);
                        const FilterRun node{parse_filter(filter_text), parse_border(border_text), ScheduleSpec{}};
                        SCOPED_TRACE(std::string(filter_text) + " " + border_text + " " + depth_name(depth) + " c" +
                                     std::to_string(channels) + " " + std::to_string(size.width) + "x" +
                                     std::to_string(size.height));
                        const auto r = check_against_opencv(node, src, run_cpu(node, src));
                        ASSERT_TRUE(r.ok) << r.where << "; max diff " << r.max_diff;
                    }
}

// OpenCV 4.6 reads a sigma <= 0 as 1; a tiny sigma leaves every pixel as it
// was (the weights of all other taps underflow to 0), as later OpenCV's copy.
TEST(CpuBilateral, SigmaEdgeCasesAsOpenCV) {
    for (const Depth depth : {Depth::u8, Depth::f32}) {
        const cv::Mat src = random_image(37, 23, 3, depth, 11);
        const cv::Mat zero = run_cpu(FilterRun{parse_filter("bilateral:5:0:-2"), Border{}, ScheduleSpec{}}, src);
        const cv::Mat one = run_cpu(FilterRun{parse_filter("bilateral:5:1:1"), Border{}, ScheduleSpec{}}, src);
        EXPECT_EQ(std::memcmp(zero.data, one.data, one.total() * one.elemSize()), 0);
        cv::Mat want;
        cv::bilateralFilter(src, want, 5, 0, -2);
        EXPECT_LE(cv::norm(zero, want, cv::NORM_INF), depth == Depth::u8 ? 1 : 1e-4);
        for (const char* tiny : {"bilateral:5:1e-7:3", "bilateral:5:30:1e-7", "bilateral:9:1e-30:1e-30"}) {
            const cv::Mat got = run_cpu(FilterRun{parse_filter(tiny), Border{}, ScheduleSpec{}}, src);
            // 8-bit: the input bit for bit. Float: within rounding, since a border can bring the centre
            // into its own window again (reflect101 at x = 1 reads x = 1 for dx = -2), and v (1 + w) / (1 + w)
            // need not round back to v.
            EXPECT_LE(cv::norm(got, src, cv::NORM_INF), depth == Depth::u8 ? 0.0 : 1e-6)
                << tiny << " " << depth_name(depth);
        }
    }
    EXPECT_EQ(bilateral_radius(BilateralFilter{0, 1, 0}), 2);    // cvRound(1.5)
    EXPECT_EQ(bilateral_radius(BilateralFilter{0, 1, 3}), 4);    // cvRound(4.5): to even
    EXPECT_EQ(bilateral_radius(BilateralFilter{0, 1, 0.2}), 1);  // at least 1
    EXPECT_EQ(bilateral_radius(BilateralFilter{4, 1, 30}), 2);   // D / 2
}

// The op is passed by value to a CUDA kernel: small and trivially copyable.
TEST(CpuWindowKinds, OpsAreSmallTriviallyCopyableValues) {
    static_assert(std::is_trivially_copyable_v<MedianOp<float>>);
    static_assert(std::is_trivially_copyable_v<BilateralOp<std::uint8_t>>);
    EXPECT_LE(sizeof(BilateralOp<std::uint8_t>), 4096u);
    EXPECT_LE(sizeof(MedianOp<float>), 128u);
}

TEST(CpuParse, WindowKindsRoundTripAndBadArgumentsNameTheForm) {
    for (const char* text : {"median:1", "median:3", "median:255", "bilateral:9:75:75", "bilateral:0:0.5:84",
                             "bilateral:-1:20:3", "bilateral:4:1e-07:2.5"})
        EXPECT_EQ(to_string(parse_filter(text)), text);
    const std::pair<const char*, const char*> bad[] = {
        {"median:4", "median:K"},
        {"median:0", "median:K"},
        {"median:257", "median:K"},
        {"median:abc", "median:K"},
        {"median:", "median:K"},
        {"median:3:3", "median:K"},
        {"bilateral:9:abc:5", "bilateral:D:SIGMA_COLOR:SIGMA_SPACE"},
        {"bilateral:9:5", "bilateral:D:SIGMA_COLOR:SIGMA_SPACE"},
        {"bilateral:x:5:5", "bilateral:D:SIGMA_COLOR:SIGMA_SPACE"},
        {"bilateral:9:5:nan", "bilateral:D:SIGMA_COLOR:SIGMA_SPACE"},
        {"bilateral:256:5:5", "bilateral:D:SIGMA_COLOR:SIGMA_SPACE"},
        {"bilateral:0:5:85", "bilateral:D:SIGMA_COLOR:SIGMA_SPACE"},
        {"bilateral:0:5:1e300", "bilateral:D:SIGMA_COLOR:SIGMA_SPACE"},
    };
    for (const auto& [text, form] : bad) {
        try {
            parse_filter(text);
            ADD_FAILURE() << text << " was accepted";
        } catch (const std::invalid_argument& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find(form), std::string::npos) << text << ": " << what;
            EXPECT_EQ(what.find('\n'), std::string::npos) << text << ": " << what;
        }
    }
}

// Real photos, the CLI's "done when": cv::blur 9 for every schedule.
std::vector<fs::path> photos() {
    std::vector<fs::path> all;
    for (const fs::path& dir : {fs::path(test::samples_dir()), fs::path(CBI_SHARED_IMAGES_DIR)}) {
        if (!fs::is_directory(dir)) continue;
        for (const auto& e : fs::directory_iterator(dir))
            if (e.path().extension() == ".jpg" || e.path().extension() == ".png") all.push_back(e.path());
    }
    std::sort(all.begin(), all.end());
    return all;
}

TEST(CpuPhotos, BoxBlur9EqualsOpenCVForEverySchedule) {
    const cv::Mat photo = cv::imread(test::samples_dir() + "/butterfly.jpg", cv::IMREAD_UNCHANGED);
    ASSERT_FALSE(photo.empty());
    for (const ScheduleSpec& schedule : example_schedules()) {
        const FilterRun node{parse_filter("blur:9"), Border{}, schedule};
        if (!supports(schedule, node.filter)) continue;  // vec:N is for pointwise filters
        const auto r = check_against_opencv(node, photo, run_cpu(node, photo));
        EXPECT_TRUE(r.ok) << schedule.to_string() << ": " << r.where;
    }
}

TEST(CpuPhotos, EveryFilterOnEveryPhoto) {
    const auto all = photos();
    ASSERT_GE(all.size(), 3u);
    for (const fs::path& path : all) {
        const cv::Mat photo = cv::imread(path.string(), cv::IMREAD_UNCHANGED);
        ASSERT_FALSE(photo.empty()) << path;
        const Depth depth = photo.depth() == CV_8U ? Depth::u8 : photo.depth() == CV_16U ? Depth::u16 : Depth::f32;
        for (const char* filter_text : kFilters) {
            // The schedule a user gets on the CPU (the other schedules: CpuSchedules, on random images).
            const Filter filter = parse_filter(filter_text);
            const FilterRun node{filter, Border{},
                                 default_schedule(filter, Border{}, {depth, photo.channels(), false})};
            if (!refuses_input(node.filter, depth, photo.channels()).empty())
                continue;  // adaptive: 8-bit 1-channel only
            const cv::Mat got = run_cpu(node, photo);
            const auto r = check_against_opencv(node, photo, got);
            EXPECT_TRUE(r.ok) << path << " " << filter_text << ": " << r.where << " max diff " << r.max_diff;
        }
    }
}

// Morphology with OpenCV's default border (morphologyDefaultBorderValue,
// cbi's constant:max, what a node without --border takes), each operation
// and shape, on sizes down to 1x1 and windows larger than the image.
TEST(CpuMorphology, DefaultBorderEqualsOpenCVBitForBit) {
    unsigned seed = 7;
    for (const char* text : {"erode:3", "dilate:5x3:cross", "open:7:ellipse", "close:4x6:ellipse:2",
                             "gradient:3:rect:2", "tophat:9x1", "blackhat:6:cross", "erode:41:ellipse"}) {
        const Filter filter = parse_filter(text);
        const FilterRun node{filter, default_border_of(filter), ScheduleSpec{}};
        for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32})
            for (const cv::Size size : {cv::Size{1, 1}, cv::Size{1, 9}, cv::Size{9, 1}, cv::Size{37, 23}}) {
                const cv::Mat src = random_image(size.width, size.height, 3, depth, seed++);
                SCOPED_TRACE(std::string(text) + " " + depth_name(depth) + " " + std::to_string(size.width) + "x" +
                             std::to_string(size.height));
                const auto result = compare(run_cpu(node, src), opencv_reference(node, src), 0, 0);
                EXPECT_TRUE(result.ok) << result.where << "; max diff " << result.max_diff;
            }
    }
}

// The centred 3x3 gradient is one op per pixel too (MorphGradientOp's
// operator(): both extremes of the window, then their difference), on an
// index-map schedule equal to OpenCV on every border, depth and tiny size.
TEST(CpuMorphology, TheThreeByThreeGradientPerPixelEqualsOpenCV) {
    const Filter filter = parse_filter("gradient:3");
    EXPECT_TRUE(expansion_of(filter, true).steps.empty());
    EXPECT_FALSE(expansion_of(parse_filter("gradient:3:ellipse"), true).steps.empty());
    unsigned seed = 900;
    for (const char* border_text : {"default", "replicate", "reflect", "reflect101", "constant:200", "wrap"})
        for (const Depth depth : kDepths)
            for (const int channels : {1, 3, 4})
                for (const cv::Size size : {cv::Size{1, 1}, cv::Size{2, 1}, cv::Size{1, 5}, cv::Size{37, 23}}) {
                    const Border border = std::string_view(border_text) == "default" ? default_border_of(filter)
                                                                                     : parse_border(border_text);
                    const cv::Mat src = random_image(size.width, size.height, channels, depth, seed++);
                    SCOPED_TRACE(std::string(border_text) + " " + depth_name(depth) + " c" + std::to_string(channels) +
                                 " " + std::to_string(size.width) + "x" + std::to_string(size.height));
                    const cv::Mat want = opencv_reference(FilterRun{filter, border, ScheduleSpec{}}, src);
                    const auto result =
                        compare(run_cpu(FilterRun{filter, border, parse_schedule("column:32")}, src), want, 0, 0);
                    EXPECT_TRUE(result.ok) << result.where << "; max diff " << result.max_diff;
                }
}

// open, close, tophat and blackhat of one pass each are one op on the CPU's
// row kernels (MorphPairOp): its band of first-pass rows bordered as a stored
// image would be, with elements taller than a task's rows and than the
// image (rows named by reflect, wrap across the image), a constant border
// that wins (tophat's difference saturating), every depth; per pixel
// (an index-map schedule) the same nodes as passes.
TEST(CpuMorphology, CompoundsInOneOpEqualOpenCVOnEveryBorder) {
    unsigned seed = 300;
    for (const char* text : {"open:5", "close:3:rect:3", "tophat:5x41", "blackhat:41x3:cross", "open:3x31:ellipse",
                             "tophat:7:ellipse", "close:9x61"}) {
        const Filter filter = parse_filter(text);
        EXPECT_TRUE(expansion_of(filter, false).steps.empty()) << text << ": one op on the CPU's rows";
        EXPECT_FALSE(expansion_of(filter, true).steps.empty()) << text << ": passes per pixel";
        for (const char* border_text : {"default", "replicate", "reflect", "reflect101", "constant:200", "wrap"})
            for (const Depth depth : kDepths)
                for (const cv::Size size :
                     {cv::Size{1, 1}, cv::Size{9, 1}, cv::Size{1, 40}, cv::Size{37, 23}, cv::Size{301, 263}}) {
                    const Border border = std::string_view(border_text) == "default" ? default_border_of(filter)
                                                                                     : parse_border(border_text);
                    const cv::Mat src = random_image(size.width, size.height, 3, depth, seed++);
                    SCOPED_TRACE(std::string(text) + " " + border_text + " " + depth_name(depth) + " " +
                                 std::to_string(size.width) + "x" + std::to_string(size.height));
                    const cv::Mat want = opencv_reference(FilterRun{filter, border, ScheduleSpec{}}, src);
                    for (const char* schedule : {"naive", "column:32"}) {
                        if (size.area() > 4096 && std::string_view(schedule) != "naive") continue;
                        const auto result =
                            compare(run_cpu(FilterRun{filter, border, parse_schedule(schedule)}, src), want, 0, 0);
                        EXPECT_TRUE(result.ok) << schedule << ": " << result.where << "; max diff " << result.max_diff;
                    }
                }
    }
}

// The CPU's row kernels (cpu/rank.hpp) on images tall and wide enough for
// several tasks, chunks of rows and vector lanes with a ragged end: large
// rectangles (van Herk, doubling runs), ellipses, iterations, and the median's
// sorted columns, networks and histograms (8- and 16-bit), each border and
// depth.
TEST(CpuRank, LargeImagesEqualOpenCVBitForBit) {
    unsigned seed = 90;
    for (const char* text : {"erode:3", "dilate:5", "erode:15", "dilate:21x9", "erode:9x33", "erode:61", "open:5",
                             "close:3:rect:3", "dilate:15:ellipse", "median:3", "median:5", "median:9"})
        for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32})
            for (const char* border_text : {"default", "replicate", "reflect101", "constant:7", "wrap"}) {
                const Filter filter = parse_filter(text);
                const Border border =
                    std::string_view(border_text) == "default" ? default_border_of(filter) : parse_border(border_text);
                const FilterRun node{filter, border, ScheduleSpec{}};
                const cv::Mat src = random_image(301, 263, 3, depth, seed++);
                SCOPED_TRACE(std::string(text) + " " + border_text + " " + depth_name(depth));
                const auto result = compare(run_cpu(node, src), opencv_reference(node, src), 0, 0);
                EXPECT_TRUE(result.ok) << result.where << "; max diff " << result.max_diff;
            }
}

}  // namespace
}  // namespace cbi
