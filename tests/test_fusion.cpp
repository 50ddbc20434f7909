// Fusion: a colour node read only by one stencil with a tile-staging
// schedule (smem/sep) runs inside that stencil's loads. Fused results must
// equal the unfused graph exactly, on the CPU and on the GPU; the plan says
// what was fused; nodes that must stay stored are not fused.
#include <gtest/gtest.h>

#include "pipeline/executor.hpp"
#include "pipeline/graph.hpp"
#include "pipeline/opencv.hpp"
#include "reference.hpp"
#if CBI_HAVE_CUDA
#include "pipeline/cuda_runtime.hpp"
#endif

namespace cbi {
namespace {

using test::random_image;

cv::Mat first_output(GraphExecutor& ex, const cv::Mat& src) { return as_mat(ex.run(view_of(src)).front()).clone(); }

RunOptions options(bool fuse, bool cuda = false) {
    RunOptions o;
    o.fuse = fuse;
    if (cuda) o.device = resolve_device(parse_device("cuda"));
    return o;
}

struct Case {
    const char* pipeline;
    const char* border;
};
constexpr Case kCases[] = {
    {"color:gray | gaussian:5@smem:16x8", "reflect101"},
    {"color:gray | blur:7@sep:32x8", "constant:9"},
    {"color:sepia | sobel:mag@sep:16x16", "replicate"},
    {"color:ycrcb | gaussian:9:2@smem:32x8", "wrap"},
    {"color:0.5,0.25,0.25,10,-0.2,1.1,0.1,-5,0.3,0.3,0.3,0 | sobel:x:5@sep:64x32", "reflect"},
};

// Calls f(graph, source image, trace) for every case x depth x channel count.
template <class F>
void for_each_case(int width, int height, F&& f) {
    for (const Case& c : kCases)
        for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32})
            for (const int channels : {3, 4}) {
                SCOPED_TRACE(std::string(c.pipeline) + " " + c.border + " " + depth_name(depth) + "x" +
                             std::to_string(channels));
                f(parse_pipeline(c.pipeline, ScheduleSpec{}, parse_border(c.border)),
                  random_image(width, height, channels, depth, 7));
            }
}

TEST(Fusion, FusedEqualsUnfusedOnTheCpuForEveryDepthAndChannelCount) {
    for_each_case(67, 45, [](const Graph& g, const cv::Mat& src) {
        GraphExecutor fused(g, options(true)), plain(g, options(false));
        const cv::Mat a = first_output(fused, src), b = first_output(plain, src);
        EXPECT_NE(fused.describe().find("fused into n2, not stored"), std::string::npos) << fused.describe();
        EXPECT_EQ(plain.describe().find("fused"), std::string::npos) << plain.describe();
        ASSERT_EQ(a.type(), b.type());
        EXPECT_EQ(cv::norm(a, b, cv::NORM_INF), 0.0);
        EXPECT_EQ(fused.describe().find("buffer 1"), std::string::npos);  // one buffer: the colour image is not stored
    });
}

TEST(Fusion, OnlyColourNodesReadOnceByATileStagingStencilAreFused) {
    // Per-pixel schedule: recomputing the matrix for every tap would cost more than it saves.
    GraphExecutor per_pixel(parse_pipeline("color:gray | blur:5@tile:32x8"), options(true));
    per_pixel.plan(40, 30, 3, Depth::u8);
    EXPECT_EQ(per_pixel.describe().find("fused"), std::string::npos);
    // The colour image is an output too, or has two readers: it must be stored.
    Graph two_readers;
    const NodeId gray = two_readers.add_filter("gray", parse_filter("color:gray"), Graph::input());
    two_readers.add_output(two_readers.add_filter("a", parse_filter("blur:3"), gray, {parse_schedule("sep:32x8"), {}}));
    two_readers.add_output(two_readers.add_filter("b", parse_filter("blur:5"), gray, {parse_schedule("sep:32x8"), {}}));
    GraphExecutor ex(two_readers, options(true));
    ex.plan(40, 30, 3, Depth::u8);
    EXPECT_EQ(ex.describe().find("fused"), std::string::npos) << ex.describe();
    Graph output;
    const NodeId g2 = output.add_filter("gray", parse_filter("color:gray"), Graph::input());
    output.add_output(output.add_filter("a", parse_filter("blur:3"), g2, {parse_schedule("sep:32x8"), {}}));
    output.add_output(g2);
    GraphExecutor ex2(output, options(true));
    ex2.plan(40, 30, 3, Depth::u8);
    EXPECT_EQ(ex2.describe().find("fused"), std::string::npos) << ex2.describe();
}

#if CBI_HAVE_CUDA
TEST(Fusion, FusedEqualsUnfusedOnTheGpu) {
    std::string why;
    if (cuda_device_count(why) == 0) GTEST_SKIP() << "no CUDA device: " << why;
    for_each_case(131, 77, [](const Graph& g, const cv::Mat& src) {
        GraphExecutor fused(g, options(true, true)), plain(g, options(false, true)), cpu(g, options(false));
        const cv::Mat a = first_output(fused, src), b = first_output(plain, src);
        EXPECT_NE(fused.describe().find("fused into n2"), std::string::npos) << fused.describe();
        EXPECT_EQ(cv::norm(a, b, cv::NORM_INF), 0.0);
        if (src.depth() != CV_32F) EXPECT_EQ(cv::norm(a, first_output(cpu, src), cv::NORM_INF), 0.0);
    });
}
#endif

}  // namespace
}  // namespace cbi
