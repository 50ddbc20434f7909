// Pipeline graphs: DAG results against OpenCV composed node by node, build-
// and prepare-time validation naming the node, the pipeline language and its
// errors, JSON round trips, buffer reuse, and no allocation on a rerun.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <new>

#include "pipeline/error.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/graph.hpp"
#include "reference.hpp"

// Counts every operator new in this test binary, to prove a rerun allocates nothing.
static std::atomic<long> g_news{0};
void* operator new(std::size_t n) {
    ++g_news;
    if (void* p = std::malloc(n ? n : 1)) return p;
    throw std::bad_alloc();
}
// GCC sees std::free meet a pointer from `new` wherever these inline: they are the pair above.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    std::free(p);
}
#pragma GCC diagnostic pop

namespace cbi {
namespace {

using test::random_image;

cv::Mat mat_of(const ImageView& v) {
    return as_mat(v).clone();
}

void expect_within_one(const cv::Mat& got, const cv::Mat& want, const std::string& what) {
    const auto c = test::compare(got, want, 1.0, 1e-5, test::peak_magnitude(want));
    EXPECT_TRUE(c.ok) << what << ": " << c.where << " max diff " << c.max_diff;
}

Graph unsharp_mask(double amount) {
    Graph g;
    const NodeId blurred = g.add_filter("blurred", parse_filter("gaussian:9:2"), Graph::input(),
                                        NodeOptions{parse_schedule("tile:32x8"), std::nullopt});
    const NodeId sharp = g.add_blend("sharp", BlendFilter{1 + amount, -amount, 0}, Graph::input(), blurred);
    g.add_output(sharp);
    g.add_output(blurred);
    return g;
}

TEST(Graph, UnsharpMaskEqualsOpenCVNodeByNode) {
    for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32}) {
        const cv::Mat src = random_image(203, 117, 3, depth, 1);
        GraphExecutor ex(unsharp_mask(0.5), RunOptions{});
        const auto outs = ex.run(view_of(src));
        ASSERT_EQ(outs.size(), 2u);
        const cv::Mat sharp = mat_of(outs[0]), blurred = mat_of(outs[1]);
        cv::Mat blurred_ref, sharp_ref;
        cv::GaussianBlur(src, blurred_ref, {9, 9}, 2, 2, cv::BORDER_REFLECT_101);
        expect_within_one(blurred, blurred_ref, "gaussian");
        cv::addWeighted(src, 1.5, blurred, -0.5, 0, sharp_ref);  // OpenCV on cbi's previous node
        expect_within_one(sharp, sharp_ref, "blend");
    }
}

TEST(Graph, DifferenceOfGaussiansEqualsOpenCVNodeByNode) {
    const char* json = R"({"schedule": "column:32",
        "nodes": [{"name": "fine", "filter": "gaussian:5:1", "input": "input"},
                  {"name": "coarse", "filter": "gaussian:9:2", "input": "input", "schedule": "zigzag:16"},
                  {"name": "dog", "blend": "blend:1:-1:128", "inputs": ["fine", "coarse"]}],
        "outputs": ["dog", "fine", "coarse"]})";
    const cv::Mat src = random_image(160, 90, 1, Depth::u8, 2);
    GraphExecutor ex(graph_from_json(json), RunOptions{});
    const auto outs = ex.run(view_of(src));
    cv::Mat fine, coarse, dog;
    cv::GaussianBlur(src, fine, {5, 5}, 1, 1);
    cv::GaussianBlur(src, coarse, {9, 9}, 2, 2);
    expect_within_one(mat_of(outs[1]), fine, "fine");
    expect_within_one(mat_of(outs[2]), coarse, "coarse");
    cv::addWeighted(mat_of(outs[1]), 1, mat_of(outs[2]), -1, 128, dog);
    expect_within_one(mat_of(outs[0]), dog, "dog");
}

TEST(Graph, GrayGaussianSobelChainFromTheLanguageEqualsTheJsonForm) {
    const cv::Mat src = random_image(257, 129, 3, Depth::u8, 3);
    const Graph chain = parse_pipeline("color:gray | gaussian:5 | sobel:mag");
    const Graph json = graph_from_json(R"({"nodes": [
        {"name": "n1", "filter": "color:gray", "input": "input"},
        {"name": "n2", "filter": "gaussian:5", "input": "n1"},
        {"name": "n3", "filter": "sobel:mag:3", "input": "n2"}], "outputs": ["n3"]})");
    GraphExecutor a(chain, RunOptions{}), b(json, RunOptions{});
    const cv::Mat from_chain = mat_of(a.run(view_of(src)).front());
    const cv::Mat from_json = mat_of(b.run(view_of(src)).front());
    EXPECT_EQ(cv::norm(from_chain, from_json, cv::NORM_INF), 0.0);
    // Node by node against OpenCV.
    cv::Mat gray, blurred, edges;
    cv::cvtColor(src, gray, cv::COLOR_BGR2GRAY);
    const FilterRun gauss{parse_filter("gaussian:5"), Border{}, ScheduleSpec{}};
    const FilterRun sobel{parse_filter("sobel:mag:3"), Border{}, ScheduleSpec{}};
    const FilterRun first[] = {FilterRun{parse_filter("color:gray"), Border{}, ScheduleSpec{}}};
    const cv::Mat cbi_gray = as_mat(run_sequence(first, view_of(src), RunOptions{}).view()).clone();
    expect_within_one(cbi_gray, gray, "gray");
    const FilterRun second[] = {gauss};
    const cv::Mat cbi_blur = as_mat(run_sequence(second, view_of(cbi_gray), RunOptions{}).view()).clone();
    expect_within_one(cbi_blur, test::opencv_reference(gauss, cbi_gray), "gaussian");
    expect_within_one(from_chain, test::opencv_reference(sobel, cbi_blur), "sobel");
}

TEST(Graph, PerNodeScheduleOverridesTheDefault) {
    const Graph g = parse_pipeline("blur:3 | gaussian:5@tile:32x8", parse_schedule("column:16"));
    EXPECT_EQ(to_string(g.schedule_of(1)), "column:16");
    EXPECT_EQ(to_string(g.schedule_of(2)), "tile:32x8");
    // Spaces around '@' are trimmed as those around '|'.
    EXPECT_EQ(parse_pipeline("blur:3 @ naive | gaussian:5 @tile:32x8"),
              parse_pipeline("blur:3@naive | gaussian:5@tile:32x8"));
}

// f throws E (and nothing else) with `needle` in its message.
template <class E>
void expect_error(const std::function<void()>& f, const std::string& needle) {
    try {
        f();
        ADD_FAILURE() << "accepted; expected an error containing '" << needle << "'";
    } catch (const E& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}
// Malformed: a usage error.
void expect_invalid(const std::function<void()>& f, const std::string& needle) {
    expect_error<std::invalid_argument>(f, needle);
}
// Well formed, but the node's schedule cannot run it: cbi::Unsupported.
void expect_unsupported(const std::function<void()>& f, const std::string& needle) {
    expect_error<Unsupported>(f, needle);
}

TEST(Graph, LanguageErrorsPointAtTheOffendingStage) {
    expect_invalid([] { parse_pipeline("color:gray | gausian:5"); }, "stage 2 'gausian:5' (column 14)");
    expect_invalid([] { parse_pipeline("blur:3 || blur:5"); }, "stage 2");
    expect_invalid([] { parse_pipeline("blur:3 | blur:5@column:0"); }, "valid forms");
    expect_invalid([] { parse_pipeline("blur:4"); }, "stage 1 'blur:4' (column 1)");
    expect_invalid([] { parse_pipeline(""); }, "empty stage");
}

TEST(Graph, SchedulesRefuseWhatTheyDoNotRunAndDefaultsFallBack) {
    expect_unsupported([] { parse_pipeline("gaussian:5@vec:4"); }, "schedule vec:4 runs pointwise filters only (" +
                                                                       kind_names(Category::pointwise) +
                                                                       ", blend), not gaussian:5; use naive, column:W");
    expect_unsupported(
        [] { parse_pipeline("blur:11@stream:64x64"); },
        "schedule stream:64x64 runs stencils up to 9x9 (non-square windows count as larger), not blur:11; use naive");
    expect_unsupported([] { parse_pipeline("sobel:mag:1@stream:64x64"); }, "not sobel:mag:1; use naive, column:W");
    EXPECT_NO_THROW(parse_pipeline("color:sepia@vec:8 | sobel:mag:7@stream:64x64 | gaussian:9@stream:8x8"));
    // A graph-wide schedule a node cannot run leaves that node to the default
    // table (never another parameterisation of the same strategy).
    const Graph g = parse_pipeline("color:gray | blur:11 | gaussian:5", parse_schedule("stream:128x32"));
    EXPECT_EQ(to_string(g.schedule_of(1)), "default");
    EXPECT_EQ(to_string(g.schedule_of(2)), "default");
    EXPECT_EQ(to_string(g.schedule_of(3)), "stream:128x32");
    const Graph v = parse_pipeline("color:gray | blur:3", parse_schedule("vec:8"));
    EXPECT_EQ(to_string(v.schedule_of(1)), "vec:8");
    EXPECT_EQ(to_string(v.schedule_of(2)), "default");
    // Without a schedule every node takes the table's.
    const Graph d = parse_pipeline("color:gray | blur:3");
    EXPECT_EQ(to_string(d.schedule_of(1)), "default");
    EXPECT_EQ(to_string(d.schedule_of(2)), "default");
}

TEST(Graph, StencilOnlySchedulesAreRefusedForPointwiseNodes) {
    expect_unsupported([] { parse_pipeline("blur:3 | color:gray@smem:32x8"); },
                       "stage 2 'color:gray@smem:32x8' (column 10): node 'n2': schedule smem:32x8 runs stencil filters "
                       "only (" +
                           kind_names(Category::stencil) + "), not color:gray; use naive");
    expect_unsupported(
        [] {
            graph_from_json(
                R"({"nodes": [{"name": "g", "filter": "color:gray", "input": "input", "schedule": "sep:64x32"}],
                            "outputs": ["g"]})");
        },
        "node 'g': schedule sep:64x32 runs stencil filters only");
    expect_unsupported(
        [] {
            Graph g;
            g.add_blend("mix", BlendFilter{}, Graph::input(), Graph::input(),
                        NodeOptions{parse_schedule("smem:8x8"), {}});
        },
        "node 'mix': schedule smem:8x8 runs stencil filters only");
    // A default schedule applies where it can: the colour node takes the default table's.
    const Graph g = parse_pipeline("color:gray | gaussian:5", parse_schedule("smem:32x8"));
    EXPECT_EQ(to_string(g.schedule_of(1)), "default");
    EXPECT_EQ(to_string(g.schedule_of(2)), "smem:32x8");
}

TEST(Graph, JsonErrorsNameTheNode) {
    expect_invalid([] { graph_from_json("{"); }, "not valid JSON");
    expect_invalid(
        [] { graph_from_json(R"({"nodes": [{"name": "a", "filter": "blur:3", "input": "nope"}], "outputs": ["a"]})"); },
        "node 'a': input 'nope' is not a node");
    expect_invalid(
        [] {
            graph_from_json(R"({"nodes": [{"name": "a", "filter": "blur:3", "input": "b"},
                                                       {"name": "b", "filter": "blur:3", "input": "a"}], "outputs": ["a"]})");
        },
        "is part of a cycle");
    expect_invalid(
        [] {
            graph_from_json(R"({"nodes": [{"name": "a", "filter": "blur:3", "input": "input"},
                                                       {"name": "a", "filter": "blur:5", "input": "input"}], "outputs": ["a"]})");
        },
        "node 'a': the name is used twice");
    expect_invalid(
        [] {
            graph_from_json(
                R"({"nodes": [{"name": "a", "filter": "blur:3", "input": "input", "schedule": "warp"}], "outputs": ["a"]})");
        },
        "node 'a': unknown schedule 'warp'");
    expect_invalid(
        [] { graph_from_json(R"({"nodes": [{"name": "a", "blend": "1:1", "inputs": ["input"]}], "outputs": ["a"]})"); },
        "node 'a': a blend takes 2 inputs");
    expect_invalid([] { graph_from_json(R"({"nodes": [{"name": "a", "input": "input"}], "outputs": ["a"]})"); },
                   "node 'a': needs exactly one of \"filter\" and \"blend\"");
    expect_invalid(
        [] { graph_from_json(R"({"nodes": [{"name": "a", "filter": "blur:3", "input": "input"}], "outputs": []})"); },
        "\"outputs\" must be a non-empty array");
    expect_invalid([] { graph_from_json(R"({"nodes": [], "outputs": ["x"]})"); }, "no node named 'x'");
    expect_invalid([] { graph_from_json(R"({"nodes": [], "outputs": ["input"], "extra": 1})"); },
                   "unknown field \"extra\"");
}

TEST(Graph, ChannelMismatchesAreFoundWhenPreparingNotWhileRunning) {
    Graph g;
    const NodeId gray = g.add_filter("gray", parse_filter("color:gray"), Graph::input());
    const NodeId mix = g.add_blend("mix", BlendFilter{}, gray, Graph::input());
    g.add_output(mix);
    GraphExecutor ex(g, RunOptions{});
    try {
        ex.prepare(64, 64, 3, Depth::u8);
        FAIL() << "a 1- and 3-channel blend was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("node 'mix': blend inputs 'gray' and 'input' have 1 and 3 channels"),
                  std::string::npos)
            << e.what();
    }
    GraphExecutor sepia(parse_pipeline("color:sepia"), RunOptions{});
    EXPECT_NO_THROW(sepia.prepare(8, 8, 1, Depth::u8));  // a 1-channel image is read as R = G = B
    EXPECT_THROW(GraphExecutor(Graph{}, RunOptions{}), std::invalid_argument);  // no output
}

TEST(Graph, JsonRoundTrip) {
    Graph g = unsharp_mask(0.7);
    g.set_default_schedule(parse_schedule("zigzag:32"));
    g.set_default_border(parse_border("constant:3"));
    const std::string text = graph_to_json(g);
    const Graph back = graph_from_json(text);
    EXPECT_TRUE(back == g) << text;
    EXPECT_EQ(graph_to_json(back), text);
    const Graph chain = parse_pipeline("color:ycrcb | sobel:x:5@tile:8x8 | blur:7");
    EXPECT_TRUE(graph_from_json(graph_to_json(chain)) == chain);
}

// Values that 6 significant digits (the former printing) lose or mangle.
const double kAwkward[] = {1.23456789,
                           0.1,
                           1e-7,
                           3.4028235e38,
                           -0.0,
                           0.30000000000000004,
                           123456789.123456789,
                           -2.5e-310,                                  // subnormal
                           std::numeric_limits<double>::denorm_min(),  // 5e-324
                           std::numeric_limits<double>::min(),         // smallest normal
                           std::numeric_limits<double>::max(),
                           std::nextafter(1.0, 2.0),
                           -1.0 / 3};

std::uint64_t bits(double v) {
    return std::bit_cast<std::uint64_t>(v);
}

TEST(Graph, ParametersPrintAndParseBackBitIdentically) {
    EXPECT_EQ(to_string(parse_filter("gaussian:5:1.23456789")), "gaussian:5:1.23456789");
    EXPECT_EQ(to_string(parse_blend("1.23456789:-0.1:1e-7")), "blend:1.23456789:-0.1:1e-07");
    EXPECT_EQ(to_string(parse_border("constant:3.4028235e38")), "constant:3.4028235e+38");
    EXPECT_EQ(to_string(parse_filter("color:sepia")), "color:sepia");
    EXPECT_EQ(to_string(parse_filter("color:1,2,3,4,5,6,7,8,9")), "color:1,2,3,0,4,5,6,0,7,8,9,0");
    for (const double v : kAwkward) {
        SCOPED_TRACE(v);
        const BlendFilter blend{v, -v, v / 3};
        const BlendFilter blend_back = parse_blend(to_string(blend).substr(6));  // after "blend:"
        EXPECT_EQ(bits(blend_back.alpha), bits(blend.alpha));
        EXPECT_EQ(bits(blend_back.beta), bits(blend.beta));
        EXPECT_EQ(bits(blend_back.gamma), bits(blend.gamma));
        const Border border{BorderMode::constant, v};
        EXPECT_EQ(bits(parse_border(to_string(border)).value), bits(v)) << to_string(border);
        if (v > 0) {
            const Filter gauss = GaussianFilter{7, v};
            EXPECT_EQ(bits(std::get<GaussianFilter>(parse_filter(to_string(gauss))).sigma), bits(v))
                << to_string(gauss);
        }
        ColorFilter color{ColorPreset::custom, {}};
        for (std::size_t i = 0; i < color.rgb_matrix.size(); ++i) color.rgb_matrix[i] = i % 2 ? v : -v / (i + 1);
        const auto color_back = std::get<ColorFilter>(parse_filter(to_string(Filter(color))));
        for (std::size_t i = 0; i < color.rgb_matrix.size(); ++i)
            EXPECT_EQ(bits(color_back.rgb_matrix[i]), bits(color.rgb_matrix[i])) << to_string(Filter(color));
    }
    // A sigma of -0 is 0 (derived from K), printed without a sigma: stored as +0 so it reads back the same.
    EXPECT_EQ(bits(std::get<GaussianFilter>(parse_filter("gaussian:5:-0")).sigma), bits(0.0));
    EXPECT_EQ(parse_filter("gaussian:5:+1.5"), Filter(GaussianFilter{5, 1.5}));  // a leading '+' is still taken
    for (const char* bad : {"gaussian:5:1,5", "gaussian:5: 1", "gaussian:5:1e999", "gaussian:5:nan", "gaussian:5:inf",
                            "gaussian:5:+-1", "gaussian:5:0x10"})
        expect_invalid([&] { parse_filter(bad); }, "gaussian sigma");
}

TEST(Graph, JsonAndChainRoundTripsAreBitIdentical) {
    Graph g;
    g.set_default_border(Border{BorderMode::constant, 1.23456789});
    NodeId last = Graph::input();
    int i = 0;
    for (const double v : kAwkward) {
        const std::string n = std::to_string(i++);
        ColorFilter color{ColorPreset::custom, {}};
        color.rgb_matrix.fill(v);
        const NodeId c = g.add_filter("c" + n, color, last, NodeOptions{std::nullopt, Border{BorderMode::constant, v}});
        const NodeId s = g.add_filter("g" + n, GaussianFilter{5, std::abs(v) + 1e-300}, c);
        last = g.add_blend("b" + n, BlendFilter{v, 1 - v, -v}, s, c);
    }
    g.add_filter("sepia", parse_filter("color:sepia"), last);
    g.add_output(last);
    const std::string text = graph_to_json(g);
    const Graph back = graph_from_json(text);
    EXPECT_TRUE(back == g) << text;
    EXPECT_EQ(graph_to_json(back), text);
    ASSERT_EQ(back.nodes().size(), g.nodes().size());
    for (std::size_t k = 1; k < g.nodes().size(); ++k) {  // the same bits, not only equal values (-0 vs 0)
        const GraphNode &a = g.nodes()[k], &b = back.nodes()[k];
        if (const auto* blend = std::get_if<BlendFilter>(&a.op)) {
            const auto& other = std::get<BlendFilter>(b.op);
            EXPECT_EQ(bits(blend->alpha), bits(other.alpha)) << a.name;
            EXPECT_EQ(bits(blend->beta), bits(other.beta)) << a.name;
            EXPECT_EQ(bits(blend->gamma), bits(other.gamma)) << a.name;
        } else if (const auto* color = std::get_if<ColorFilter>(&std::get<Filter>(a.op))) {
            const auto& other = std::get<ColorFilter>(std::get<Filter>(b.op));
            for (std::size_t m = 0; m < 12; ++m)
                EXPECT_EQ(bits(color->rgb_matrix[m]), bits(other.rgb_matrix[m])) << a.name;
            EXPECT_EQ(bits(a.options.border->value), bits(b.options.border->value)) << a.name;
        }
    }
    // The pipeline language reads back what to_string prints.
    std::string chain;
    for (const double v : kAwkward) {
        ColorFilter color{ColorPreset::custom, {}};
        color.rgb_matrix.fill(v);
        chain += (chain.empty() ? "" : " | ") + to_string(Filter(color)) + " | " +
                 to_string(Filter(GaussianFilter{3, std::abs(v) + 1e-300}));
    }
    const Graph parsed = parse_pipeline(chain);
    std::string printed;
    for (std::size_t k = 1; k < parsed.nodes().size(); ++k)
        printed += (k > 1 ? " | " : "") + parsed.nodes()[k].op_string();
    EXPECT_EQ(printed, chain);
    EXPECT_TRUE(parse_pipeline(printed) == parsed);
}

TEST(Graph, EqualityComparesValuesNotPrintedText) {
    const auto one = [](double sigma, double alpha, double border) {
        Graph g;
        const NodeId s = g.add_filter("s", GaussianFilter{5, sigma}, Graph::input(),
                                      NodeOptions{std::nullopt, Border{BorderMode::constant, border}});
        g.add_output(g.add_blend("b", BlendFilter{alpha, 1, 0}, Graph::input(), s));
        return g;
    };
    EXPECT_TRUE(one(1.2345678, 0.5, 7) == one(1.2345678, 0.5, 7));
    EXPECT_FALSE(one(1.2345678, 0.5, 7) == one(1.2345679, 0.5, 7));  // the 8th digit
    EXPECT_FALSE(one(1.2345678, 0.5, 7) == one(1.2345678, std::nextafter(0.5, 1.0), 7));
    EXPECT_FALSE(one(1.2345678, 0.5, 7) == one(1.2345678, 0.5, 7.0000001));
    EXPECT_FALSE(one(1.2345678, 0.5, 7) == one(1.23456781, 0.5, 7));
    Graph other = one(1.2345678, 0.5, 7);
    other.set_default_border(Border{BorderMode::constant, 1e-9});
    EXPECT_FALSE(other == one(1.2345678, 0.5, 7));
    other.set_default_border(Border{});
    other.set_default_schedule(AutoSchedule{});
    EXPECT_FALSE(other == one(1.2345678, 0.5, 7));
}

TEST(Graph, DuplicateJsonKeysAreRefused) {
    const std::string node = R"({"name": "a", "filter": "blur:3", "input": "input"})";
    expect_invalid([&] { graph_from_json(R"({"nodes": [], "nodes": [)" + node + R"(], "outputs": ["a"]})"); },
                   "duplicate key \"nodes\" in the pipeline object");
    expect_invalid([&] { graph_from_json(R"({"nodes": [)" + node + R"(], "outputs": ["a"], "outputs": ["a"]})"); },
                   "duplicate key \"outputs\" in the pipeline object");
    expect_invalid(
        [&] {
            graph_from_json(
                R"({"nodes": [)" + node +
                R"(, {"name": "b", "filter": "blur:3", "filter": "blur:5", "input": "a"}], "outputs": ["b"]})");
        },
        "node 'b' (nodes[1]): duplicate key \"filter\"");
    expect_invalid(
        [&] {  // before the node's name is read, its index says where
            graph_from_json(
                R"({"nodes": [{"input": "input", "input": "input", "name": "a", "filter": "blur:3"}], "outputs": ["a"]})");
        },
        "nodes[0]: duplicate key \"input\"");
    expect_invalid(
        [&] {
            graph_from_json(
                R"({"nodes": [{"name": "a", "name": "b", "filter": "blur:3", "input": "input"}], "outputs": ["a"]})");
        },
        "node 'a' (nodes[0]): duplicate key \"name\"");
    expect_invalid([&] { graph_from_json(R"({"nodes": [], "outputs": ["input"], "x": [0, {"k": 1, "k": 2}]})"); },
                   "duplicate key \"k\" in x[1]");
    std::string many = R"({"nodes": [], "outputs": ["input"], "x": {)";  // past 16 keys: the hash-set path
    for (int k = 0; k < 40; ++k) many += "\"k" + std::to_string(k) + "\": 0, ";
    expect_invalid([&] { graph_from_json(many + R"("k17": 1}})"); }, "duplicate key \"k17\" in x");
    expect_invalid([&] { graph_from_json(many + R"("k3": 1}})"); }, "duplicate key \"k3\" in x");
    try {  // a key with a newline still makes a one-line message
        graph_from_json("{\"a\\nb\": 1, \"a\\nb\": 2}");
        ADD_FAILURE() << "accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_EQ(std::string(e.what()), "duplicate key \"a\\nb\" in the pipeline object");
    }
    // The same key in different objects is no duplicate.
    EXPECT_NO_THROW(graph_from_json(R"({"nodes": [)" + node +
                                    R"(, {"name": "b", "filter": "blur:3", "input": "a"}], "outputs": ["b"]})"));
}

TEST(Graph, NodesMayBeListedInAnyOrderAndKeepTheirOrderOfAddition) {
    // Ready nodes are added pass by pass over the file, as before the loader became linear.
    const Graph g = graph_from_json(R"({"nodes": [
        {"name": "c", "filter": "blur:3", "input": "b"}, {"name": "a", "filter": "blur:3", "input": "input"},
        {"name": "b", "blend": "1:1", "inputs": ["a", "a"]}, {"name": "d", "filter": "blur:3", "input": "input"}],
        "outputs": ["c", "d"]})");
    std::string order;
    for (const GraphNode& n : g.nodes()) order += n.name + " ";
    EXPECT_EQ(order, "input a b d c ");
    expect_invalid(
        [] { graph_from_json(R"({"nodes": [{"name": "a", "filter": "blur:3", "input": "a"}], "outputs": ["a"]})"); },
        "node 'a' is part of a cycle");
    expect_invalid(
        [] {
            graph_from_json(
                R"({"nodes": [{"name": "input", "filter": "blur:3", "input": "input"}], "outputs": ["input"]})");
        },
        "node 'input': the name is used twice");
    expect_invalid(
        [] {
            graph_from_json(
                R"({"nodes": [{"name": "a", "filter": "blur:3", "input": "input"}], "outputs": ["a", "a"]})");
        },
        "node 'a' is an output twice");
}

// Loading and validation are linear in the node count (they were quadratic:
// a 40,000-node chain took 33 s, 10,000 parallel outputs 2 s on the 2-core
// development machine under load). A quadratic step would take many minutes
// here; the bound leaves room for sanitizer builds on a loaded machine.
TEST(Graph, LargeGraphsLoadInLinearTime) {
    const auto seconds_since = [](auto t0) {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    constexpr int kChain = 200000;
    for (const bool reversed : {false, true}) {  // reversed: every edge names a node defined later
        std::string text = R"({"nodes": [)";
        for (int k = 0; k < kChain; ++k) {
            const int i = reversed ? kChain - k : k + 1;
            text += std::string(k ? "," : "") + R"({"name": "n)" + std::to_string(i) +
                    R"(", "filter": "blur:3", "input": ")" +
                    (i == 1 ? std::string("input") : "n" + std::to_string(i - 1)) + "\"}";
        }
        text += R"(], "outputs": ["n)" + std::to_string(kChain) + "\"]}";
        const auto t0 = std::chrono::steady_clock::now();
        const Graph g = graph_from_json(text);
        const double s = seconds_since(t0);
        EXPECT_EQ(g.nodes().size(), kChain + 1u);
        EXPECT_EQ(g.nodes().back().name, "n" + std::to_string(kChain));
        EXPECT_EQ(g.find("n" + std::to_string(kChain / 2)), kChain / 2);
        EXPECT_LT(s, 120.0) << (reversed ? "reversed " : "") << "chain of " << kChain;
        std::printf("[ timing ] JSON chain of %d nodes%s: %.2f s\n", kChain, reversed ? ", listed backwards" : "", s);
    }
    constexpr int kParallel = 50000;
    std::string text = R"({"nodes": [)", outputs;
    for (int i = 0; i < kParallel; ++i) {
        text += std::string(i ? "," : "") + R"({"name": "p)" + std::to_string(i) +
                R"(", "filter": "blur:3", "input": "input"})";
        outputs += std::string(i ? "," : "") + "\"p" + std::to_string(i) + "\"";
    }
    text += R"(], "outputs": [)" + outputs + "]}";
    auto t0 = std::chrono::steady_clock::now();
    const Graph wide = graph_from_json(text);
    double s = seconds_since(t0);
    EXPECT_EQ(wide.outputs().size(), static_cast<std::size_t>(kParallel));
    EXPECT_LT(s, 120.0) << kParallel << " parallel outputs";
    std::printf("[ timing ] %d parallel outputs: %.2f s\n", kParallel, s);
    std::string chain = "blur:3";
    for (int i = 1; i < kChain; ++i) chain += " | blur:3";
    t0 = std::chrono::steady_clock::now();
    const Graph language = parse_pipeline(chain);
    s = seconds_since(t0);
    EXPECT_EQ(language.nodes().size(), kChain + 1u);
    EXPECT_LT(s, 120.0) << "chain language, " << kChain << " stages";
    std::printf("[ timing ] chain language, %d stages: %.2f s\n", kChain, s);
}

TEST(Graph, BuffersAreReusedByLifetimeAndUnusedNodesSkipped) {
    Graph g;
    NodeId last = Graph::input();
    for (int i = 0; i < 6; ++i) last = g.add_filter("b" + std::to_string(i), parse_filter("blur:3"), last);
    g.add_filter("unused", parse_filter("blur:5"), Graph::input());
    g.add_output(last);
    GraphExecutor ex(g, RunOptions{});
    ex.prepare(50, 40, 3, Depth::u8);
    const std::string plan = ex.describe();
    EXPECT_NE(plan.find("6 kernels run, 2 buffers"), std::string::npos) << plan;
    EXPECT_NE(plan.find("not needed by any output: skipped"), std::string::npos) << plan;
    EXPECT_EQ(ex.allocations(), 2u);
}

TEST(Graph, RerunOnTheSameSizeAllocatesNothing) {
    const cv::Mat a = random_image(300, 200, 3, Depth::u8, 4), b = random_image(300, 200, 3, Depth::u8, 5);
    GraphExecutor ex(unsharp_mask(1.0), RunOptions{});
    const cv::Mat first = mat_of(ex.run(view_of(a)).front());
    const std::size_t buffers = ex.allocations();
    const ImageView in = view_of(b);
    const long before = g_news.load();
    const auto outs = ex.run(in);
    const long news = g_news.load() - before;
    EXPECT_EQ(ex.allocations(), buffers);
    EXPECT_EQ(news, 0) << "operator new calls during a rerun";
    EXPECT_GT(cv::norm(as_mat(outs.front()), first, cv::NORM_INF), 0.0);  // it did run on the new image
    ex.run(view_of(random_image(301, 200, 3, Depth::u8, 6)));             // a new size plans again
    EXPECT_GT(ex.allocations(), buffers);
}

TEST(Graph, NodesWithoutABorderTakeTheirKindsOpenCVDefault) {
    const Graph g = parse_pipeline("erode:3 | blur:3 | dilate:5:ellipse");
    EXPECT_EQ(g.border_of(1), (Border{BorderMode::constant, kMorphologyDefaultBorder}));
    EXPECT_EQ(to_string(g.border_of(1)), "constant:max");
    EXPECT_EQ(g.border_of(2), Border{});
    const Graph r = parse_pipeline("erode:3 | blur:3", DefaultSchedule{}, parse_border("replicate"));
    EXPECT_EQ(r.border_of(1), parse_border("replicate"));
    EXPECT_EQ(r.border_of(2), parse_border("replicate"));
    EXPECT_EQ(parse_border("constant:max"), (Border{BorderMode::constant, kMorphologyDefaultBorder}));
    // JSON keeps "no default" apart from an explicit reflect101.
    EXPECT_EQ(graph_from_json(graph_to_json(g)), g);
    EXPECT_EQ(graph_from_json(graph_to_json(r)), r);
}

TEST(Graph, CompoundKindsExpandToTheirSteps) {
    const Graph g = parse_pipeline("tophat:5 | open:3:cross:2");
    const ExpandedGraph e = expand_compound(g);
    std::vector<std::string> ops;
    for (const auto& n : e.graph.nodes()) ops.push_back(n.name + "=" + n.op_string());
    const std::vector<std::string> want = {
        "input=input",     "n1.1=erode:5x1",     "n1.2=erode:1x5",     "n1.3=dilate:5x1",     "n1.4=dilate:1x5",
        "n1=blend:1:-1:0", "n2.1=erode:3:cross", "n2.2=erode:3:cross", "n2.3=dilate:3:cross", "n2=dilate:3:cross"};
    EXPECT_EQ(ops, want);
    EXPECT_EQ(e.ids, (std::vector<NodeId>{0, 5, 9}));
    EXPECT_EQ(e.graph.nodes()[5].inputs, (std::vector<NodeId>{0, 4}));
    // Iterations of a rectangle fold into one, as OpenCV folds them.
    const ExpandedGraph r = expand_compound(parse_pipeline("dilate:3:rect:3"));
    ASSERT_EQ(r.graph.nodes().size(), 3u);
    EXPECT_EQ(r.graph.nodes()[1].op_string(), "dilate:7x1");
    // On CUDA the centred 3x3 rectangle stays one pass, as on the CPU; 2x3 and two iterations of 2x2
    // (a 3x3 anchored at (2, 2)) split, as larger ones (iterations folded) do.
    const ExpandedGraph small =
        expand_compound(parse_pipeline("erode:3 | dilate:2x3 | erode:2:rect:2 | open:3 | erode:3:rect:2"));
    ops.clear();
    for (const auto& n : small.graph.nodes()) ops.push_back(n.name + "=" + n.op_string());
    const std::vector<std::string> small_want = {"input=input",    "n1=erode:3",   "n2.1=dilate:2x1", "n2=dilate:1x3",
                                                 "n3.1=erode:3x1", "n3=erode:1x3", "n4.1=erode:3",    "n4=dilate:3",
                                                 "n5.1=erode:5x1", "n5=erode:1x5"};
    EXPECT_EQ(ops, small_want);
    EXPECT_EQ(std::get<ErodeFilter>(std::get<Filter>(small.graph.nodes()[4].op)),
              (ErodeFilter{3, 1, MorphShape::rect, 1, 2, 0}));
    EXPECT_EQ(expand_compound(parse_pipeline("erode:3"), false).graph.nodes().size(), 2u);
}

TEST(Graph, ErrorsQuoteLongStagesShortly) {
    std::string kernel = "filter2d:";
    for (int i = 0; i < 64 * 64 - 1; ++i)  // the last row a tap short
        kernel += (i == 0 ? "" : i % 64 == 0 ? ";" : ",") + std::to_string(i % 7 + i / 64);
    try {
        parse_pipeline("blur:3 | " + kernel);
        ADD_FAILURE() << "a ragged 64x64 kernel was accepted";
    } catch (const std::invalid_argument& e) {
        const std::string what = e.what();
        EXPECT_LT(what.size(), 300u) << what;
        EXPECT_NE(what.find("stage 2 'filter2d:0,1,2,3,"), std::string::npos) << what;
        EXPECT_NE(what.find("...' (column 10)"), std::string::npos) << what;
    }
}

// NAME:@FILE is the flags' file form; in a pipeline '@' starts a schedule, which the error says.
TEST(Graph, AFileAfterAColonSaysWhereFilesAreRead) {
    expect_invalid([] { parse_pipeline("blur:3 | filter2d:@kernel.txt"); }, "stage 2 'filter2d:@kernel.txt'");
    expect_invalid([] { parse_pipeline("filter2d: @ kernel.txt"); }, "(--NAME @FILE)");
    EXPECT_NO_THROW(parse_pipeline("blur:3@column:32"));
    EXPECT_NO_THROW(parse_pipeline("sobel:@tile:32x8"));  // sobel's defaults, a schedule
}

TEST(Graph, ColourMatricesTakeRowsSeparatedBySemicolons) {
    EXPECT_EQ(parse_filter("color:0,0,1;0,1,0;1,0,0"), parse_filter("color:0,0,1,0,1,0,1,0,0"));
    EXPECT_EQ(parse_filter("color:1,0,0,5;0,1,0,6;0,0,1,7"), parse_filter("color:1,0,0,5,0,1,0,6,0,0,1,7"));
    for (const char* bad : {"color:1,0,0;0,1;0,0,1,0", "color:1,0,0;0,1,0", "color:1,0,0,0,1,0;0,0,1"})
        expect_invalid([&] { parse_filter(bad); }, "rows may be separated by ';'");
}

TEST(Graph, MorphologyArgumentsAreCheckedWithTheForm) {
    expect_invalid([] { parse_filter("erode:0"); }, "erode size '0' must be K or WxH");
    expect_invalid([] { parse_filter("erode:256"); }, "from 1 to 255");
    expect_invalid([] { parse_filter("erode:5:star"); }, "shape 'star' must be rect, cross or ellipse");
    expect_invalid([] { parse_filter("dilate:5:rect:0"); }, "iterations '0'");
    expect_invalid([] { parse_filter("open:3x"); }, "open:SIZE[:SHAPE[:ITERATIONS]]");
    expect_invalid([] { parse_filter("close"); }, "close size ''");
    EXPECT_EQ(to_string(parse_filter("gradient:5x3:ellipse:2")), "gradient:5x3:ellipse:2");
    EXPECT_EQ(to_string(parse_filter("erode:5:rect:1")), "erode:5");
}

}  // namespace
}  // namespace cbi
