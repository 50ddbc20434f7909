// The default table (pipeline/defaults.hpp): every row runs what it
// matches, nodes without a schedule take it, and on the GPU the table's
// choices fuse like the best hand-written plan.
#include <gtest/gtest.h>

#include <string>

#include "filters/cpu/backend.hpp"
#include "filters/kernel_path.hpp"
#include "pipeline/defaults.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/graph.hpp"
#include "pipeline/opencv.hpp"
#include "pipeline/tuning.hpp"
#include "reference.hpp"
#if CBI_HAVE_CUDA
#include "filters/cuda/backend.hpp"
#include "pipeline/cuda_runtime.hpp"
#endif

namespace cbi {
namespace {

// A node of the row's kind: of its examples (FilterKind<F>::examples), the
// one with the largest footprint the row matches; where any size goes, the
// largest, a window that is not square counting as larger than any (rows
// for sizes up to 9 do not take them).
NodeOp example_op(const DefaultRow& row) {
    if (row.kind == "blend") return BlendFilter{};
    NodeOp chosen;
    int best = -1;
    for_each_kind([&]<class F>(std::type_identity<F>) {
        if (FilterKind<F>::name != row.kind) return;
        for (std::string_view args : FilterKind<F>::examples) {
            const Filter f = FilterKind<F>::parse(args);
            const Footprint fp = footprint_of(f);
            const int side = std::max(fp.width, fp.height);
            const int rank = fp.square || row.max_ksize > 0 ? side : kMaxKernel + 1;
            if ((row.max_ksize == 0 || side <= row.max_ksize) && rank > best) best = rank, chosen = f;
        }
    });
    EXPECT_GE(best, 0) << "no example of " << row.kind << " matches a row";
    return chosen;
}

TEST(DefaultTable, EveryRowsSchedulesParseAndTheFirstRunsWhatTheRowMatches) {
    ASSERT_FALSE(default_table().empty());
    for (const DefaultRow& row : default_table()) {
        const NodeOp op = example_op(row);
        const Depth depth = row.depth < 0 ? Depth::f32 : static_cast<Depth>(row.depth);
        const NodeFormat format{depth, row.channels > 0 ? row.channels : 3, row.cuda};
        const std::string first(row.schedules.substr(0, row.schedules.find(' ')));
        SCOPED_TRACE(std::string(row.schedules));
        const ScheduleSpec s = parse_schedule(first);
        EXPECT_TRUE(supports(s, op, Border{}));
        EXPECT_EQ(default_schedule(op, Border{}, format), s) << "an earlier row shadows this one";
    }
}

// Every (backend, filter, depth, channels) gets a schedule that runs it.
TEST(DefaultTable, EveryNodeGetsASupportedSchedule) {
    for (const bool cuda : {false, true})
        for (const char* f : {"blur:1", "blur:9", "blur:31", "gaussian:9", "gaussian:255", "sobel:x:1", "sobel:mag:3",
                              "sobel:y:7", "laplacian:1", "laplacian:3", "laplacian:7", "color:gray", "color:ycrcb"})
            for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32})
                for (const int ch : {1, 3, 4}) {
                    const Filter filter = parse_filter(f);
                    const ScheduleSpec s = default_schedule(filter, Border{}, {depth, ch, cuda});
                    EXPECT_TRUE(supports(s, filter, Border{}))
                        << f << " " << s.to_string() << (cuda ? " cuda" : " cpu");
                    // The CPU's stencils run the vectorised tiles, never the per-pixel path.
                    if (!cuda && !std::holds_alternative<ColorFilter>(filter)) {
                        EXPECT_EQ(s.family, ScheduleFamily::sep) << f;
                    }
                }
    EXPECT_EQ(default_schedule(parse_filter("blur:9"), {}, {Depth::u8, 3, false}).to_string(), "sep:256x256");
    EXPECT_EQ(default_schedule(parse_filter("sobel:x:1"), {}, {Depth::f32, 1, false}).to_string(), "sep:256x256");
    // The GPU's 8-bit stencils up to 9x9 stream; Sobel KSIZE 1 cannot, and takes the next row.
    EXPECT_EQ(default_schedule(parse_filter("blur:9"), {}, {Depth::u8, 3, true}).family, ScheduleFamily::stream);
    EXPECT_EQ(default_schedule(parse_filter("sobel:x:1"), {}, {Depth::u8, 3, true}).family, ScheduleFamily::sep);
    EXPECT_EQ(default_schedule(parse_filter("laplacian:1"), {}, {Depth::u8, 3, true}).family, ScheduleFamily::sep);
    EXPECT_EQ(default_schedule(parse_filter("laplacian:3"), {}, {Depth::u8, 3, true}).family, ScheduleFamily::stream);
    EXPECT_EQ(default_schedule(parse_filter("color:sepia"), {}, {Depth::u8, 3, true}).to_string(), "vec:8");
    // 8-bit 1-channel lookups: 16 bytes a thread.
    EXPECT_EQ(default_schedule(parse_filter("gamma:2.2"), {}, {Depth::u8, 1, true}).to_string(), "vec:16");
    EXPECT_EQ(default_schedule(parse_filter("scale:1.5"), {}, {Depth::u8, 1, true}).to_string(), "vec:16");
    EXPECT_EQ(default_schedule(parse_filter("scale:1.5"), {}, {Depth::u8, 3, true}).to_string(), "vec:8");
}

TEST(DefaultTable, NodesWithoutASchedulePlanTheTablesChoice) {
    const cv::Mat src = test::random_image(67, 45, 3, Depth::u8, 3);
    GraphExecutor ex(parse_pipeline("blur:9 | color:sepia | gaussian:31@column:8"), RunOptions{});
    const cv::Mat got = as_mat(ex.run(view_of(src)).front()).clone();
    EXPECT_EQ(ex.schedule_of(1).to_string(), "sep:256x256");
    EXPECT_EQ(ex.schedule_of(2).to_string(), "naive");
    EXPECT_EQ(ex.schedule_of(3).to_string(), "column:8");
    const std::string d = ex.describe();
    EXPECT_NE(d.find("@sep:256x256 (default table)"), std::string::npos) << d;
    EXPECT_NE(d.find("@column:8 (given)"), std::string::npos) << d;
    GraphExecutor naive(parse_pipeline("blur:9@naive | color:sepia@naive | gaussian:31@naive"), RunOptions{});
    EXPECT_EQ(cv::norm(got, as_mat(naive.run(view_of(src)).front()), cv::NORM_INF), 0.0);
}

// Routing: which kernel actually ran for a node (the launchers record it).
KernelPath cpu_path(const char* filter, const char* schedule, Depth depth, int channels) {
    const cv::Mat src = test::random_image(70, 41, channels, depth, 9);
    const Filter f = parse_filter(filter);
    cv::Mat dst(src.rows, src.cols, cv_type(depth, output_channels(f, channels)));
    note_kernel_path(KernelPath::none);
    run_node_cpu(FilterRun{f, Border{}, parse_schedule(schedule)}, view_of(src), view_of(dst));
    return last_kernel_path();
}

TEST(Routing, CpuNodesRunTheKernelTheirScheduleNames) {
    for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32})
        for (const int ch : {1, 3, 4}) {
            SCOPED_TRACE(std::to_string(static_cast<int>(depth)) + " " + std::to_string(ch));
            // The default table's choices: the vectorised paths.
            for (const char* f :
                 {"blur:9", "gaussian:9", "sobel:x", "blur:31", "sobel:mag:1", "laplacian:1", "laplacian:5"}) {
                const std::string s = default_schedule(parse_filter(f), {}, {depth, ch, false}).to_string();
                EXPECT_EQ(cpu_path(f, s.c_str(), depth, ch), KernelPath::cpu_separable_tiles) << f << " " << s;
            }
            const std::string sepia = default_schedule(parse_filter("color:sepia"), {}, {depth, ch, false}).to_string();
            EXPECT_EQ(cpu_path("color:sepia", sepia.c_str(), depth, ch), KernelPath::cpu_color_rows);
            // The thesis' orders run per pixel, in their order.
            EXPECT_EQ(cpu_path("blur:9", "column:32", depth, ch), KernelPath::cpu_index_map);
            EXPECT_EQ(cpu_path("blur:9", "naive", depth, ch), KernelPath::cpu_rows);
            EXPECT_EQ(cpu_path("blur:9", "stream:256x16+column:2", depth, ch), KernelPath::cpu_separable_tiles);
            // A blend on the table's schedule: the vectorised rows.
            const cv::Mat a = test::random_image(70, 41, ch, depth, 9), b = test::random_image(70, 41, ch, depth, 10);
            cv::Mat mix(a.size(), a.type());
            note_kernel_path(KernelPath::none);
            run_blend_cpu(BlendFilter{}, default_schedule(BlendFilter{}, {}, {depth, ch, false}), view_of(a),
                          view_of(b), view_of(mix));
            EXPECT_EQ(last_kernel_path(), KernelPath::cpu_blend_rows);
        }
    EXPECT_STREQ(to_string(KernelPath::cpu_separable_tiles), "cpu separable tiles");
}

// Stencil pairs fuse by default only where the line-buffer kernel was
// measured faster: 8-bit, on stream, and a gray conversion of BGR before
// the pair, a 3x3 Sobel at the end, or a Gaussian before a Gaussian or a
// Sobel, at any size.
TEST(DefaultPairs, OnlyPairsMeasuredFasterFuseByDefault) {
    const auto pair = [](const char* first, const char* second, const char* schedule, bool gray) {
        FilterRun run{parse_filter(second), Border{}, parse_schedule(schedule)};
        run.fused_stencil = FusedStencil{parse_filter(first), Border{}};
        if (gray) run.fused_color = std::get<ColorFilter>(parse_filter("color:gray"));
        return run;
    };
    // After a gray conversion of 3 channels, any pair the kernel takes.
    const FilterRun gray = pair("gaussian:5", "sobel:mag", "stream:256x16", true);
    EXPECT_TRUE(fuses_pair_by_default(gray, {Depth::u8, 3, true}));
    EXPECT_TRUE(fuses_pair_by_default(pair("gaussian:3", "sobel:y", "stream:256x16", true), {Depth::u8, 3, true}));
    EXPECT_TRUE(fuses_pair_by_default(pair("blur:3", "gaussian:5", "stream:128x32", true), {Depth::u8, 3, true}));
    EXPECT_FALSE(fuses_pair_by_default(gray, {Depth::u16, 3, true}));
    EXPECT_FALSE(fuses_pair_by_default(gray, {Depth::u8, 4, true}));
    EXPECT_FALSE(fuses_pair_by_default(pair("gaussian:5", "sobel:mag", "sep:64x32", true), {Depth::u8, 3, true}));
    // A 3x3 Sobel after a blur or Gaussian: any size, 1 or 3 channels.
    const FilterRun sobel = pair("gaussian:5", "sobel:mag", "stream:256x16", false);
    EXPECT_TRUE(fuses_pair_by_default(sobel, {Depth::u8, 3, true}));
    EXPECT_TRUE(fuses_pair_by_default(sobel, {Depth::u8, 1, true}));
    EXPECT_TRUE(fuses_pair_by_default(pair("blur:3", "sobel:x", "stream:256x16", false), {Depth::u8, 1, true}));
    EXPECT_FALSE(fuses_pair_by_default(sobel, {Depth::u16, 1, true}));
    // A Gaussian, then a Gaussian or a Sobel of any size.
    EXPECT_TRUE(fuses_pair_by_default(pair("gaussian:5", "sobel:mag:5", "stream:256x16", false), {Depth::u8, 1, true}));
    EXPECT_TRUE(fuses_pair_by_default(pair("gaussian:3", "gaussian:3", "stream:256x16", false), {Depth::u8, 3, true}));
    EXPECT_FALSE(fuses_pair_by_default(pair("gaussian:5", "sobel:mag", "sep:64x32", false), {Depth::u8, 1, true}));
    EXPECT_TRUE(fuses_pair_by_default(pair("gaussian:5", "gaussian:5", "stream:256x16", false), {Depth::u8, 1, true}));
    // A blur before a blur or Gaussian: slower fused on large images.
    EXPECT_FALSE(fuses_pair_by_default(pair("blur:3", "gaussian:5", "stream:256x16", false), {Depth::u8, 1, true}));
    EXPECT_FALSE(fuses_pair_by_default(pair("blur:3", "blur:5", "stream:256x16", false), {Depth::u8, 3, true}));
    EXPECT_FALSE(fuses_pair_by_default(pair("gaussian:5", "blur:3", "stream:256x16", false),
                                       {Depth::u8, 3, true}));  // not measured
    FilterRun single = gray;
    single.fused_stencil.reset();  // a colour node fused into one stencil: not a pair
    EXPECT_FALSE(fuses_pair_by_default(single, {Depth::u8, 3, true}));
    // On the CPU: no pair, no colour node (measured as fast or slower fused).
    EXPECT_FALSE(fuses_pair_by_default(pair("blur:3", "gaussian:5", "sep:256x256", false), {Depth::u16, 4, false}));
    EXPECT_FALSE(fuses_pair_by_default(pair("gaussian:5", "sobel:mag", "sep:256x256", false), {Depth::u8, 1, false}));
    EXPECT_FALSE(fuses_pair_by_default(pair("gaussian:5", "sobel:mag", "stream:256x16", false), {Depth::u8, 3, false}));
    EXPECT_FALSE(fuses_color_by_default(false));
    EXPECT_TRUE(fuses_color_by_default(true));
}

// --device auto for a batch: the CPU while all its images' runs fit in a
// CUDA device's start; the GPU once they outgrow it.
TEST(BatchDevice, ABatchRunsOnTheCpuWhileItsRunsFitInTheDevicesStart) {
    const Graph two = parse_pipeline("gaussian:9 | sobel:mag");
    // 16 MP photos on the GPU host's 16 cores: 8 on the CPU, 128 on the GPU.
    EXPECT_TRUE(batch_runs_on_cpu(two, 4096, 4096, 3, Depth::u8, 16, 8));
    EXPECT_FALSE(batch_runs_on_cpu(two, 4096, 4096, 3, Depth::u8, 16, 128));
    // The count where the GPU takes over: all the runs pass kCudaStartSeconds.
    const double one = cpu_run_seconds(two, 4096, 4096, 3, Depth::u8, 16);
    const auto last_on_cpu = static_cast<std::uint64_t>(kCudaStartSeconds / one);
    EXPECT_TRUE(batch_runs_on_cpu(two, 4096, 4096, 3, Depth::u8, 16, last_on_cpu));
    EXPECT_FALSE(batch_runs_on_cpu(two, 4096, 4096, 3, Depth::u8, 16, last_on_cpu + 1));
    // Fewer threads: the GPU sooner.
    EXPECT_FALSE(batch_runs_on_cpu(two, 4096, 4096, 3, Depth::u8, 2, last_on_cpu));
    // A named schedule is not modelled: the batch keeps the GPU.
    EXPECT_FALSE(batch_runs_on_cpu(parse_pipeline("gaussian:9@column:32"), 10, 10, 3, Depth::u8, 16, 1));
}

// --device auto for one image: the CPU where the run is expected to be done
// before a CUDA device has started; a named schedule keeps the device.
TEST(OneImageDevice, TheCpuTakesWhatItFinishesBeforeCudaStarts) {
    const Graph two = parse_pipeline("gaussian:9 | sobel:mag");
    const Graph chain = parse_pipeline("blur:31 | blur:31 | blur:31 | gaussian:15 | sobel:mag");
    // 24 and 48 MP photos on the GPU host's 16 cores: the CPU.
    EXPECT_TRUE(one_image_runs_on_cpu(two, 6000, 4000, 3, Depth::u8, 16));
    EXPECT_TRUE(one_image_runs_on_cpu(chain, 8000, 6000, 3, Depth::u8, 16));
    // Float through five nodes, 24 MP on one thread: the GPU; on four, where
    // the device would also stage and copy 576 MB, the CPU.
    EXPECT_FALSE(one_image_runs_on_cpu(chain, 6000, 4000, 3, Depth::f32, 1));
    EXPECT_TRUE(one_image_runs_on_cpu(chain, 6000, 4000, 3, Depth::f32, 4));
    // The estimate grows with pixels, kernel size and depth, and falls with threads.
    const double base = cpu_run_seconds(two, 1000, 1000, 3, Depth::u8, 4);
    EXPECT_GT(base, 0);
    EXPECT_DOUBLE_EQ(cpu_run_seconds(two, 2000, 1000, 3, Depth::u8, 4), 2 * base);
    EXPECT_DOUBLE_EQ(cpu_run_seconds(two, 1000, 1000, 3, Depth::u8, 8), base / 2);
    EXPECT_GT(cpu_run_seconds(parse_pipeline("gaussian:31 | sobel:mag"), 1000, 1000, 3, Depth::u8, 4), base);
    EXPECT_GT(cpu_run_seconds(two, 1000, 1000, 3, Depth::u16, 4), base);
    // After a gray node the stencils see one channel.
    EXPECT_LT(cpu_run_seconds(parse_pipeline("color:gray | gaussian:9 | sobel:mag"), 1000, 1000, 3, Depth::u8, 4),
              base);
    // auto times the table's candidates: modelled; a named schedule is not.
    EXPECT_GT(cpu_run_seconds(parse_pipeline("gaussian:9 | sobel:mag", AutoSchedule{}), 10, 10, 3, Depth::u8, 4), 0);
    EXPECT_LT(cpu_run_seconds(parse_pipeline("gaussian:9@column:32 | sobel:mag"), 10, 10, 3, Depth::u8, 4), 0);
    EXPECT_FALSE(one_image_runs_on_cpu(parse_pipeline("blur:3", ScheduleSpec{}), 10, 10, 3, Depth::u8, 16));
}

#if CBI_HAVE_CUDA
KernelPath cuda_path(const char* filter, const char* schedule, Depth depth, int channels) {
    const cv::Mat src = test::random_image(70, 41, channels, depth, 9);
    const Filter f = parse_filter(filter);
    DeviceImage in(src.cols, src.rows, channels, depth), out(src.cols, src.rows, output_channels(f, channels), depth);
    Stream stream;
    upload(view_of(src), in.view, stream.get());
    note_kernel_path(KernelPath::none);
    run_node_cuda(FilterRun{f, Border{}, parse_schedule(schedule)}, in.view, out.view, stream.get(), 256);
    stream.synchronize("routing");
    return last_kernel_path();
}

TEST(RoutingCuda, GpuNodesRunTheKernelTheirScheduleNames) {
    std::string why;
    if (cuda_device_count(why) == 0) GTEST_SKIP() << "no CUDA device: " << why;
    // 8-bit stencils up to 9x9 with equal sizes on stream take the 8-bit kernel; others the generic one.
    for (const int ch : {1, 3, 4}) {
        EXPECT_EQ(cuda_path("blur:9", "stream:256x16", Depth::u8, ch), KernelPath::cuda_stream8);
        EXPECT_EQ(cuda_path("gaussian:9", "stream:256x16+column:2", Depth::u8, ch), KernelPath::cuda_stream8);
        EXPECT_EQ(cuda_path("sobel:mag", "stream:128x16", Depth::u8, ch), KernelPath::cuda_stream8);
        EXPECT_EQ(cuda_path("laplacian:3", "stream:128x16", Depth::u8, ch),
                  KernelPath::cuda_stream);  // not a kStream8Op
        EXPECT_EQ(cuda_path("blur:9", "stream:256x16", Depth::f32, ch), KernelPath::cuda_stream);
        EXPECT_EQ(cuda_path("blur:9", "sep:32x32", Depth::f32, ch),
                  KernelPath::cuda_sep);  // 128x32 x 4 floats: too much shared memory
        EXPECT_EQ(cuda_path("blur:9", "smem:32x8", Depth::u16, ch), KernelPath::cuda_smem);
        EXPECT_EQ(cuda_path("color:sepia", "vec:8", Depth::u8, ch), KernelPath::cuda_vec);
        EXPECT_EQ(cuda_path("blur:9", "column:32", Depth::u8, ch), KernelPath::cuda_index_map);
    }
    // The default table's choices for the benchmark set's cells.
    const auto table = [](const char* f, Depth d, int ch) {
        return default_schedule(parse_filter(f), {}, {d, ch, true}).to_string();
    };
    EXPECT_EQ(cuda_path("blur:9", table("blur:9", Depth::u8, 3).c_str(), Depth::u8, 3), KernelPath::cuda_stream8);
    EXPECT_EQ(cuda_path("gaussian:9", table("gaussian:9", Depth::f32, 1).c_str(), Depth::f32, 1), KernelPath::cuda_sep);
    EXPECT_EQ(cuda_path("sobel:mag", table("sobel:mag", Depth::f32, 3).c_str(), Depth::f32, 3),
              KernelPath::cuda_stream);
    EXPECT_EQ(cuda_path("color:sepia", table("color:sepia", Depth::f32, 3).c_str(), Depth::f32, 3),
              KernelPath::cuda_vec);
}

// With no schedules, color:gray | gaussian:5 | sobel:mag plans as the
// fastest plan measured: both stencils on stream, fused with the gray
// conversion into one line-buffer kernel, at any size
// (docs/performance.md#stencil-pairs).
TEST(DefaultTableCuda, APipelineWithoutSchedulesPlansLikeTheFastestHandWrittenPlan) {
    std::string why;
    if (cuda_device_count(why) == 0) GTEST_SKIP() << "no CUDA device: " << why;
    RunOptions gpu;
    gpu.device = resolve_device(parse_device("cuda"));
    const cv::Mat src = test::random_image(301, 203, 3, Depth::u8, 5);
    GraphExecutor ex(parse_pipeline("color:gray | gaussian:5 | sobel:mag"), gpu);
    const cv::Mat got = as_mat(ex.run(view_of(src)).front()).clone();
    EXPECT_EQ(ex.schedule_of(2).family, ScheduleFamily::stream);
    EXPECT_EQ(ex.schedule_of(3).family, ScheduleFamily::stream);
    const std::string d = ex.describe();
    EXPECT_NE(d.find("1 kernel runs (1 colour node fused) (1 stencil fused into the next)"), std::string::npos) << d;
    EXPECT_NE(d.find("through line buffers"), std::string::npos) << d;
    GraphExecutor cpu(parse_pipeline("color:gray | gaussian:5 | sobel:mag"), RunOptions{});
    EXPECT_EQ(cv::norm(got, as_mat(cpu.run(view_of(src)).front()), cv::NORM_INF), 0.0);
}

// auto times each node on its own, then plans again: the second run takes
// the cached choices (and fuses where a choice can).
TEST(DefaultTableCuda, AnAutoPipelinePlansAgainOnceTuned) {
    std::string why;
    if (cuda_device_count(why) == 0) GTEST_SKIP() << "no CUDA device: " << why;
    RunOptions gpu;
    gpu.device = resolve_device(parse_device("cuda"));
    gpu.tuning = std::make_shared<TuningCache>();
    const cv::Mat src = test::random_image(301, 203, 3, Depth::u8, 5);
    GraphExecutor cpu(parse_pipeline("color:gray | gaussian:5 | sobel:mag"), RunOptions{});
    const cv::Mat want = as_mat(cpu.run(view_of(src)).front()).clone();
    GraphExecutor ex(parse_pipeline("color:gray | gaussian:5 | sobel:mag", AutoSchedule{}), gpu);
    EXPECT_EQ(cv::norm(as_mat(ex.run(view_of(src)).front()), want, cv::NORM_INF), 0.0);
    EXPECT_NE(ex.describe().find("(auto, timed)"), std::string::npos) << ex.describe();
    EXPECT_EQ(cv::norm(as_mat(ex.run(view_of(src)).front()), want, cv::NORM_INF), 0.0);  // planned again
    const std::string d = ex.describe();
    EXPECT_NE(d.find("(auto, cached)"), std::string::npos) << d;
    EXPECT_EQ(d.find("(auto, timed)"), std::string::npos) << d;
}
#endif

}  // namespace
}  // namespace cbi
