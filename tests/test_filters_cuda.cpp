// CUDA backend on a real GPU: the CPU suite's filter x depth x channel x
// border x size matrix, for every registered schedule and several block
// sizes. Integer outputs must equal the CPU backend bit for bit; float
// within 1e-5 relative; both against OpenCV as on the CPU. Every output
// buffer is poisoned first, so an unwritten pixel fails. Without a visible
// CUDA device every test is skipped (and counted as skipped).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "filters/cpu/backend.hpp"
#include "filters/cuda/backend.hpp"
#include "filters/kernel_path.hpp"
#include "gpu.hpp"
#include "pipeline/cuda_runtime.hpp"
#include "pipeline/error.hpp"
#include "pipeline/executor.hpp"
#include "reference.hpp"

namespace cbi {
namespace {

using namespace test;

// Runs one node on the GPU into a poisoned device buffer and returns the
// downloaded result.
cv::Mat run_gpu_poisoned(const FilterRun& node, const DeviceImage& src, int out_channels, const Stream& stream,
                         int block) {
    DeviceImage dst(src.view.width, src.view.height, out_channels, src.view.depth);
    const std::size_t bytes = dst.view.stride * dst.view.height;
    CBI_CUDA_CHECK(cudaMemsetAsync(dst.view.data, 0xA5, bytes, stream.get()), "poison");
    run_node_cuda(node, src.view, dst.view, stream.get(), block);
    cv::Mat out(src.view.height, src.view.width, cv_type(src.view.depth, out_channels));
    download(dst.view, view_of(out), stream.get());
    stream.synchronize("test");
    return out;
}

// Runs one node on the GPU into the view `inner` of a canvas poisoned with
// 0xA5 and returns the whole downloaded canvas; bytes_outside tells whether
// anything beyond the view was written.
cv::Mat run_gpu_in_canvas(const FilterRun& node, const ImageView& src, cv::Size canvas_size, const cv::Rect& inner,
                          int out_channels, const Stream& stream, int block) {
    DeviceImage canvas(canvas_size.width, canvas_size.height, out_channels, src.depth);
    CBI_CUDA_CHECK(cudaMemsetAsync(canvas.view.data, 0xA5, canvas.view.stride * canvas.view.height, stream.get()),
                   "poison");
    run_node_cuda(node, src, canvas.view.crop(inner.x, inner.y, inner.width, inner.height), stream.get(), block);
    cv::Mat all(canvas_size, cv_type(src.depth, out_channels));
    download(canvas.view, view_of(all), stream.get());
    stream.synchronize("test");
    return all;
}

// The bytes of `all` outside `inner` that are not the 0xA5 poison (clears `inner` to it).
std::ptrdiff_t bytes_outside(cv::Mat& all, const cv::Rect& inner) {
    for (int y = inner.y; y < inner.br().y; ++y)
        std::memset(all.ptr(y) + inner.x * all.elemSize(), 0xA5, inner.width * all.elemSize());
    return std::count_if(all.datastart, all.dataend, [](unsigned char b) { return b != 0xA5; });
}

// Integer outputs bit-exact; float within 1e-5 of the data's scale.
test::Comparison compare_with_cpu(const cv::Mat& gpu, const cv::Mat& cpu, double scale) {
    if (gpu.depth() != CV_32F) {
        test::Comparison c;
        c.ok = gpu.size() == cpu.size() && gpu.type() == cpu.type() &&
               std::memcmp(gpu.data, cpu.data, gpu.total() * gpu.elemSize()) == 0;
        if (!c.ok) c.where = "not bit-exact: max diff " + std::to_string(cv::norm(gpu, cpu, cv::NORM_INF));
        return c;
    }
    return test::compare(gpu, cpu, 0, 1e-5, scale);
}

class CudaMatrix : public ::testing::TestWithParam<MatrixParam> {};

TEST_P(CudaMatrix, EqualsCpuAndOpenCVForEveryScheduleBorderAndSize) {
    REQUIRE_GPU();
    const auto [filter_text, depth, channels] = GetParam();
    const Filter filter = parse_filter(filter_text);
    const bool color = std::holds_alternative<ColorFilter>(filter);
    const auto schedules = test::matrix_schedules();
    const Stream stream;
    unsigned seed = 1;
    // Compound kinds (open, adaptive, ...) run as their steps: through the
    // executor on both backends, the steps on the node's schedule where they can.
    const bool compound = !expansion_of(filter).steps.empty();
    RunOptions gpu_options;
    gpu_options.device = resolve_device(parse_device("cuda"));
    for (const char* border_text : kBorders) {
        if (color && border_text != kBorders[0]) continue;
        for (const cv::Size size : kSizes) {
            const cv::Mat src = random_image(size.width, size.height, channels, depth, seed++);
            FilterRun node{filter, parse_border(border_text), ScheduleSpec{}};
            if (compound) {
                const FilterRun nodes[] = {node};
                const cv::Mat cpu = as_mat(run_sequence(nodes, view_of(src), RunOptions{}).view()).clone();
                const double scale = test::output_scale(node, src);
                const auto vs_opencv = test::compare(cpu, test::opencv_reference(node, src),
                                                     test::int_tolerance(node, depth), 1e-5, scale);
                ASSERT_TRUE(vs_opencv.ok) << "CPU executor disagrees with OpenCV: " << vs_opencv.where;
                for (const ScheduleSpec& schedule : schedules) {
                    if (!supports(schedule, filter)) continue;
                    const FilterRun step[] = {{filter, node.border, schedule}};
                    SCOPED_TRACE(std::string(filter_text) + "-" + border_text + "-" + std::to_string(size.width) + "x" +
                                 std::to_string(size.height) + "-" + schedule.to_string());
                    const cv::Mat gpu = as_mat(run_sequence(step, view_of(src), gpu_options).view()).clone();
                    const auto r = compare_with_cpu(gpu, cpu, scale);
                    ASSERT_TRUE(r.ok) << r.where;
                }
                continue;
            }
            const int out_channels = output_channels(filter, channels);
            cv::Mat cpu(src.size(), cv_type(depth, out_channels));
            run_node_cpu(node, view_of(src), view_of(cpu));
            const double scale = test::output_scale(node, src);
            const auto vs_opencv = test::compare(cpu, test::opencv_reference(node, src),
                                                 test::int_tolerance(node, depth), test::float_tolerance(node), scale);
            ASSERT_TRUE(vs_opencv.ok) << "CPU reference disagrees with OpenCV: " << vs_opencv.where;

            DeviceImage device_src(size.width, size.height, channels, depth);
            upload(view_of(src), device_src.view, stream.get());
            for (const ScheduleSpec& schedule : schedules) {
                if (!supports(schedule, filter)) continue;  // refused when a graph is built
                node.schedule = schedule;
                const std::string name = std::string(filter_text) + "-" + border_text + "-" + depth_name(depth) + "-c" +
                                         std::to_string(channels) + "-" + std::to_string(size.width) + "x" +
                                         std::to_string(size.height) + "-" + schedule.to_string();
                SCOPED_TRACE(name);
                cv::Mat gpu;
                try {
                    gpu = run_gpu_poisoned(node, device_src, out_channels, stream, 256);
                } catch (const Unsupported& e) {
                    // A tile whose halo and samples outgrow this GPU's shared memory
                    // (sep:128x16 for blur:31 on 4-channel 16u/32f) is refused at
                    // launch with the reason (cuda/launch.cuh), never run wrong.
                    EXPECT_NE(std::string(e.what()).find("shared memory"), std::string::npos) << e.what();
                    continue;
                }
                const auto r = compare_with_cpu(gpu, cpu, scale);
                ASSERT_TRUE(r.ok) << r.where << "; images: " << test::dump_failure(name, gpu, cpu);
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Matrix, CudaMatrix, ::testing::ValuesIn(test::filter_matrix(kFilters, kDepths)), matrix_name);

TEST(Cuda, BlockSizeDoesNotChangeTheResult) {
    REQUIRE_GPU();
    const cv::Mat src = random_image(333, 97, 3, Depth::u8, 5);
    const Stream stream;
    DeviceImage device_src(src.cols, src.rows, 3, Depth::u8);
    upload(view_of(src), device_src.view, stream.get());
    for (const char* schedule :
         {"naive", "column:32", "zigzag:32", "tile:32x8", "smem:32x8", "smem:64x16", "sep:64x32", "sep:7x5"}) {
        const FilterRun node{parse_filter("gaussian:7"), Border{}, parse_schedule(schedule)};
        const cv::Mat expected = run_gpu_poisoned(node, device_src, 3, stream, 256);
        for (int block : {1, 32, 33, 64, 128, 512, 1024}) {
            const cv::Mat got = run_gpu_poisoned(node, device_src, 3, stream, block);
            EXPECT_EQ(std::memcmp(got.data, expected.data, got.total() * got.elemSize()), 0)
                << schedule << " " << block;
        }
    }
    EXPECT_THROW(run_node_cuda(FilterRun{}, device_src.view, device_src.view, stream.get(), 0), std::invalid_argument);
}

// vec:N on 3-channel float colour stages each block's row segment in shared
// memory (word copies when the segment is 16-byte aligned, bytes otherwise;
// blocks capped so the stage fits 48 KiB and the kernel's registers fit);
// 8-bit runs the plain kernel. Every block size gives the CPU result, for
// whole images and a ROI at an odd address.
TEST(Cuda, StagedColourEqualsCpuForEveryBlockSize) {
    REQUIRE_GPU();
    const Stream stream;
    for (const Depth depth : {Depth::u8, Depth::f32}) {
        const cv::Mat big = random_image(400, 120, 3, depth, 31);
        for (const bool roi : {false, true}) {
            const cv::Mat src = roi ? big(cv::Rect(1, 3, 333, 97)) : big;
            DeviceImage device_big(big.cols, big.rows, 3, depth);
            upload(view_of(big), device_big.view, stream.get());
            const ImageView in = roi ? device_big.view.crop(1, 3, src.cols, src.rows) : device_big.view;
            for (const char* filter_text : {"color:sepia", "color:gray"}) {
                FilterRun node{parse_filter(filter_text), Border{}, ScheduleSpec{}};
                const int out_channels = output_channels(node.filter, 3);
                cv::Mat cpu(src.size(), cv_type(depth, out_channels));
                run_node_cpu(node, view_of(src), view_of(cpu));
                for (const char* schedule : {"vec:1", "vec:4", "vec:8", "vec:16"}) {
                    node.schedule = parse_schedule(schedule);
                    DeviceImage out(src.cols, src.rows, out_channels, depth);
                    for (int block : {1, 32, 33, 64, 128, 512, 1024}) {
                        const std::size_t bytes = out.view.stride * out.view.height;
                        CBI_CUDA_CHECK(cudaMemsetAsync(out.view.data, 0xA5, bytes, stream.get()), "poison");
                        run_node_cuda(node, in, out.view, stream.get(), block);
                        cv::Mat got(src.size(), cv_type(depth, out_channels));
                        download(out.view, view_of(got), stream.get());
                        stream.synchronize("test");
                        const auto r = compare_with_cpu(got, cpu, 1.0);
                        ASSERT_TRUE(r.ok) << filter_text << " " << schedule << " block " << block << " "
                                          << depth_name(depth) << (roi ? " roi" : "") << ": " << r.where;
                    }
                }
            }
        }
    }
}

// Colour on 1-channel images, read as R = G = B (vec:N: the 1-channel
// kernels; the per-pixel schedules: ColorOp with the matrix's step 0): for
// every schedule that runs colour and two block sizes, on whole images and
// views at odd addresses (float ones holding NaNs, signalling NaNs, +-Inf,
// -0.0 and denormals), written into a view of a poisoned canvas whose other
// bytes must stay. Gray is the image itself bit for bit; other matrices
// equal the CPU backend (integers bit for bit, floats within 1e-5, NaN
// where it has NaN).
TEST(Cuda, ColourOnGrayImagesEqualsCpu) {
    REQUIRE_GPU();
    const Stream stream;
    const char* colours[] = {"color:gray", "color:sepia", "color:ycrcb",
                             "color:0.5,0.25,0.25,10,-0.2,1.1,0.1,-5,0.3,0.3,0.3,0",
                             "color:1.5,-0.25,0.1,0.3,0.3,0.3,-2,0.5,2.5"};
    const auto same = [](const cv::Mat& a, const cv::Mat& b, bool exact) {
        if (a.size() != b.size() || a.type() != b.type()) return false;
        if (exact || a.depth() != CV_32F) return std::memcmp(a.data, b.data, a.total() * a.elemSize()) == 0;
        const float* p = a.ptr<float>();
        const float* q = b.ptr<float>();
        for (std::size_t i = 0; i < a.total() * a.channels(); ++i) {
            if (std::isnan(p[i]) || std::isnan(q[i]) || std::isinf(q[i])) {
                if (std::isnan(p[i]) != std::isnan(q[i]) || (!std::isnan(q[i]) && p[i] != q[i])) return false;
            } else if (!(std::abs(p[i] - q[i]) <= 1e-5f * std::max(1.f, std::abs(q[i])))) {
                return false;
            }
        }
        return true;
    };
    unsigned seed = 80;
    for (const Depth depth : kDepths)
        for (const cv::Size size :
             {cv::Size{1, 1}, cv::Size{17, 1}, cv::Size{31, 7}, cv::Size{333, 97}, cv::Size{1000, 3}})
            for (const bool roi : {false, true}) {
                cv::Mat big = random_image(size.width + 4, size.height + 3, 1, depth, seed++);
                if (depth == Depth::f32) {
                    const std::uint32_t bits[] = {0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7f800000u,
                                                  0xff800000u, 0x80000000u, 0x00000001u, 0x7f7fffffu};
                    cv::RNG rng(seed);
                    for (int i = 0; i < 24; ++i)
                        std::memcpy(&big.ptr<float>(rng.uniform(0, big.rows))[rng.uniform(0, big.cols)], &bits[i % 8],
                                    4);
                }
                const cv::Mat src = roi ? big(cv::Rect(1, 2, size.width, size.height))
                                        : big(cv::Rect(0, 0, size.width, size.height)).clone();
                DeviceImage device_big(big.cols, big.rows, 1, depth), device_whole(size.width, size.height, 1, depth);
                upload(view_of(big), device_big.view, stream.get());
                upload(view_of(src), device_whole.view, stream.get());
                const ImageView in = roi ? device_big.view.crop(1, 2, size.width, size.height) : device_whole.view;
                for (const char* colour : colours) {
                    FilterRun node{parse_filter(colour), Border{}, ScheduleSpec{}};
                    const bool gray = std::string_view(colour) == "color:gray";
                    const int out_channels = output_channels(node.filter, 1);
                    cv::Mat cpu(src.size(), cv_type(depth, out_channels));
                    run_node_cpu(node, view_of(src), view_of(cpu));
                    const cv::Mat want = gray ? src.clone() : cpu;
                    for (const ScheduleSpec& schedule : test::matrix_schedules()) {
                        if (!supports(schedule, node.filter)) continue;
                        node.schedule = schedule;
                        for (const int block : {256, 33}) {
                            SCOPED_TRACE(std::string(colour) + " " + depth_name(depth) + " " +
                                         std::to_string(size.width) + "x" + std::to_string(size.height) +
                                         (roi ? " view " : " whole ") + schedule.to_string() + " block " +
                                         std::to_string(block));
                            const cv::Rect inner(1, 2, size.width, size.height);
                            cv::Mat all = run_gpu_in_canvas(node, in, {size.width + 3, size.height + 4}, inner,
                                                            out_channels, stream, block);
                            const cv::Mat got = all(inner).clone();
                            ASSERT_TRUE(same(got, want, gray)) << "max diff " << cv::norm(got, want, cv::NORM_INF);
                            ASSERT_EQ(bytes_outside(all, inner), 0) << "a byte outside the output view was written";
                        }
                    }
                }
            }
}

TEST(Cuda, ChainOnRoiEqualsCpuChain) {
    REQUIRE_GPU();
    const cv::Mat big = random_image(640, 480, 4, Depth::u16, 9);
    const cv::Mat roi = big(cv::Rect(17, 29, 401, 333));
    const FilterRun nodes[] = {{parse_filter("color:ycrcb"), Border{}, parse_schedule("column:32")},
                               {parse_filter("gaussian:5:1.2"), parse_border("reflect"), parse_schedule("zigzag:32")},
                               {parse_filter("sobel:mag:3"), parse_border("constant:100"), parse_schedule("tile:32x8")},
                               {parse_filter("blur:9"), Border{}, parse_schedule("naive")}};
    RunOptions gpu;
    gpu.device = resolve_device(parse_device("cuda"));
    const Image on_gpu = run_sequence(nodes, view_of(roi), gpu);
    const Image on_cpu = run_sequence(nodes, view_of(roi), RunOptions{});
    EXPECT_EQ(cv::norm(as_mat(on_gpu.view()), as_mat(on_cpu.view()), cv::NORM_INF), 0.0);
    EXPECT_GT(cv::norm(as_mat(on_gpu.view()), cv::NORM_INF), 0.0);
}

TEST(Cuda, RealPhotoBlur9EqualsCpuForEverySchedule) {
    REQUIRE_GPU();
    const cv::Mat photo = cv::imread(test::samples_dir() + "/butterfly.jpg", cv::IMREAD_UNCHANGED);
    ASSERT_FALSE(photo.empty());
    RunOptions gpu;
    gpu.device = resolve_device(parse_device("cuda:0"));
    for (const ScheduleSpec& schedule : example_schedules()) {
        const FilterRun nodes[] = {{parse_filter("blur:9"), Border{}, schedule}};
        if (!supports(schedule, nodes[0].filter)) continue;  // vec:N is for pointwise filters
        const Image a = run_sequence(nodes, view_of(photo), gpu);
        const Image b = run_sequence(nodes, view_of(photo), RunOptions{});
        EXPECT_EQ(cv::norm(as_mat(a.view()), as_mat(b.view()), cv::NORM_INF), 0.0) << schedule.to_string();
    }
}

TEST(Cuda, SmemTileTooLargeForSharedMemoryIsAClearError) {
    REQUIRE_GPU();
    const cv::Mat src = random_image(300, 300, 1, Depth::f32, 8);
    RunOptions gpu;
    gpu.device = resolve_device(parse_device("cuda"));
    const FilterRun nodes[] = {{parse_filter("blur:255"), Border{}, parse_schedule("smem:1024x4")}};
    try {
        run_sequence(nodes, view_of(src), gpu);
        FAIL() << "a tile needing more shared memory than the GPU has was accepted";
    } catch (const Unsupported& e) {
        EXPECT_NE(std::string(e.what()).find("use a smaller tile"), std::string::npos) << e.what();
    }
}

TEST(Cuda, SepTileTooLargeForSharedMemoryIsAClearError) {
    REQUIRE_GPU();
    const cv::Mat src = random_image(300, 300, 1, Depth::f32, 8);
    RunOptions gpu;
    gpu.device = resolve_device(parse_device("cuda"));
    const FilterRun nodes[] = {{parse_filter("blur:255"), Border{}, parse_schedule("sep:1024x64")}};
    try {
        run_sequence(nodes, view_of(src), gpu);
        FAIL() << "a tile needing more shared memory than the GPU has was accepted";
    } catch (const Unsupported& e) {
        EXPECT_NE(std::string(e.what()).find("use a smaller tile"), std::string::npos) << e.what();
    }
}

// sep:WxH with kernels larger than the matrix's (halos up to 15, runs of 8
// that the tile and image edges clip) and a strided ROI input: integers
// bit-exact with the CPU backend, floats within 1e-5 (box slides running sums).
TEST(Cuda, SepLargeKernelsAndRoiEqualCpu) {
    REQUIRE_GPU();
    const Stream stream;
    unsigned seed = 40;
    for (const Depth depth : kDepths)
        for (const int channels : {1, 3, 4}) {
            const cv::Mat big = random_image(700, 300, channels, depth, seed++);
            const cv::Mat src = big(cv::Rect(3, 5, 601, 203));
            DeviceImage device_src(src.cols, src.rows, channels, depth);
            upload(view_of(src), device_src.view, stream.get());
            for (const char* filter_text :
                 {"blur:31", "blur:15", "gaussian:31", "gaussian:11:3", "sobel:mag:5", "laplacian:5"})
                for (const char* border_text : {"reflect101", "constant:3", "wrap"}) {
                    FilterRun node{parse_filter(filter_text), parse_border(border_text), ScheduleSpec{}};
                    cv::Mat cpu(src.size(), cv_type(depth, channels));
                    run_node_cpu(node, view_of(src), view_of(cpu));
                    for (const char* schedule : {"sep:64x32", "sep:32x16", "sep:13x40", "sep:1x1"}) {
                        node.schedule = parse_schedule(schedule);
                        SCOPED_TRACE(std::string(filter_text) + " " + border_text + " " + depth_name(depth) + " c" +
                                     std::to_string(channels) + " " + schedule);
                        const cv::Mat gpu = run_gpu_poisoned(node, device_src, channels, stream, 256);
                        const auto r = compare_with_cpu(gpu, cpu, test::output_scale(node, src));
                        ASSERT_TRUE(r.ok) << r.where;
                    }
                }
        }
}

// stream:WxH on 8-bit box, Gaussian and Sobel runs its own kernel (cuda/strip8.cuh):
// lanes of 8 bytes, 8-byte loads and stores only on aligned rows inside the
// image. Here the input is a strided ROI whose rows start at odd addresses
// (byte-by-byte loads everywhere), then an aligned copy; the output is
// written into an ROI of a larger poisoned image at an odd offset (byte
// stores), bytes around it must stay untouched. Strips from 1 to 1024 pixels
// wide and 1 to 64 rows tall; every kernel size the kernel takes.
TEST(Cuda, Stream8BitOnRoisAndUnalignedRowsEqualsCpu) {
    REQUIRE_GPU();
    const Stream stream;
    unsigned seed = 60;
    for (const int channels : {1, 3, 4}) {
        const cv::Mat big = random_image(700, 150, channels, Depth::u8, seed++);
        const cv::Mat roi = big(cv::Rect(3, 5, 601, 131));
        for (const bool aligned : {false, true}) {
            const cv::Mat src = aligned ? roi.clone() : roi;
            DeviceImage device_big(big.cols, big.rows, channels, Depth::u8);
            upload(view_of(big), device_big.view, stream.get());
            const ImageView device_src = aligned ? ImageView{} : device_big.view.crop(3, 5, src.cols, src.rows);
            DeviceImage device_copy(src.cols, src.rows, channels, Depth::u8);
            if (aligned) upload(view_of(src), device_copy.view, stream.get());
            const ImageView in = aligned ? device_copy.view : device_src;
            for (const char* filter_text : {"blur:3", "blur:5", "blur:7", "blur:9", "gaussian:3", "gaussian:9",
                                            "gaussian:7:4", "sobel:mag:3", "sobel:x:3", "sobel:y:5", "sobel:mag:7"})
                for (const char* border_text : {"reflect101", "constant:3", "wrap", "replicate"}) {
                    FilterRun node{parse_filter(filter_text), parse_border(border_text), ScheduleSpec{}};
                    cv::Mat cpu(src.size(), CV_8UC(channels));
                    run_node_cpu(node, view_of(src), view_of(cpu));
                    for (const char* schedule : {"stream:1x1", "stream:64x16", "stream:1024x64", "stream:300x7"}) {
                        node.schedule = parse_schedule(schedule);
                        SCOPED_TRACE(std::string(filter_text) + " " + border_text + " c" + std::to_string(channels) +
                                     (aligned ? " aligned " : " odd rows ") + schedule);
                        // Into an ROI at (1, 2) of a poisoned larger image: the bytes around it must stay poisoned.
                        DeviceImage out_big(src.cols + 3, src.rows + 4, channels, Depth::u8);
                        const std::size_t bytes = out_big.view.stride * out_big.view.height;
                        CBI_CUDA_CHECK(cudaMemsetAsync(out_big.view.data, 0xA5, bytes, stream.get()), "poison");
                        run_node_cuda(node, in, out_big.view.crop(1, 2, src.cols, src.rows), stream.get(), 256);
                        cv::Mat got(out_big.view.height, out_big.view.width, CV_8UC(channels));
                        download(out_big.view, view_of(got), stream.get());
                        stream.synchronize("test");
                        const cv::Rect inner(1, 2, src.cols, src.rows);
                        ASSERT_EQ(cv::norm(got(inner), cpu, cv::NORM_INF), 0.0);
                        cv::Mat outside = got.clone();
                        outside(inner).setTo(cv::Scalar::all(0xA5));
                        ASSERT_EQ(cv::countNonZero(outside.reshape(1) != 0xA5), 0)
                            << "a byte outside the output ROI was written";
                    }
                }
        }
    }
}

// The 8-bit Sobel magnitude takes sqrt.approx on the GPU (ops.hpp,
// magnitude_sqrt): every gradient pair a 3x3 Sobel gives with |gx|, |gy|
// up to 300 (beyond 255 it saturates), one pair per 3x3 patch, must equal
// the CPU's correctly rounded result on every 8-bit kernel. Left column and
// top row zero: gx = p02 + 2 p12 + p22, gy = 2 p21 + p22 (gx and gy always
// share their parity).
TEST(Cuda, SobelMagnitudeOfEveryGradientPairEqualsCpu) {
    REQUIRE_GPU();
    constexpr int kMax = 300, kPerRow = 256;
    std::vector<std::pair<int, int>> pairs;
    for (int gx = 0; gx <= kMax; ++gx)
        for (int gy = gx % 2; gy <= kMax; gy += 2) pairs.emplace_back(gx, gy);
    const int rows = static_cast<int>((pairs.size() + kPerRow - 1) / kPerRow);
    cv::Mat src(rows * 3, kPerRow * 3, CV_8UC1, cv::Scalar(0));
    for (std::size_t i = 0; i < pairs.size(); ++i) {
        const auto [gx, gy] = pairs[i];
        const int x = static_cast<int>(i % kPerRow) * 3, y = static_cast<int>(i / kPerRow) * 3, odd = gx % 2;
        src.at<std::uint8_t>(y + 2, x + 2) = static_cast<std::uint8_t>(odd);
        src.at<std::uint8_t>(y + 1, x + 2) = static_cast<std::uint8_t>((gx - odd) / 2);
        src.at<std::uint8_t>(y + 2, x + 1) = static_cast<std::uint8_t>((gy - odd) / 2);
    }
    const Stream stream;
    DeviceImage device_src(src.cols, src.rows, 1, Depth::u8);
    upload(view_of(src), device_src.view, stream.get());
    FilterRun node{parse_filter("sobel:mag"), parse_border("reflect101"), ScheduleSpec{}};
    cv::Mat cpu(src.size(), CV_8UC1);
    run_node_cpu(node, view_of(src), view_of(cpu));
    for (int i = 0; i < 40; ++i) {  // the patches give the pairs asked for (spot checks against OpenCV)
        const auto [gx, gy] = pairs[i * 997 % pairs.size()];
        const std::size_t at = i * 997 % pairs.size();
        const int x = static_cast<int>(at % kPerRow) * 3 + 1, y = static_cast<int>(at / kPerRow) * 3 + 1;
        EXPECT_EQ(cpu.at<std::uint8_t>(y, x),
                  cv::saturate_cast<std::uint8_t>(std::sqrt(static_cast<float>(gx * gx + gy * gy))));
    }
    for (const char* schedule :
         {"stream:256x16", "stream:13x40", "sep:64x32", "smem:32x8", "naive"}) {  // the first: the default
        SCOPED_TRACE(schedule);
        node.schedule = parse_schedule(schedule);
        EXPECT_EQ(cv::norm(run_gpu_poisoned(node, device_src, 1, stream, 256), cpu, cv::NORM_INF), 0.0);
    }
}

// The float box on sep:WxH slides running sums; an Inf or NaN in the input
// must not spread beyond the windows that contain it (the outputs whose sum
// is not finite are recomputed directly).
TEST(Cuda, SepFloatBoxKeepsNonFiniteInputsLocal) {
    REQUIRE_GPU();
    cv::Mat src = random_image(257, 129, 1, Depth::f32, 77);
    src.at<float>(10, 20) = std::numeric_limits<float>::infinity();
    src.at<float>(60, 100) = -std::numeric_limits<float>::infinity();
    src.at<float>(61, 101) = std::numeric_limits<float>::infinity();
    src.at<float>(100, 200) = std::numeric_limits<float>::quiet_NaN();
    const Stream stream;
    DeviceImage device_src(src.cols, src.rows, 1, Depth::f32);
    upload(view_of(src), device_src.view, stream.get());
    for (const char* filter_text : {"blur:9", "blur:31"}) {
        FilterRun node{parse_filter(filter_text), Border{}, ScheduleSpec{}};
        cv::Mat cpu(src.size(), CV_32FC1);
        run_node_cpu(node, view_of(src), view_of(cpu));
        for (const char* schedule : {"sep:64x32", "sep:7x5"}) {
            node.schedule = parse_schedule(schedule);
            const cv::Mat gpu = run_gpu_poisoned(node, device_src, 1, stream, 256);
            int bad = 0;
            for (int y = 0; y < src.rows; ++y)
                for (int x = 0; x < src.cols; ++x) {
                    const float g = gpu.at<float>(y, x), c = cpu.at<float>(y, x);
                    const bool same = std::isnan(c)   ? std::isnan(g)
                                      : std::isinf(c) ? g == c
                                                      : std::abs(g - c) <= 1e-5 * std::max(1.f, std::abs(c));
                    if (!same && bad++ < 3)
                        ADD_FAILURE() << filter_text << " " << schedule << " at (" << x << "," << y << "): gpu " << g
                                      << " cpu " << c;
                }
            EXPECT_EQ(bad, 0) << filter_text << " " << schedule;
        }
    }
}

// Tile strategies with a traversal order over their tiles (+ORDER,
// cuda/order.cuh): every order gives the row-major GPU result bit for bit
// (poisoned outputs: each tile computed, none twice with other values) on
// sizes with many tiles and clipped edges, for smem, sep (301x200 on
// sep:16x3: 67 tile rows, blocks take two tiles), stream (8-bit: the
// stream8 kernel; float: thread rows of a block take consecutive strips)
// and fused stencil pairs (smem, sep).
TEST(Cuda, EveryTileOrderEqualsRowMajorBitExactly) {
    REQUIRE_GPU();
    const Stream stream;
    const char* orders[] = {"+column:1", "+column:2", "+column:4", "+column:1000",
                            "+zigzag:3", "+tile:2x3", "+tile:1x1"};
    unsigned seed = 700;
    for (const Depth depth : {Depth::u8, Depth::f32})
        for (const int channels : {1, 3})
            for (const cv::Size size : {cv::Size{37, 23}, cv::Size{1, 1}, cv::Size{200, 3}, cv::Size{301, 200}}) {
                const cv::Mat src = random_image(size.width, size.height, channels, depth, seed++);
                DeviceImage device_src(size.width, size.height, channels, depth);
                upload(view_of(src), device_src.view, stream.get());
                const Border border = parse_border("reflect101");
                for (const bool fused : {false, true})
                    for (const char* filter_text : {"blur:3", "gaussian:5", "sobel:mag:3", "laplacian:3"})
                        for (const char* strategy : {"sep:5x3", "sep:16x3", "smem:4x2", "stream:6x2", "stream:64x4"}) {
                            FilterRun node{parse_filter(filter_text), border, parse_schedule(strategy)};
                            if (fused) {
                                if (std::string_view(strategy).starts_with("stream")) continue;  // smem and sep fuse
                                node.fused_stencil = FusedStencil{parse_filter("gaussian:3"), border};
                            }
                            const cv::Mat want = run_gpu_poisoned(node, device_src, channels, stream, 256);
                            for (const char* order : orders) {
                                node.schedule = parse_schedule(std::string(strategy) + order);
                                SCOPED_TRACE(std::string(fused ? "gaussian:3 then " : "") + filter_text + " " +
                                             depth_name(depth) + " c" + std::to_string(channels) + " " +
                                             node.schedule.to_string() + " " + std::to_string(size.width) + "x" +
                                             std::to_string(size.height));
                                const cv::Mat got = run_gpu_poisoned(node, device_src, channels, stream, 256);
                                ASSERT_EQ(std::memcmp(got.data, want.data, want.total() * want.elemSize()), 0);
                            }
                        }
            }
}

TEST(Cuda, OutOfMemoryIsReportedAndRecoverable) {
    REQUIRE_GPU();
    try {
        DeviceBuffer huge(std::size_t{1} << 50);  // 1 PiB
        FAIL() << "a 1 PiB allocation succeeded";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("out of device memory"), std::string::npos) << e.what();
    }
    const cv::Mat src = random_image(64, 64, 1, Depth::f32, 3);
    RunOptions gpu;
    gpu.device = resolve_device(parse_device("cuda"));
    const FilterRun nodes[] = {{parse_filter("blur:3"), Border{}, ScheduleSpec{}}};
    const Image out = run_sequence(nodes, view_of(src), gpu);
    EXPECT_GT(cv::norm(as_mat(out.view()), cv::NORM_INF), 0.0);
}

TEST(Cuda, DeviceSelectionErrorsNameTheDevice) {
    REQUIRE_GPU();
    try {
        resolve_device(parse_device("cuda:99"));
        FAIL() << "cuda:99 accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("cuda:99"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(resolve_device(parse_device("auto")).cuda);
}

TEST(Cuda, GraphEqualsCpuAndRerunAllocatesNothing) {
    REQUIRE_GPU();
    const char* json = R"({"schedule": "column:32",
        "nodes": [{"name": "blurred", "filter": "gaussian:9:2", "input": "input", "schedule": "tile:32x8"},
                  {"name": "sharp", "blend": "blend:1.6:-0.6", "inputs": ["input", "blurred"]},
                  {"name": "gray", "filter": "color:gray", "input": "sharp"},
                  {"name": "fine", "filter": "gaussian:5:1", "input": "gray"},
                  {"name": "coarse", "filter": "gaussian:9:2", "input": "gray", "border": "replicate"},
                  {"name": "dog", "blend": "blend:1:-1:128", "inputs": ["fine", "coarse"], "schedule": "zigzag:32"}],
        "outputs": ["sharp", "dog"]})";
    for (const Depth depth : kDepths) {
        const cv::Mat a = random_image(517, 301, 3, depth, 21), b = random_image(517, 301, 3, depth, 22);
        RunOptions gpu;
        gpu.device = resolve_device(parse_device("cuda"));
        GraphExecutor on_gpu(graph_from_json(json), gpu), on_cpu(graph_from_json(json), RunOptions{});
        for (const cv::Mat* src : {&a, &b}) {
            const auto g = on_gpu.run(view_of(*src));
            const auto c = on_cpu.run(view_of(*src));
            ASSERT_EQ(g.size(), 2u);
            for (std::size_t i = 0; i < g.size(); ++i) {
                const auto r = compare_with_cpu(as_mat(g[i]), as_mat(c[i]), test::peak_magnitude(*src));
                EXPECT_TRUE(r.ok) << depth_name(depth) << " output " << i << ": " << r.where;
            }
        }
        const std::size_t allocations = on_gpu.allocations();
        on_gpu.run(view_of(a));
        EXPECT_EQ(on_gpu.allocations(), allocations) << "a rerun on the same size allocated";
    }
}

// Otsu's threshold on the GPU (histogram and level kernels on the stream,
// then the threshold with the node's schedule): bit for bit the CPU's and
// OpenCV's image on the edge cases of test::otsu_images, for every
// pointwise schedule and several block sizes, through run_node_cuda (its
// stream-ordered scratch) and through the executor (the backend's scratch,
// reused by runs on other images and by a second node).
TEST(CudaOtsu, EqualsCpuAndOpenCVForEveryScheduleAndBlockSize) {
    REQUIRE_GPU();
    const Stream stream;
    for (const auto& [name, src] : test::otsu_images()) {
        DeviceImage device_src(src.cols, src.rows, 1, Depth::u8);
        upload(view_of(src), device_src.view, stream.get());
        // Block sizes change the per-pixel launches only: swept on the smaller images.
        const std::vector<int> blocks =
            src.total() > (1u << 20) ? std::vector<int>{256} : std::vector<int>{256, 33, 1024};
        for (const char* text : {"threshold:0:255:otsu", "threshold:9:200.5:otsu_inv", "threshold:0:1:otsu"}) {
            const Filter filter = parse_filter(text);
            FilterRun node{filter, Border{}, ScheduleSpec{}};
            cv::Mat cpu(src.size(), CV_8UC1);
            run_node_cpu(node, view_of(src), view_of(cpu));
            const auto vs_opencv = test::compare(cpu, test::opencv_reference(node, src), 0, 0, 1);
            ASSERT_TRUE(vs_opencv.ok) << name << " " << text << ": CPU disagrees with OpenCV: " << vs_opencv.where;
            for (const ScheduleSpec& schedule : test::matrix_schedules()) {
                if (!supports(schedule, filter)) continue;
                node.schedule = schedule;
                for (const int block : blocks) {
                    SCOPED_TRACE(name + " " + text + " " + schedule.to_string() + " block " + std::to_string(block));
                    const cv::Mat gpu = run_gpu_poisoned(node, device_src, 1, stream, block);
                    const auto r = compare_with_cpu(gpu, cpu, 1);
                    ASSERT_TRUE(r.ok) << r.where;
                }
            }
        }
    }
}

TEST(CudaOtsu, ExecutorReusesItsScratchAcrossImagesAndNodes) {
    REQUIRE_GPU();
    RunOptions gpu;
    gpu.device = resolve_device(parse_device("cuda"));
    // Two Otsu nodes of different images in one run: the second's histogram starts from zero.
    const char* text = "threshold:0:255:otsu | blur:3 | threshold:0:200:otsu_inv";
    GraphExecutor on_gpu(parse_pipeline(text), gpu), on_cpu(parse_pipeline(text), RunOptions{});
    const auto images = test::otsu_images();
    for (const auto& [name, src] : images) {
        SCOPED_TRACE(name);
        const cv::Mat g = as_mat(on_gpu.run(view_of(src)).front()).clone();
        const cv::Mat c = as_mat(on_cpu.run(view_of(src)).front()).clone();
        EXPECT_TRUE(compare_with_cpu(g, c, 1).ok);
    }
    // On the caller's stream (GraphExecutor::enqueue), after colour to gray.
    const cv::Mat photo = random_image(641, 479, 3, Depth::u8, 31);
    GraphExecutor gray_gpu(parse_pipeline("color:gray | threshold:0:255:otsu"), gpu),
        gray_cpu(parse_pipeline("color:gray | threshold:0:255:otsu"), RunOptions{});
    const cv::Mat want = as_mat(gray_cpu.run(view_of(photo)).front()).clone();
    DeviceImage in(photo.cols, photo.rows, 3, Depth::u8), out(photo.cols, photo.rows, 1, Depth::u8);
    const Stream caller;
    upload(view_of(photo), in.view, caller.get());
    const ImageView outs[] = {out.view};
    gray_gpu.enqueue(in.view, outs, caller.get());
    cv::Mat got(photo.rows, photo.cols, CV_8UC1);
    download(out.view, view_of(got), caller.get());
    caller.synchronize("otsu on the caller's stream");
    EXPECT_TRUE(compare_with_cpu(got, want, 1).ok);
}

TEST(CudaOtsu, RefusesImagesOtherThan8Bit1Channel) {
    REQUIRE_GPU();
    const Stream stream;
    RunOptions gpu;
    gpu.device = resolve_device(parse_device("cuda"));
    for (const auto& [depth, channels] :
         {std::pair{Depth::u8, 3}, std::pair{Depth::u16, 1}, std::pair{Depth::f32, 1}}) {
        SCOPED_TRACE(std::to_string(channels) + "-channel " + depth_name(depth));
        const cv::Mat src = random_image(9, 7, channels, depth, 3);
        DeviceImage in(src.cols, src.rows, channels, depth), out(src.cols, src.rows, channels, depth);
        upload(view_of(src), in.view, stream.get());
        const FilterRun node{parse_filter("threshold:0:255:otsu"), Border{}, parse_schedule("naive")};
        EXPECT_THROW(run_node_cuda(node, in.view, out.view, stream.get(), 256), Error);
        GraphExecutor ex(parse_pipeline("threshold:0:255:otsu"), gpu);
        try {
            ex.run(view_of(src));
            ADD_FAILURE() << "took the image";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("needs an 8-bit 1-channel image"), std::string::npos) << e.what();
        }
    }
    stream.synchronize("after the refusals");
}

// Each morphology pass on the naive schedule on device views of every
// depth and 1/3/4 channels: whole (704 wide: rows on 4 bytes), from pixel 1
// (8- and 16-bit rows off a word), 701 wide (8- and 16-bit strides off a
// word), 41 rows; into a whole poisoned image and into a view at (1, 1) of a
// poisoned canvas, whose other bytes must stay; three borders; against the
// CPU bit for bit, on the morphology kernels.
void expect_passes_on_device_views(std::span<const Filter> passes, unsigned& seed) {
    const Stream stream;
    for (const Depth depth : kDepths)
        for (const int channels : {1, 3, 4}) {
            const cv::Mat big = random_image(704, 41, channels, depth, seed++);
            DeviceImage device_big(704, 41, channels, depth), device_odd(701, 41, channels, depth);
            upload(view_of(big), device_big.view, stream.get());
            upload(view_of(big(cv::Rect(0, 0, 701, 41))), device_odd.view, stream.get());
            const std::pair<ImageView, cv::Mat> inputs[] = {
                {device_big.view, big},
                {device_big.view.crop(1, 0, 703, 41), big(cv::Rect(1, 0, 703, 41))},
                {device_odd.view, big(cv::Rect(0, 0, 701, 41))}};
            for (const auto& [in, host] : inputs)
                for (const Filter& filter : passes)
                    for (const char* border : {"", "reflect101", "wrap"})
                        for (const int pad : {0, 1}) {
                            const FilterRun node{filter, *border ? parse_border(border) : default_border_of(filter),
                                                 parse_schedule("naive")};
                            SCOPED_TRACE(to_string(filter) + " " + border + " " + depth_name(depth) + " c" +
                                         std::to_string(channels) + " " + std::to_string(in.width) + " wide, pad " +
                                         std::to_string(pad));
                            cv::Mat cpu(host.size(), host.type());
                            run_node_cpu(node, view_of(host), view_of(cpu));
                            const cv::Rect inner(pad, pad, in.width, in.height);
                            note_kernel_path(KernelPath::none);
                            cv::Mat all = run_gpu_in_canvas(node, in, {in.width + 2 * pad, in.height + 2 * pad}, inner,
                                                            channels, stream, 256);
                            EXPECT_EQ(last_kernel_path(), KernelPath::cuda_morph);
                            ASSERT_EQ(cv::norm(all(inner), cpu, cv::NORM_INF), 0.0);
                            ASSERT_EQ(bytes_outside(all, inner), 0) << "a byte outside the output view was written";
                        }
        }
}

// Rectangles' row and column passes on the naive schedule run the van Herk
// kernels (cuda/morph.cuh): narrow windows fold directly, wider ones split
// runs of outputs at one sample. Every width and height class, windows wider
// and taller than the image, iterations folded into one rectangle, every
// border, ROIs whose 8-bit rows are not word-aligned (the single-sample
// columns), against the CPU bit for bit (float: min and max are exact too).
TEST(CudaMorphology, RectanglesOfEverySizeEqualCpuOnTheVanHerkKernels) {
    REQUIRE_GPU();
    RunOptions gpu;
    gpu.device = resolve_device(parse_device("cuda"));
    const char* filters[] = {"erode:2x1",   "dilate:1x5", "erode:4x3",   "dilate:4",       "erode:5x9",
                             "dilate:33x1", "erode:1x61", "dilate:61",   "erode:151x7",    "dilate:9x151",
                             "erode:255",   "open:15x31", "gradient:23", "erode:5:rect:40"};
    const cv::Size sizes[] = {{1, 1}, {1, 17}, {19, 1}, {31, 7}, {257, 129}, {1000, 3}, {333, 301}};
    const char* borders[] = {"", "reflect101", "reflect", "replicate", "constant:7", "wrap"};
    unsigned seed = 40;
    for (const Depth depth : kDepths)
        for (const int channels : {1, 3, 4})
            for (const char* text : filters)
                for (const cv::Size size : sizes) {
                    const cv::Mat big = random_image(size.width + 3, size.height + 1, channels, depth, seed++);
                    // An odd ROI: 8-bit rows start off a word.
                    const cv::Mat src = big(cv::Rect(seed % 2, 1, size.width, size.height));
                    for (const char* border : borders) {
                        if ((size.width > 40 || size.height > 40) && border != borders[0] && border != borders[4] &&
                            std::string_view(text) != "dilate:61")
                            continue;  // the large images: two borders, all borders for one window
                        const FilterRun nodes[] = {
                            {parse_filter(text), *border ? parse_border(border) : Border{}, parse_schedule("naive")}};
                        const Image g = run_sequence(nodes, view_of(src), gpu);
                        const Image c = run_sequence(nodes, view_of(src), RunOptions{});
                        const cv::Mat a = as_mat(g.view()), b = as_mat(c.view());
                        ASSERT_TRUE(a.size() == b.size() && a.type() == b.type());
                        ASSERT_EQ(cv::norm(a, b, cv::NORM_INF), 0.0)
                            << text << " " << border << " " << depth_name(depth) << " c" << channels << " "
                            << size.width << "x" << size.height;
                    }
                }
    // The row pass on device views: rows on 4 bytes (the packed pass moves
    // whole words, a tile inside the image starting 0..3 samples past a
    // word), rows off a word (sample by sample), an odd height (the last row
    // pair half outside), destination rows off a word.
    const Filter row_passes[] = {parse_filter("dilate:4x1"), parse_filter("erode:5x1"), parse_filter("dilate:8x1"),
                                 parse_filter("erode:61x1"), parse_filter("dilate:151x1")};
    ASSERT_NO_FATAL_FAILURE(expect_passes_on_device_views(row_passes, seed));
    // One pass alone records its kernel.
    const Stream stream;
    const cv::Mat src = random_image(64, 48, 3, Depth::u8, 3);
    DeviceImage device_src(64, 48, 3, Depth::u8);
    upload(view_of(src), device_src.view, stream.get());
    for (const char* text : {"erode:9x1", "dilate:1x9", "erode:1x3"}) {
        note_kernel_path(KernelPath::none);
        run_gpu_poisoned({parse_filter(text), Border{}, parse_schedule("naive")}, device_src, 3, stream, 256);
        EXPECT_EQ(last_kernel_path(), KernelPath::cuda_morph) << text;
    }
}

// The one-pass kernel for rectangles of both sides up to kMorphOnePassSide
// (cuda/morph.cuh, one_pass; the expansion sends it the centred 3x3 only,
// and the centred 3x3 gradient, both folds in one kernel): a
// word of samples per thread down a run of rows, the taps from its
// neighbours' words through shuffles; words past a row's whole words (its
// ends, the border, rows not on 4-byte words) sample by sample. Through the
// pipeline: every small size, two iterations of 2x2 (a 3x3 anchored at 2),
// iterations that fold into a larger rectangle (split), open and gradient,
// every border, depth and channel count, images narrower than a word and
// wider than a warp's words; then each form on the kernel directly, on views
// at odd addresses and strides into a poisoned canvas; against the CPU bit
// for bit.
TEST(CudaMorphology, SmallRectanglesInOnePassEqualCpu) {
    REQUIRE_GPU();
    EXPECT_TRUE(expansion_of(parse_filter("erode:3"), true).steps.empty());  // one step on CUDA
    EXPECT_TRUE(expansion_of(parse_filter("gradient:3"), true).steps.empty());          // both folds in one pass
    EXPECT_EQ(expansion_of(parse_filter("gradient:3:rect:2"), true).steps.size(), 5u);  // 5x5: two passes each
    EXPECT_EQ(expansion_of(parse_filter("dilate:2x3"), true).steps.size(), 2u);  // not yet proven in one pass
    EXPECT_EQ(expansion_of(parse_filter("erode:4x3"), true).steps.size(), 2u);
    RunOptions gpu;
    gpu.device = resolve_device(parse_device("cuda"));
    const char* filters[] = {"erode:2",        "dilate:2",        "erode:3x2", "dilate:3x2",     "erode:2x3",
                             "dilate:2x3",     "erode:3",         "dilate:3",  "erode:3:rect:2", "dilate:3:rect:2",
                             "erode:2:rect:2", "dilate:2:rect:2", "open:3",    "gradient:3"};
    // 700 wide: whole words in every warp (rows on 4 bytes); 37 and 130: 8-bit rows that are not.
    const cv::Size sizes[] = {{1, 1}, {1, 5}, {5, 1}, {2, 2}, {3, 7}, {37, 29}, {130, 67}, {700, 40}};
    const char* borders[] = {"", "replicate", "reflect101", "reflect", "wrap", "constant:7"};
    unsigned seed = 70;
    for (const Depth depth : kDepths)
        for (const int channels : {1, 3, 4})
            for (const char* text : filters)
                for (const cv::Size size : sizes) {
                    const cv::Mat src = random_image(size.width, size.height, channels, depth, seed++);
                    for (const char* border : borders) {
                        const FilterRun nodes[] = {
                            {parse_filter(text), *border ? parse_border(border) : Border{}, parse_schedule("naive")}};
                        const cv::Mat a = as_mat(run_sequence(nodes, view_of(src), gpu).view()).clone();
                        const cv::Mat b = as_mat(run_sequence(nodes, view_of(src), RunOptions{}).view()).clone();
                        ASSERT_TRUE(a.size() == b.size() && a.type() == b.type());
                        ASSERT_EQ(cv::norm(a, b, cv::NORM_INF), 0.0)
                            << text << " " << border << " " << depth_name(depth) << " c" << channels << " "
                            << size.width << "x" << size.height;
                    }
                }
    // Each form on the kernel directly, on device views.
    const Filter passes[] = {parse_filter("erode:3"),    parse_filter("dilate:2"),
                             parse_filter("erode:2x3"),  parse_filter("dilate:3x2"),
                             parse_filter("gradient:3"), Filter{DilateFilter{3, 3, MorphShape::rect, 1, 2, 2}}};
    ASSERT_NO_FATAL_FAILURE(expect_passes_on_device_views(passes, seed));
}

// Other elements (ellipse, cross) on the naive schedule run the run kernel
// (cuda/morph.cuh): each source row's runs of 2^l samples in shared memory,
// two folded per element row. Elements wider and taller than the image and
// than a block's tile, a row of 255 (the top level), iterations, every
// border, ROIs (rows narrower than their stride), images of several tiles
// and block rows, against the CPU bit for bit (float: min and max are exact).
TEST(CudaMorphology, EllipsesAndCrossesEqualCpuOnTheRunKernel) {
    REQUIRE_GPU();
    RunOptions gpu;
    gpu.device = resolve_device(parse_device("cuda"));
    const char* filters[] = {"erode:3:ellipse",     "dilate:3:cross",     "erode:5:cross",    "dilate:5:ellipse",
                             "erode:4x6:ellipse:2", "dilate:7x3:ellipse", "erode:7x3:cross",  "dilate:15:ellipse",
                             "erode:31:ellipse",    "dilate:31:cross",    "erode:61:ellipse", "dilate:255x3:ellipse",
                             "erode:3x255:cross"};
    const cv::Size sizes[] = {{1, 1}, {1, 37}, {37, 1}, {97, 61}, {300, 19}};
    const char* borders[] = {"", "replicate", "reflect101", "constant:7", "wrap"};
    unsigned seed = 50;
    for (const Depth depth : kDepths)
        for (const int channels : {1, 3, 4})
            for (const char* text : filters)
                for (const cv::Size size : sizes) {
                    const cv::Mat big = random_image(size.width + 3, size.height + 1, channels, depth, seed++);
                    const cv::Mat src = big(cv::Rect(seed % 2, 1, size.width, size.height));
                    for (const char* border : borders) {
                        if (size.width > 40 && border != borders[0] && border != borders[3] &&
                            std::string_view(text) != "dilate:15:ellipse")
                            continue;  // the large images: two borders, all borders for one element
                        const FilterRun nodes[] = {
                            {parse_filter(text), *border ? parse_border(border) : Border{}, parse_schedule("naive")}};
                        const Image g = run_sequence(nodes, view_of(src), gpu);
                        const Image c = run_sequence(nodes, view_of(src), RunOptions{});
                        const cv::Mat a = as_mat(g.view()), b = as_mat(c.view());
                        ASSERT_TRUE(a.size() == b.size() && a.type() == b.type());
                        ASSERT_EQ(cv::norm(a, b, cv::NORM_INF), 0.0)
                            << text << " " << border << " " << depth_name(depth) << " c" << channels << " "
                            << size.width << "x" << size.height;
                    }
                }
    // One pass alone records its kernel, at every channel count.
    const Stream stream;
    for (const int channels : {1, 3, 4}) {
        const cv::Mat src = random_image(64, 48, channels, Depth::u8, 3);
        DeviceImage device_src(64, 48, channels, Depth::u8);
        upload(view_of(src), device_src.view, stream.get());
        for (const char* text : {"erode:3:ellipse", "dilate:5x3:cross", "erode:61:ellipse", "dilate:255x3:ellipse"}) {
            note_kernel_path(KernelPath::none);
            run_gpu_poisoned({parse_filter(text), Border{}, parse_schedule("naive")}, device_src, channels, stream,
                             256);
            EXPECT_EQ(last_kernel_path(), KernelPath::cuda_morph) << text << " c" << channels;
        }
    }
}

// Runs `node` on the GPU (`gpu`) and on the CPU: whether the outputs are the same bytes.
bool gpu_equals_cpu(const FilterRun& node, const cv::Mat& src, const RunOptions& gpu) {
    const FilterRun nodes[] = {node};
    const Image g = run_sequence(nodes, view_of(src), gpu);
    const Image c = run_sequence(nodes, view_of(src), RunOptions{});
    const cv::Mat a = as_mat(g.view()), b = as_mat(c.view());
    if (a.total() * a.elemSize() != b.total() * b.elemSize()) return false;
    for (int y = 0; y < a.rows; ++y)
        if (std::memcmp(a.ptr(y), b.ptr(y), a.cols * a.elemSize()) != 0) return false;
    return true;
}

// median:3 and median:5 on the naive schedule run a word of samples per
// thread (cuda/median.cuh); rows near their ends, and images whose rows do
// not start on a word, select per sample. Floats with NaN, infinities and
// both zeros order by the IEEE total order on both backends.
TEST(CudaMedian, ThreeAndFiveOnWordsEqualCpu) {
    REQUIRE_GPU();
    RunOptions gpu;
    gpu.device = resolve_device(parse_device("cuda"));
    const cv::Size sizes[] = {{2, 3}, {5, 4}, {7, 9}, {13, 2}, {64, 33}, {301, 77}};
    unsigned seed = 70;
    for (const Depth depth : kDepths)
        for (const int channels : {1, 3, 4})
            for (const char* text : {"median:3", "median:5"})
                for (const cv::Size size : sizes)
                    for (const int offset : {0, 1, 4}) {
                        cv::Mat big = random_image(size.width + 5, size.height + 2, channels, depth, seed++);
                        if (depth == Depth::f32) {
                            const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                                                      -std::numeric_limits<float>::quiet_NaN(),
                                                      std::numeric_limits<float>::infinity(),
                                                      -std::numeric_limits<float>::infinity(),
                                                      0.0f,
                                                      -0.0f};
                            auto* p = big.ptr<float>();
                            for (std::size_t k = 0; k < big.total() * channels; k += 7) p[k] = specials[k % 6];
                        }
                        const cv::Mat src = big(cv::Rect(offset, 1, size.width, size.height));
                        for (const char* border : {"", "constant:7", "reflect101", "wrap"}) {
                            const FilterRun node{parse_filter(text), *border ? parse_border(border) : Border{},
                                                 parse_schedule("naive")};
                            ASSERT_TRUE(gpu_equals_cpu(node, src, gpu))
                                << text << " " << border << " " << depth_name(depth) << " c" << channels << " "
                                << size.width << "x" << size.height << " offset " << offset;
                        }
                    }
    const cv::Mat src = random_image(64, 48, 3, Depth::u8, 3);
    DeviceImage device_src(64, 48, 3, Depth::u8);
    const Stream stream;
    upload(view_of(src), device_src.view, stream.get());
    for (const char* text : {"median:3", "median:5"}) {
        note_kernel_path(KernelPath::none);
        run_gpu_poisoned({parse_filter(text), Border{}, parse_schedule("naive")}, device_src, 3, stream, 256);
        EXPECT_EQ(last_kernel_path(), KernelPath::cuda_median) << text;
    }
    note_kernel_path(KernelPath::none);
    run_gpu_poisoned({parse_filter("bilateral:9:75:75"), Border{}, parse_schedule("naive")}, device_src, 3, stream,
                     256);
    EXPECT_EQ(last_kernel_path(), KernelPath::cuda_staged_window);
}

// 8-bit medians of K >= 7 on the naive schedule slide a histogram per sample
// column down a strip of rows (cuda/median.cuh): CPU = GPU bit for bit on
// images narrower and shorter than the window, ROIs off a word, strips'
// ends, every border (a constant's rows enter the histogram whole).
TEST(CudaMedian, HistogramsAtLargeKEqualCpu) {
    REQUIRE_GPU();
    RunOptions gpu;
    gpu.device = resolve_device(parse_device("cuda"));
    const cv::Size sizes[] = {{1, 1}, {3, 200}, {200, 3}, {150, 130}};
    unsigned seed = 90;
    for (const int channels : {1, 3, 4})
        for (const char* text : {"median:7", "median:15", "median:31", "median:101", "median:255"})
            for (const cv::Size size : sizes)
                for (const int offset : {0, 1}) {
                    const cv::Mat big = random_image(size.width + 1, size.height + 1, channels, Depth::u8, seed++);
                    const cv::Mat src = big(cv::Rect(offset, offset, size.width, size.height));
                    for (const char* border : {"", "constant:7", "reflect101", "reflect", "wrap"}) {
                        const FilterRun node{parse_filter(text), *border ? parse_border(border) : Border{},
                                             parse_schedule("naive")};
                        ASSERT_TRUE(gpu_equals_cpu(node, src, gpu)) << text << " " << border << " c" << channels
                                                                    << " " << size.width << "x" << size.height
                                                                    << " offset " << offset;
                    }
                }
    const cv::Mat src = random_image(70, 90, 3, Depth::u8, 3);
    DeviceImage device_src(70, 90, 3, Depth::u8);
    const Stream stream;
    upload(view_of(src), device_src.view, stream.get());
    note_kernel_path(KernelPath::none);
    run_gpu_poisoned({parse_filter("median:9"), Border{}, parse_schedule("naive")}, device_src, 3, stream, 256);
    EXPECT_EQ(last_kernel_path(), KernelPath::cuda_median);
}

// filter2d on a tile:WxH schedule stages each block's tile in shared memory
// (cuda/filter2d.cuh), with 1, 4 or 8 outputs a thread and 3x3 kernels on
// their own kernel: CPU = GPU bit for bit at every depth, for kernels of odd
// and even sides with zero taps, on images smaller than a tile and ROIs; a
// stage over 48 KiB (255 x 4 on 4 channels) opts in to more; a column
// schedule and tiles of other sizes run the per-pixel kernel.
// The largest 2-D kernel (kMaxFilter2DTaps, 63x63, every tap nonzero):
// its taps fill the staged kernel's parameters (1 and 3 channels) or, where
// the stage is over the shared memory (4 channels), the per-pixel op's;
// CPU = GPU bit for bit.
TEST(CudaFilter2d, KernelsOf63x63EqualCpu) {
    REQUIRE_GPU();
    RunOptions gpu;
    gpu.device = resolve_device(parse_device("cuda"));
    std::string k = "filter2d:";
    for (int j = 0; j < 63; ++j)
        for (int i = 0; i < 63; ++i)
            k += std::to_string(((j * 7 + i * 3 + i * j) % 13 - 6) / 64.0 + 1 / 128.0) +
                 (i == 62 ? (j == 62 ? "" : ";") : ",");
    unsigned seed = 40;
    for (const Depth depth : {Depth::u8, Depth::f32})
        for (const int channels : {1, 3, 4})
            for (const cv::Size size : {cv::Size{70, 70}, cv::Size{201, 90}})
                for (const char* schedule : {"tile:128x16", "tile:32x8"}) {
                    const cv::Mat src = random_image(size.width, size.height, channels, depth, seed++);
                    const FilterRun node{parse_filter(k), Border{}, parse_schedule(schedule)};
                    EXPECT_TRUE(gpu_equals_cpu(node, src, gpu)) << schedule << " " << depth_name(depth) << " c"
                                                                << channels << " " << size.width << "x" << size.height;
                }
    for (const int channels : {1, 4}) {
        const cv::Mat src = random_image(201, 90, channels, Depth::u8, 3);
        DeviceImage device_src(201, 90, channels, Depth::u8);
        const Stream stream;
        upload(view_of(src), device_src.view, stream.get());
        note_kernel_path(KernelPath::none);
        run_gpu_poisoned({parse_filter(k), Border{}, parse_schedule("tile:128x16")}, device_src, channels, stream, 256);
        EXPECT_EQ(last_kernel_path(), channels == 1 ? KernelPath::cuda_staged_window : KernelPath::cuda_index_map);
    }
}

// Past kMaxFilter2DTaps nonzero taps (up to 255x255) the taps go to device
// memory: the staged kernel's where its stage fits the shared memory, else
// the per-pixel kernel's. Bit for bit the CPU's direct sum (its index-map
// schedules; its naive one runs cv::filter2D).
TEST(CudaFilter2d, KernelsPast63x63RunPerPixelEqualCpu) {
    REQUIRE_GPU();
    RunOptions gpu;
    gpu.device = resolve_device(parse_device("cuda"));
    const auto kernel = [](int w, int h) {
        std::string k = "filter2d:";
        for (int j = 0; j < h; ++j)
            for (int i = 0; i < w; ++i)
                k += std::to_string(((j * 7 + i * 3 + i * j) % 13 - 6) / 64.0 + 1 / 256.0) +
                     (i == w - 1 ? (j == h - 1 ? "" : ";") : ",");
        return k;
    };
    unsigned seed = 80;
    for (const cv::Size k : {cv::Size{64, 64}, cv::Size{101, 70}, cv::Size{255, 255}})
        for (const Depth depth : kDepths)
            for (const int channels : {1, 3, 4}) {
                // Tiles of 128 fit the smaller kernels' images: the staged kernel on tile:128x16.
                const cv::Mat src = k.width == 255 ? random_image(40, 33, channels, depth, seed++)
                                                   : random_image(300, 140, channels, depth, seed++);
                const FilterRun cpu_node{parse_filter(kernel(k.width, k.height)), parse_border("wrap"),
                                         parse_schedule("column:32")};
                const FilterRun cpu_nodes[] = {cpu_node};
                const cv::Mat want = as_mat(run_sequence(cpu_nodes, view_of(src), RunOptions{}).view()).clone();
                for (const char* schedule : {"tile:128x16", "naive", "column:32"}) {
                    FilterRun node = cpu_node;
                    node.schedule = parse_schedule(schedule);
                    const FilterRun nodes[] = {node};
                    const cv::Mat got = as_mat(run_sequence(nodes, view_of(src), gpu).view()).clone();
                    EXPECT_EQ(cv::norm(got, want, cv::NORM_INF), 0)
                        << k << " " << schedule << " " << depth_name(depth) << " c" << channels;
                }
            }
    // A tile the image holds: 64x64 stages (60 KiB), 255x255 would need 412 KiB and runs per pixel.
    const cv::Mat src = random_image(300, 300, 1, Depth::u8, 3);
    DeviceImage device_src(300, 300, 1, Depth::u8);
    const Stream stream;
    upload(view_of(src), device_src.view, stream.get());
    for (const int side : {64, 255}) {
        note_kernel_path(KernelPath::none);
        run_gpu_poisoned({parse_filter(kernel(side, side)), Border{}, parse_schedule("tile:128x16")}, device_src, 1,
                         stream, 256);
        EXPECT_EQ(last_kernel_path(), side == 64 ? KernelPath::cuda_staged_window : KernelPath::cuda_index_map);
    }
}

// 3x3 kernels of taps n / 2^s (n in -128..127, s in 0..7) on 8-bit images
// sum in integers on the default tiles (staged3x3_int: dp4a, rounded as
// saturate_round): CPU = GPU bit for bit, rounding ties included (halves),
// saturation both ways, the extremes of n and s, 1, 3 and 4 channels, rows
// of a length not a multiple of 4 bytes, device views not on a 4-byte
// boundary (the float kernel), every border.
TEST(CudaFilter2d, IntegerTaps3x3EqualCpu) {
    REQUIRE_GPU();
    RunOptions gpu;
    gpu.device = resolve_device(parse_device("cuda"));
    const char* kernels[] = {"filter2d:0,-1,0;-1,5,-1;0,-1,0",
                             "filter2d:1,1,1;1,-8,1;1,1,1",
                             "filter2d:0.25,0.5,0.25;0.5,-3,0.5;0.25,0.5,0.25",
                             "filter2d:0.5,0,0.5;0,1.5,0;-0.5,0,0.5",
                             "filter2d:127,-128,0;0,1,0;0,3,-1",
                             "filter2d:0.0078125,-1,0;0.5,0.9921875,0.125;0,0,-0.0078125",
                             "filter2d:-2,-1,0;-1,1,1;0,1,2",
                             "filter2d:0.125,0.1,0;0,1,0;0,0,0"};  // 0.1: not such a tap, the float kernel
    const cv::Size sizes[] = {{130, 45}, {201, 90}, {1001, 37}};
    unsigned seed = 120;
    for (const int channels : {1, 3, 4})
        for (const char* text : kernels)
            for (const cv::Size size : sizes)
                for (const char* schedule : {"tile:128x16", "tile:64x32", "tile:32x64"}) {
                    const cv::Mat src = random_image(size.width, size.height, channels, Depth::u8, seed++);
                    for (const char* border : {"", "constant:7", "constant", "replicate", "wrap", "reflect"}) {
                        const FilterRun node{parse_filter(text), *border ? parse_border(border) : Border{},
                                             parse_schedule(schedule)};
                        ASSERT_TRUE(gpu_equals_cpu(node, src, gpu))
                            << text << " " << schedule << " " << border << " c" << channels << " " << size;
                    }
                }
    // Views one byte into their rows, as a device ROI is: the general kernel, the same result.
    for (const int channels : {1, 3}) {
        const cv::Mat src = random_image(300, 40, channels, Depth::u8, 9);
        DeviceImage device_src(301, 40, channels, Depth::u8);
        const Stream stream;
        const ImageView inner = device_src.view.crop(1, 0, 300, 40);
        upload(view_of(src), inner, stream.get());
        DeviceImage device_dst(300, 40, channels, Depth::u8);
        const FilterRun node{parse_filter(kernels[0]), Border{}, parse_schedule("tile:128x16")};
        run_node_cuda(node, inner, device_dst.view, stream.get(), 256);
        cv::Mat got(40, 300, src.type());
        download(device_dst.view, view_of(got), stream.get());
        stream.synchronize("test");
        const FilterRun nodes[] = {node};
        const cv::Mat want = as_mat(run_sequence(nodes, view_of(src), RunOptions{}).view()).clone();
        EXPECT_EQ(cv::norm(got, want, cv::NORM_INF), 0) << channels;
    }
}

TEST(CudaFilter2d, StagedTilesEqualCpu) {
    REQUIRE_GPU();
    RunOptions gpu;
    gpu.device = resolve_device(parse_device("cuda"));
    std::string k7, k15, wide;
    for (int j = 0; j < 15; ++j)
        for (int i = 0; i < 15; ++i) {
            const std::string tap = std::to_string(((j * 7 + i * 3 + i * j) % 11 - 5) / 50.0);
            if (j < 7 && i < 7) k7 += tap + (i == 6 ? (j == 6 ? "" : ";") : ",");
            k15 += tap + (i == 14 ? (j == 14 ? "" : ";") : ",");
        }
    for (int j = 0; j < 4; ++j)
        for (int i = 0; i < 255; ++i)
            wide += std::to_string((i * 5 + j) % 7 - 3) + (i == 254 ? (j == 3 ? "" : ";") : ",");
    const std::string kernels[] = {"filter2d:0,-1,0;-1,5,-1;0,-1,0",
                                   "filter2d:1,0;0,-1",
                                   "filter2d:0.5,-0.25,0.125,1,2;0,0,1,-1,0.3",
                                   "filter2d:" + k7,
                                   "filter2d:" + k15,
                                   "filter2d:" + wide,
                                   "filter2d:0.3,-0.7,0;1.1,0,0.25;-0.5,0.9,0.01"};
    const cv::Size sizes[] = {{1, 1}, {5, 3}, {33, 9}, {64, 33}, {301, 77}};
    unsigned seed = 90;
    for (const Depth depth : kDepths)
        for (const int channels : {1, 3, 4})
            for (const std::string& text : kernels)
                for (const cv::Size size : sizes)
                    for (const char* schedule :
                         {"tile:32x8", "tile:16x16", "tile:64x16", "tile:64x32", "tile:128x16"}) {
                        const cv::Mat big = random_image(size.width + 3, size.height + 2, channels, depth, seed++);
                        const cv::Mat src = big(cv::Rect(seed % 3, 1, size.width, size.height));
                        for (const char* border : {"", "constant:7", "replicate", "wrap"}) {
                            const FilterRun node{parse_filter(text), *border ? parse_border(border) : Border{},
                                                 parse_schedule(schedule)};
                            ASSERT_TRUE(gpu_equals_cpu(node, src, gpu))
                                << text.substr(0, 40) << " " << schedule << " " << border << " " << depth_name(depth)
                                << " c" << channels << " " << size.width << "x" << size.height;
                        }
                    }
    for (const int channels : {1, 4}) {
        const cv::Mat src = random_image(64, 48, channels, Depth::u8, 3);
        DeviceImage device_src(64, 48, channels, Depth::u8);
        const Stream stream;
        upload(view_of(src), device_src.view, stream.get());
        const auto path = [&](const std::string& text, const char* schedule) {
            note_kernel_path(KernelPath::none);
            run_gpu_poisoned({parse_filter(text), Border{}, parse_schedule(schedule)}, device_src, channels, stream,
                             256);
            return last_kernel_path();
        };
        EXPECT_EQ(path(kernels[0], "tile:32x8"), KernelPath::cuda_staged_window);
        EXPECT_EQ(path(kernels[4], "tile:16x16"), KernelPath::cuda_staged_window);
        EXPECT_EQ(path(kernels[0], "column:32"), KernelPath::cuda_index_map);
        EXPECT_EQ(path(kernels[5], "tile:32x8"), KernelPath::cuda_staged_window);   // 4 channels: over 48 KiB
        EXPECT_EQ(path(kernels[0], "tile:64x16"), KernelPath::cuda_staged_window);  // four outputs a thread
        EXPECT_EQ(path(kernels[5], "tile:64x16"), KernelPath::cuda_staged_window);
        EXPECT_EQ(path(kernels[0], "tile:64x8"), KernelPath::cuda_index_map);  // neither the block nor four
    }
    // A 3x3 kernel on a stage over 48 KiB (blocks of 1024, eight outputs a thread): the 3x3 kernel opts in
    // to the shared memory it launches with.
    for (const int channels : {1, 4}) {
        const cv::Mat src = random_image(301, 77, channels, Depth::u8, 5);
        DeviceImage device_src(301, 77, channels, Depth::u8);
        const Stream stream;
        upload(view_of(src), device_src.view, stream.get());
        const FilterRun node{parse_filter(kernels[0]), Border{}, parse_schedule("tile:256x32")};
        note_kernel_path(KernelPath::none);
        const cv::Mat got = run_gpu_poisoned(node, device_src, channels, stream, 1024);
        EXPECT_EQ(last_kernel_path(), KernelPath::cuda_staged_window);
        const FilterRun nodes[] = {node};
        const Image cpu = run_sequence(nodes, view_of(src), RunOptions{});
        EXPECT_EQ(cv::norm(got, as_mat(cpu.view()), cv::NORM_INF), 0) << channels;
    }
}

}  // namespace
}  // namespace cbi
