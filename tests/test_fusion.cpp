// Fusion: a colour node read only by one stencil with a tile-staging
// schedule (smem/sep) runs inside that stencil's loads, a stencil read
// only by such a stencil inside its kernel (filters/pair_tiles.hpp on the GPU,
// filters/cpu/pair_lines.hpp's line buffers on the CPU), and a blend with the
// stencils it reads (cuda/blend.cu). Fused results must equal the unfused
// graph exactly, on the CPU and on the GPU; the plan says what was fused;
// nodes that must stay stored are not fused.
#include <gtest/gtest.h>

#include <barrier>
#include <cstring>
#include <thread>
#include <vector>

#include "filters/cpu/backend.hpp"
#include "filters/kernel_path.hpp"
#include "filters/pair_tiles.hpp"
#include "filters/then.hpp"
#include "pipeline/defaults.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/graph.hpp"
#include "pipeline/opencv.hpp"
#include "reference.hpp"
#if CBI_HAVE_CUDA
#include "filters/cuda/backend.hpp"
#include "pipeline/cuda_runtime.hpp"
#endif

namespace cbi {
namespace {

using test::random_image;

cv::Mat first_output(GraphExecutor& ex, const cv::Mat& src) {
    return as_mat(ex.run(view_of(src)).front()).clone();
}

RunOptions options(bool fuse, bool cuda = false, bool stencil_pairs = false) {
    RunOptions o;
    o.fuse = fuse;
    if (stencil_pairs) o.stencil_pairs = RunOptions::StencilPairs::all;
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

// Calls f(graph, source image, trace) for every case x depth x channel
// count (1 channel: the colour node reads it as R = G = B).
template <class F>
void for_each_case(int width, int height, F&& f) {
    for (const Case& c : kCases)
        for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32})
            for (const int channels : {1, 3, 4}) {
                SCOPED_TRACE(std::string(c.pipeline) + " " + c.border + " " + depth_name(depth) + "x" +
                             std::to_string(channels));
                f(parse_pipeline(c.pipeline, ScheduleSpec{}, parse_border(c.border)),
                  random_image(width, height, channels, depth, 7));
            }
}

// The CPU backend computes a node with a fused colour exactly as the two
// nodes (its executor fuses colour nodes only with --fuse-stencils: see
// TheCpuExecutorFusesStencilPairsAndColourNodesOnlyWhenAsked).
TEST(Fusion, FusedColourNodesEqualTheTwoNodesOnTheCpu) {
    for_each_case(67, 45, [](const Graph& g, const cv::Mat& src) {
        const auto& nodes = g.nodes();
        const ColorFilter color = std::get<ColorFilter>(std::get<Filter>(nodes[1].op));
        const Filter stencil = std::get<Filter>(nodes[2].op);
        const Border border = g.border_of(2);
        const ScheduleSpec schedule = std::get<ScheduleSpec>(g.schedule_of(2));
        cv::Mat colored(src.size(), CV_MAKETYPE(src.depth(), output_channels(color, src.channels())));
        run_node_cpu(FilterRun{color, Border{}, ScheduleSpec{}}, view_of(src), view_of(colored));
        cv::Mat want(colored.size(), colored.type()), got(colored.size(), colored.type(), cv::Scalar::all(3));
        run_node_cpu(FilterRun{stencil, border, schedule}, view_of(colored), view_of(want));
        run_node_cpu(FilterRun{stencil, border, schedule, color}, view_of(src), view_of(got));
        EXPECT_EQ(cv::norm(got, want, cv::NORM_INF), 0.0);
    });
}

// Capabilities::fuses_blend, as the planner asks it (cbi::supports): the
// staged and strip schedules (each backend's kernel_shape narrows it).
TEST(Fusion, StagedAndStripSchedulesComputeABlendWithItsStencils) {
    for (const char* s : {"stream:8x8", "sep:32x8", "smem:32x8"})
        EXPECT_TRUE(supports(parse_schedule(s), parse_filter("gaussian:5"), {}, Fusion{.blend = true})) << s;
    const std::string why =
        why_unsupported(parse_schedule("tile:32x8"), parse_filter("gaussian:5"), {}, Fusion{.blend = true});
    EXPECT_NE(why.find("cannot compute the blend that reads it; use smem:WxH, sep:WxH, stream:WxH"), std::string::npos)
        << why;
}

// On the CPU stencil pairs and colour nodes fuse only with --fuse-stencils
// (measured as fast or slower fused: fuses_pair_by_default,
// fuses_color_by_default), through line buffers; a blend of a stencil and
// its source always (the stencil's tasks blend what they store).
TEST(Fusion, TheCpuExecutorFusesOnlyWhenAsked) {
    const Graph chain = parse_pipeline("color:gray | gaussian:5@sep:32x8 | sobel:mag@sep:32x8");
    GraphExecutor ex(chain, options(true));
    ex.plan(40, 30, 3, Depth::u8);
    EXPECT_EQ(ex.describe().find("fused"), std::string::npos) << ex.describe();
    EXPECT_NE(ex.describe().find("3 kernels run"), std::string::npos) << ex.describe();
    GraphExecutor all(chain, options(true, false, true));  // --fuse-stencils
    all.plan(40, 30, 3, Depth::u8);
    EXPECT_NE(all.describe().find("reading input through color:gray)"), std::string::npos) << all.describe();
    EXPECT_NE(all.describe().find("1 kernel runs"), std::string::npos) << all.describe();
    // A pair reading a stored image (the Sobel's naive schedule keeps the Gaussian's output stored).
    GraphExecutor pair_only(parse_pipeline("color:gray | gaussian:5@sep:32x8 | sobel:mag@naive | blur:3@smem:8x8"),
                            options(true, false, true));
    pair_only.plan(40, 30, 3, Depth::u8);
    EXPECT_NE(pair_only.describe().find("(fused: computes n3 through line buffers, reading n2)"), std::string::npos)
        << pair_only.describe();
    // The same image fused or not, the fused one through line buffers.
    const cv::Mat src = random_image(131, 77, 3, Depth::u8, 21);
    const cv::Mat want = first_output(ex, src);
    EXPECT_EQ(cv::norm(first_output(all, src), want, cv::NORM_INF), 0.0);
    EXPECT_EQ(last_kernel_path(), KernelPath::cpu_chain);
    Graph unsharp;
    unsharp.add_output(unsharp.add_blend("sharp", parse_blend("1.5:-0.5"), Graph::input(),
                                         unsharp.add_filter("blurred", parse_filter("gaussian:9"), Graph::input())));
    GraphExecutor blend(unsharp, options(true));
    blend.plan(40, 30, 3, Depth::u8);
    EXPECT_NE(blend.describe().find("1 kernel runs (1 stencil fused into a blend), 1 buffer"), std::string::npos)
        << blend.describe();
    EXPECT_NE(blend.describe().find("(fused: computes blurred and blends each tile it stores, reading input)"),
              std::string::npos)
        << blend.describe();
}

// Fused stencil pairs (filters/pair_tiles.hpp) run tile by tile on the CPU
// backend too: a FilterRun with a fused_stencil gives exactly what its two
// nodes give one after the other.
struct PairNodes {
    const char* first;
    const char* second;
    const char* first_border;
    const char* second_border;
    const char* schedule;
};
constexpr PairNodes kPairNodes[] = {
    {"gaussian:5", "sobel:mag", "reflect101", "reflect101", "sep:32x8"},
    {"blur:3", "gaussian:7:1.5", "constant:9", "reflect", "smem:8x4"},
    {"sobel:x:5", "blur:9", "replicate", "constant:200", "smem:3x2"},  // tiles narrower than the halo
    {"sobel:mag:1", "sobel:y:7", "reflect", "replicate", "sep:16x16"},
    {"blur:31", "gaussian:3", "reflect101", "reflect101", "sep:64x32"},
    {"gaussian:9:3", "blur:1", "constant:0", "reflect", "smem:5x7"},
};

// `src` through the optional colour matrix, then `first`, then `second`, as separate nodes.
cv::Mat unfused(const PairNodes& p, const std::optional<ColorFilter>& color, const cv::Mat& src) {
    cv::Mat in = src;
    if (color) {
        cv::Mat c(src.rows, src.cols, CV_MAKETYPE(src.depth(), output_channels(*color, src.channels())));
        run_node_cpu(FilterRun{*color, Border{}, ScheduleSpec{}}, view_of(in), view_of(c));
        in = c;
    }
    cv::Mat mid(in.size(), in.type()), out(in.size(), in.type());
    run_node_cpu(FilterRun{parse_filter(p.first), parse_border(p.first_border), ScheduleSpec{}}, view_of(in),
                 view_of(mid));
    run_node_cpu(FilterRun{parse_filter(p.second), parse_border(p.second_border), ScheduleSpec{}}, view_of(mid),
                 view_of(out));
    return out;
}

FilterRun fused_node(const PairNodes& p, const std::optional<ColorFilter>& color) {
    return FilterRun{parse_filter(p.second), parse_border(p.second_border), parse_schedule(p.schedule), color,
                     FusedStencil{parse_filter(p.first), parse_border(p.first_border)}};
}

TEST(Fusion, FusedStencilPairTilesEqualTheTwoNodesOnTheCpu) {
    const int sizes[][2] = {{131, 77}, {7, 3}, {1, 1}, {2, 9}, {64, 32}};
    const std::optional<ColorFilter> colors[] = {std::nullopt, FilterKind<ColorFilter>::parse("gray"),
                                                 FilterKind<ColorFilter>::parse("sepia")};
    for (const PairNodes& p : kPairNodes)
        for (const auto& color : colors)
            for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32})
                for (const int channels : {1, 3, 4}) {
                    for (const auto& size : sizes) {
                        SCOPED_TRACE(std::string(p.first) + " " + p.first_border + " | " + p.second + " " +
                                     p.second_border + " @" + p.schedule + (color ? " colour" : "") + " " +
                                     depth_name(depth) + "x" + std::to_string(channels) + " " +
                                     std::to_string(size[0]) + "x" + std::to_string(size[1]));
                        const cv::Mat src = random_image(size[0], size[1], channels, depth, 3);
                        const cv::Mat want = unfused(p, color, src);
                        cv::Mat got(want.size(), want.type(), cv::Scalar::all(123));
                        run_node_cpu(fused_node(p, color), view_of(src), view_of(got));
                        EXPECT_EQ(cv::norm(got, want, cv::NORM_INF), 0.0);
                    }
                }
}

// The CUDA kernel runs chain_tile with a block's threads sharing the tile
// buffer: strided loops and barriers. Here a team of CPU threads with a
// std::barrier does the same (one tile at a time), so the decomposition is
// checked where there is no GPU: a missing barrier or an overlapping loop
// shows up as a wrong sample (and under ThreadSanitizer as a race).
struct ThreadTeam {
    int tx, ty, nx, ny;
    std::barrier<>* barrier;
    void sync() const { barrier->arrive_and_wait(); }
};

TEST(Fusion, ATeamOfThreadsComputesTheSameTilesAsOneThread) {
    for (const PairNodes& p : kPairNodes)
        for (const auto& [depth, channels] :
             {std::pair{Depth::u8, 3}, {Depth::f32, 3}, {Depth::u8, 1}, {Depth::f32, 1}}) {
            SCOPED_TRACE(std::string(p.first) + " | " + p.second + " @" + p.schedule + " " + depth_name(depth) + "x" +
                         std::to_string(channels));
            const cv::Mat src = random_image(45, 23, channels, depth, 9);
            const std::optional<ColorFilter> color = FilterKind<ColorFilter>::parse("sepia");
            const cv::Mat want = unfused(p, color, src);
            cv::Mat got(want.size(), want.type(), cv::Scalar::all(7));
            const FilterRun node = fused_node(p, color);
            const TileSchedule tile = chain_tile_size(node.schedule);
            with_chain_ops(node, view_of(src), view_of(got), [&](const auto& pre, const auto& op) {
                const ChainLayout L = chain_layout(tile.tile_width, tile.tile_height, pre, op);
                std::vector<std::max_align_t> buffer(L.bytes / sizeof(std::max_align_t) + 1);
                constexpr int nx = 5, ny = 3;  // odd shapes: loops that do not divide evenly
                for (int ty = 0; ty * L.tile_h < got.rows; ++ty)
                    for (int tx = 0; tx * L.tile_w < got.cols; ++tx) {
                        std::barrier<> barrier(nx * ny);
                        std::vector<std::jthread> team;
                        for (int t = 0; t < nx * ny; ++t)
                            team.emplace_back([&, t] {
                                chain_tile(pre, op, L, reinterpret_cast<unsigned char*>(buffer.data()), tx, ty,
                                           ThreadTeam{t % nx, t / nx, nx, ny, &barrier});
                            });
                    }
            });
            EXPECT_EQ(cv::norm(got, want, cv::NORM_INF), 0.0);
        }
}

// Whether two images hold the same bytes (NaN included).
bool same_bytes(const cv::Mat& a, const cv::Mat& b) {
    if (a.size() != b.size() || a.type() != b.type()) return false;
    for (int y = 0; y < a.rows; ++y)
        if (std::memcmp(a.ptr(y), b.ptr(y), a.cols * a.elemSize()) != 0) return false;
    return true;
}

// A per-sample node (threshold, scale, gamma) after a node of any kind is
// applied by that node's kernel as it stores each sample (FilterRun::then):
// equal to the two nodes run on their own, for every kind (an otsu threshold
// too: its level is its input's), depth and channel count, on the row, tile
// and per-pixel (index map) paths of the CPU.
TEST(Fusion, PerSampleNodesAppliedByTheKernelBeforeEqualTheTwoNodesOnTheCpu) {
    const auto tails = [](Depth d) -> std::vector<std::string> {
        if (d == Depth::u8) return {"threshold:100:200:binary_inv", "scale:1.5:-20.25", "gamma:2.2"};
        if (d == Depth::u16) return {"threshold:30000::trunc", "scale:0.7:100", "gamma:0.45"};
        return {"threshold:0.5:1:tozero", "scale:-1:1", "gamma:2.2"};
    };
    int fused = 0;
    for_each_kind([&]<class F>(std::type_identity<F>) {
        using Kind = FilterKind<F>;
        for (const std::string_view example : {Kind::examples[0], std::end(Kind::examples)[-1]}) {
            const std::string head = std::string(Kind::name) + (example.empty() ? "" : ":" + std::string(example));
            const Filter filter = parse_filter(head);
            for (const char* schedule : {"", "@naive", "@column:8", "@sep:16x8"}) {
                if (*schedule && !supports(parse_schedule(schedule + 1), filter)) continue;
                for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32})
                    for (const int channels : {1, 3}) {
                        if (!refuses_input(filter, depth, channels).empty()) continue;
                        const cv::Mat src = random_image(37, 23, channels, depth, 5);
                        for (const std::string& tail : tails(depth)) {
                            const std::string text = head + schedule + " | " + tail;
                            SCOPED_TRACE(text + " " + depth_name(depth) + "x" + std::to_string(channels));
                            const Graph g = parse_pipeline(text);
                            GraphExecutor one(g, options(true)), two(g, options(false));
                            EXPECT_TRUE(same_bytes(first_output(one, src), first_output(two, src)));
                            const bool applied = one.describe().find("stores each sample)") != std::string::npos;
                            EXPECT_TRUE(applied) << one.describe();
                            fused += applied;
                        }
                    }
            }
        }
    });
    EXPECT_GT(fused, 500);
}

// blend(input, s) (or blend(s, input): stencil_first) of the stencil s = filter(input) on `schedule` (none: the
// default), then a threshold when asked: the graph both backends' blend fusions are tested on.
Graph stencil_blend_graph(const Filter& filter, const char* schedule, Depth depth, bool stencil_first, bool threshold) {
    Graph g;
    NodeOptions o;
    if (*schedule) o.schedule = parse_schedule(schedule);
    if (depth == Depth::u16) o.border = Border{BorderMode::constant, 1000};
    const NodeId s = g.add_filter("s", filter, Graph::input(), o);
    const BlendFilter b = parse_blend(stencil_first ? "1.5:-0.5:3" : "1:-1:2");
    NodeId out = stencil_first ? g.add_blend("b", b, s, Graph::input()) : g.add_blend("b", b, Graph::input(), s);
    if (threshold) out = g.add_filter("t", parse_filter(depth == Depth::f32 ? "threshold:0.1" : "threshold:3"), out);
    g.add_output(out);
    return g;
}

// On the CPU a blend of a stencil and the stencil's source (an unsharp mask,
// an adaptive threshold's difference) is applied by the stencil's tasks to
// what they store (cpu::Then), a per-sample node after it too: equal to the
// nodes run on their own, for every stencil kind, the stencil as either
// operand, every depth and 1 or 3 channels, on the default and staged
// schedules, with and without a border that reads outside.
TEST(Fusion, BlendsOfAStencilAndItsSourceEqualTheUnfusedNodesOnTheCpu) {
    int fused = 0;
    for_each_kind([&]<class F>(std::type_identity<F>) {
        using Kind = FilterKind<F>;
        if (Kind::category != Category::stencil) return;
        for (const std::string_view example : {Kind::examples[0], std::end(Kind::examples)[-1]}) {
            const Filter filter = parse_filter(std::string(Kind::name) + ":" + std::string(example));
            for (const char* schedule : {"", "sep:16x8", "smem:8x8"})
                for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32})
                    for (const int channels : {1, 3}) {
                        if (!refuses_input(filter, depth, channels).empty()) continue;
                        const cv::Mat src = random_image(37, 23, channels, depth, 9);
                        for (const bool stencil_first : {false, true})
                            for (const bool threshold : {false, true}) {
                                SCOPED_TRACE(to_string(filter) + "@" + schedule + " " + depth_name(depth) + "x" +
                                             std::to_string(channels) + (stencil_first ? " stencil first" : "") +
                                             (threshold ? " | threshold" : ""));
                                const Graph g = stencil_blend_graph(filter, schedule, depth, stencil_first, threshold);
                                GraphExecutor one(g, options(true)), two(g, options(false));
                                EXPECT_TRUE(same_bytes(first_output(one, src), first_output(two, src)));
                                const bool blended =
                                    one.describe().find("blends each tile it stores") != std::string::npos;
                                if (*schedule) {
                                    EXPECT_TRUE(blended) << one.describe();
                                }
                                fused += blended;
                            }
                    }
        }
    });
    EXPECT_GT(fused, 300);
}

// On the CPU a colour node read only by a median is converted row by row as
// the median's rows load their source (MedianOp::extend_coloured), never
// stored: equal to the two nodes, for every preset, K, depth, 3- and
// 4-channel input, border, and with a per-sample node after it; K = 1 and
// kinds whose op does not take it (erode) keep the colour node.
TEST(Fusion, AColourNodeBeforeAMedianIsConvertedAsItsRowsLoadOnTheCpu) {
    int fused = 0;
    for (const char* colour : {"gray", "ycrcb", "sepia", "0.2,0.3,0.5,1,0.5,0.25,0.125,-3,0,0,1,0"})
        for (const char* median : {"median:1", "median:3", "median:5", "median:9", "erode:3"})
            for (const char* border : {"", "reflect101", "reflect", "wrap", "constant:7"})
                for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32})
                    for (const int channels : {3, 4}) {
                        const std::string text = std::string("color:") + colour + " | " + median +
                                                 (*border ? std::string("@naive") : "") +
                                                 (depth == Depth::u8 ? " | threshold:100" : "");
                        SCOPED_TRACE(text + " border " + border + " " + depth_name(depth) + "x" +
                                     std::to_string(channels));
                        Graph g = parse_pipeline(text);
                        if (*border) g.set_default_border(parse_border(border));
                        const cv::Mat src = random_image(41, 19, channels, depth, 13);
                        GraphExecutor one(g, options(true)), two(g, options(false));
                        EXPECT_TRUE(same_bytes(first_output(one, src), first_output(two, src)));
                        const bool through = one.describe().find("through color:") != std::string::npos;
                        const bool takes = std::string(median) != "median:1" && std::string(median) != "erode:3";
                        EXPECT_EQ(through, takes) << one.describe();
                        fused += through;
                    }
    EXPECT_EQ(fused, 4 * 3 * 5 * 3 * 2);
}

// The 8-bit stream kernel applies a per-sample node eight samples at a time
// (ThenSamples::bytes8: a threshold's byte-wise rule, the others sample by
// sample): equal to sample() on every byte value, for every threshold type
// and level, the edges (T < 0, T >= 255) included.
TEST(Fusion, EightSamplesAtOnceEqualSampleBySample) {
    for (const char* type : {"binary", "binary_inv", "trunc", "tozero", "tozero_inv"})
        for (const char* level : {"-3", "0", "100.5", "254", "255", "300"})
            for (const char* maxval : {"", "77"}) {
                const Filter f = parse_filter(std::string("threshold:") + level + ":" + maxval + ":" + type);
                SCOPED_TRACE(to_string(f));
                const ThenSamples<std::uint8_t> then = then_samples<std::uint8_t>(f, ImageView{});
                for (int v = 0; v < 256; v += 8) {
                    unsigned long long word = 0, want = 0;
                    for (int k = 0; k < 8; ++k) {
                        const auto byte = static_cast<std::uint8_t>(v + k);
                        word |= static_cast<unsigned long long>(byte) << (8 * k);
                        want |= static_cast<unsigned long long>(then(byte)) << (8 * k);
                    }
                    ASSERT_EQ(then.bytes8(word), want) << v;
                }
            }
}

// With --fuse-stencils the CPU runs a colour node and a stencil pair as one
// chain through line buffers; a per-sample node after it is applied to each
// tile the chain writes.
TEST(Fusion, PerSampleNodesAfterACpuChainEqualTheUnfusedGraph) {
    for (const char* text :
         {"color:gray | gaussian:5@sep:32x8 | sobel:mag@sep:32x8 | threshold:100:255:binary_inv",
          "gaussian:3@sep:16x16 | blur:5@sep:16x16 | scale:0.5:7", "color:sepia | blur:3@sep:32x8 | gamma:2.2"})
        for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32}) {
            SCOPED_TRACE(std::string(text) + " " + depth_name(depth));
            const Graph g = parse_pipeline(text);
            const cv::Mat src = random_image(131, 77, 3, depth, 29);
            GraphExecutor chain(g, options(true, false, true)), plain(g, options(false));
            EXPECT_TRUE(same_bytes(first_output(chain, src), first_output(plain, src)));
            const std::string plan = chain.describe();
            EXPECT_TRUE(plan.find("through line buffers") != std::string::npos ||
                        plan.find("(fused: reads input through") != std::string::npos)
                << plan;
            EXPECT_NE(chain.describe().find("stores each sample)"), std::string::npos) << chain.describe();
        }
}

// What stays two kernels: a node whose output is also read elsewhere (an
// output, or a second reader), an otsu threshold (its level needs the whole
// image), a second per-sample node after one already applied.
TEST(Fusion, PerSampleNodesStayOnTheirOwnWhereTheNodeBeforeIsNeeded) {
    const auto plan = [](const Graph& g) {
        GraphExecutor ex(g, options(true));
        ex.plan(40, 30, 1, Depth::u8);
        return ex.describe();
    };
    Graph both;
    const NodeId blurred = both.add_filter("blurred", parse_filter("blur:3"), Graph::input());
    both.add_output(blurred);
    both.add_output(both.add_filter("mask", parse_filter("threshold:100"), blurred));
    EXPECT_EQ(plan(both).find("fused"), std::string::npos) << plan(both);
    EXPECT_EQ(plan(parse_pipeline("blur:3 | threshold:0:255:otsu")).find("fused"), std::string::npos);
    const std::string two = plan(parse_pipeline("blur:3 | scale:2 | gamma:2"));
    EXPECT_NE(two.find("@sep:256x256 (n1's kernel)"), std::string::npos) << two;
    EXPECT_NE(two.find("2 kernels run (1 per-sample node applied by the kernel before)"), std::string::npos) << two;
    // --no-fuse: every node its own kernel.
    GraphExecutor off(parse_pipeline("blur:3 | threshold:100"), options(false));
    off.plan(40, 30, 1, Depth::u8);
    EXPECT_EQ(off.describe().find("fused"), std::string::npos) << off.describe();
}

// A colour node on a gray image (read as R = G = B), fused into the
// stencil that reads it: the graph with fusion asked for, the fused node and
// the graph on cv::cvtColor(GRAY2BGR) of the image give the same samples.
TEST(Fusion, FusedColourOnAGrayImageEqualsTheGraphOnGrayToBgr) {
    for (const char* pipeline :
         {"color:sepia | gaussian:5@sep:32x8", "color:ycrcb | sobel:mag@smem:16x8", "color:gray | blur:7@sep:16x16"})
        for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32}) {
            SCOPED_TRACE(std::string(pipeline) + " " + depth_name(depth));
            const Graph g = parse_pipeline(pipeline);
            const cv::Mat src = random_image(131, 77, 1, depth, 13);
            cv::Mat bgr;
            cv::cvtColor(src, bgr, cv::COLOR_GRAY2BGR);
            GraphExecutor on_gray(g, options(true)), on_bgr(g, options(false));
            const cv::Mat graph = first_output(on_gray, src);
            const ColorFilter color = std::get<ColorFilter>(std::get<Filter>(g.nodes()[1].op));
            const FilterRun fused{std::get<Filter>(g.nodes()[2].op), g.border_of(2),
                                  std::get<ScheduleSpec>(g.schedule_of(2)), color};
            cv::Mat got(graph.size(), graph.type(), cv::Scalar::all(5));
            run_node_cpu(fused, view_of(src), view_of(got));
            EXPECT_EQ(graph.channels(), color.preset == ColorPreset::gray ? 1 : 3);
            EXPECT_EQ(cv::norm(got, graph, cv::NORM_INF), 0.0);
            if (color.preset != ColorPreset::gray) {
                EXPECT_EQ(cv::norm(got, first_output(on_bgr, bgr), cv::NORM_INF), 0.0);
            }
        }
}

#if CBI_HAVE_CUDA
// Two stencils in one kernel (cuda/pair.cu): the first stencil's output is
// computed per tile in shared memory. Bit-identical to the unfused graph on
// the GPU and, for integer depths, to the CPU backend.
struct PairCase {
    const char* pipeline;
    const char* border;
    int input_channels;
};
constexpr PairCase kPairs[] = {
    {"gaussian:5@sep:32x8 | sobel:mag@sep:32x8", "reflect101", 1},
    {"color:gray | gaussian:5@sep:64x32 | sobel:mag@sep:64x32", "reflect101", 3},
    {"color:gray | gaussian:5@sep:64x32 | sobel:mag@smem:32x16", "replicate", 4},
    {"blur:3@smem:16x8 | gaussian:7:1.5@smem:8x4", "constant:9", 3},
    {"sobel:x:5@sep:16x16 | blur:9@smem:3x2", "reflect", 4},  // tiles narrower than the halo
    {"color:sepia | blur:5@smem:16x8 | sobel:y:7@sep:32x8", "reflect", 3},
    {"sobel:mag:1@sep:16x8 | sobel:mag:3@sep:16x8", "constant:200", 1},
    {"blur:31@sep:32x8 | gaussian:3@sep:32x8", "reflect101", 3},
    {"color:sepia | gaussian:5@sep:32x8 | sobel:mag@sep:32x8", "reflect101", 1},  // gray read as R = G = B
    {"color:gray | blur:5@smem:16x8 | gaussian:3@sep:16x8", "replicate", 1},      // gray of gray: a copy
};

bool has_gpu(std::string& why) {
    return cuda_device_count(why) > 0;
}

TEST(Fusion, StencilPairsFuseOnTheGpuAndEqualTheUnfusedGraph) {
    std::string why;
    if (!has_gpu(why)) GTEST_SKIP() << "no CUDA device: " << why;
    const int sizes[][2] = {{131, 77}, {7, 3}, {1, 1}, {2, 9}};
    for (const PairCase& c : kPairs)
        for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32})
            for (const auto& size : sizes) {
                SCOPED_TRACE(std::string(c.pipeline) + " " + c.border + " " + depth_name(depth) + " " +
                             std::to_string(size[0]) + "x" + std::to_string(size[1]));
                const Graph g = parse_pipeline(c.pipeline, ScheduleSpec{}, parse_border(c.border));
                const cv::Mat src = random_image(size[0], size[1], c.input_channels, depth, 11);
                GraphExecutor fused(g, options(true, true, true)), plain(g, options(false, true)),
                    cpu(g, options(false));
                const cv::Mat a = first_output(fused, src), b = first_output(plain, src);
                EXPECT_NE(fused.describe().find("in shared memory"), std::string::npos) << fused.describe();
                EXPECT_NE(fused.describe().find("(1 stencil fused into the next)"), std::string::npos)
                    << fused.describe();
                ASSERT_EQ(a.type(), b.type());
                EXPECT_EQ(cv::norm(a, b, cv::NORM_INF), 0.0);
                if (depth != Depth::f32) {
                    EXPECT_EQ(cv::norm(a, first_output(cpu, src), cv::NORM_INF), 0.0);
                }
            }
}

// Stencil pairs on stream:WxH (cuda/pair_strip.cuh), with --fuse-stencils:
// the strip walk through line buffers, bit-identical to the unfused graph
// and to the CPU backend. Strips shorter and narrower than the halos, every
// border, edge warps, a gray conversion before the pair, 1 and 3 channels,
// first stencils smaller than 5x5, consumers of 3x3 and 5x5.
constexpr PairCase kStreamPairs[] = {
    {"color:gray | gaussian:5@stream:64x16 | sobel:mag@stream:64x16", "reflect101", 3},
    {"color:gray | gaussian:5@stream:64x16 | sobel:mag@stream:64x16", "constant:9", 3},
    {"color:gray | gaussian:3@stream:512x7 | gaussian:5@stream:512x7", "replicate", 3},
    {"gaussian:5@stream:32x8 | sobel:mag@stream:32x8", "replicate", 1},
    {"gaussian:5@stream:300x5 | sobel:mag@stream:300x5", "reflect",
     3},  // constant weights (binomial5_weight) on 3 channels
    {"blur:3@stream:7x5 | gaussian:5@stream:7x5", "reflect", 3},
    {"blur:5@stream:16x3 | sobel:x:5@stream:16x3", "constant:200", 1},
    {"gaussian:5@stream:1x1 | sobel:y@stream:1x1", "replicate", 1},
    {"blur:3@stream:33x5 | blur:5@stream:33x5", "constant:3", 3},
    {"blur:1@stream:300x2 | sobel:mag@stream:300x2", "reflect", 3},
    {"gaussian:3 | sobel:mag", "reflect101", 3},  // no schedule given: the defaults
};

// On the GPU the stencil kernels on sep:WxH and stream:WxH (the 8-bit and
// the generic stream kernel) and the fused 8-bit blends apply a per-sample
// node as they store: equal to the GPU's two kernels and to the CPU. Other
// kernels (a median's, a stencil pair's) leave it a kernel of its own.
TEST(Fusion, PerSampleNodesAppliedByGpuStencilsEqualTheTwoKernels) {
    std::string why;
    if (!has_gpu(why)) GTEST_SKIP() << "no CUDA device: " << why;
    struct ThenCase {
        const char* pipeline;
        bool applied;
    };
    const ThenCase cases[] = {
        {"gaussian:5@sep:32x32 | threshold:100:200:binary_inv", true},
        {"blur:3@stream:64x8 | scale:1.5:-20.25", true},
        {"sobel:mag@stream:256x16 | gamma:2.2", true},
        {"gaussian:9:2@stream:64x8 | threshold:0.5::trunc", true},
        {"laplacian:3@sep:64x32 | scale:0.7:3", true},
        {"sepfilter2d:1,2,1;-1,0,1@sep:32x8 | gamma:0.45", true},
        {"color:gray | gaussian:5@sep:32x32 | threshold:100", true},
        {"gaussian:5 | threshold:100", true},
        {"blur:31 | scale:2", true},
        {"median:5 | threshold:100", false},
        {"gaussian:5@smem:16x16 | threshold:100", false},
    };
    const int sizes[][2] = {{301, 203}, {7, 3}, {1, 1}, {245, 9}};
    for (const ThenCase& c : cases)
        for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32})
            for (const int channels : {1, 3})
                for (const auto& size : sizes) {
                    SCOPED_TRACE(std::string(c.pipeline) + " " + depth_name(depth) + "x" + std::to_string(channels) +
                                 " " + std::to_string(size[0]) + "x" + std::to_string(size[1]));
                    const Graph g = parse_pipeline(c.pipeline);
                    const cv::Mat src = random_image(size[0], size[1], channels, depth, 17);
                    GraphExecutor fused(g, options(true, true)), plain(g, options(false, true));
                    const cv::Mat a = first_output(fused, src), b = first_output(plain, src);
                    // 8-bit scale and gamma look their results up in a pass of their own (looks_up_8bit).
                    const std::string text = c.pipeline;
                    const Filter then = parse_filter(text.substr(text.rfind('|') + 2));
                    const bool applied = c.applied && !(depth == Depth::u8 && looks_up_8bit(then));
                    EXPECT_EQ(fused.describe().find("stores each sample)") != std::string::npos, applied)
                        << fused.describe();
                    EXPECT_TRUE(same_bytes(a, b));
                }
    // An adaptive threshold's blend (vec:N) applies its threshold.
    {
        const Graph g = parse_pipeline("median:3 | adaptive:255:mean:11:2");
        const cv::Mat src = random_image(301, 203, 1, Depth::u8, 23);
        GraphExecutor fused(g, options(true, true)), cpu(g, options(false));
        const cv::Mat a = first_output(fused, src);
        EXPECT_NE(fused.describe().find("(fused: applied as n2.2 stores each sample)"), std::string::npos)
            << fused.describe();
        EXPECT_TRUE(same_bytes(a, first_output(cpu, src)));
    }
    // The fused 8-bit blend (an unsharp mask on stream) applies it too.
    Graph unsharp;
    const NodeId blurred = unsharp.add_filter("blurred", parse_filter("gaussian:5"), Graph::input());
    const NodeId sharp = unsharp.add_blend("sharp", parse_blend("1.5:-0.5"), Graph::input(), blurred);
    unsharp.add_output(unsharp.add_filter("mask", parse_filter("threshold:128"), sharp));
    const cv::Mat src = random_image(301, 203, 3, Depth::u8, 19);
    GraphExecutor fused(unsharp, options(true, true)), plain(unsharp, options(false, true)),
        cpu(unsharp, options(false));
    const cv::Mat a = first_output(fused, src);
    EXPECT_NE(fused.describe().find("1 kernel runs"), std::string::npos) << fused.describe();
    EXPECT_TRUE(same_bytes(a, first_output(plain, src)));
    EXPECT_TRUE(same_bytes(a, first_output(cpu, src)));
}

TEST(Fusion, StencilPairsOnStreamFuseThroughLineBuffersOnTheGpu) {
    std::string why;
    if (!has_gpu(why)) GTEST_SKIP() << "no CUDA device: " << why;
    // 240 and 245: a 1-channel warp outputs 240 samples; its last lane, a halo lane, holds samples 240..247.
    // 152 x 3 channels: the second warp's last lane (a halo lane) starts at the row's end, outside the image,
    // in a warp that is not at the row's end (the next outputs its last 8 bytes).
    const int sizes[][2] = {{131, 77}, {7, 3}, {1, 1}, {2, 9}, {300, 41}, {509, 12}, {240, 6}, {245, 9}, {152, 11}};
    for (const PairCase& c : kStreamPairs)
        for (const auto& size : sizes) {
            SCOPED_TRACE(std::string(c.pipeline) + " " + c.border + " " + std::to_string(size[0]) + "x" +
                         std::to_string(size[1]));
            const Graph g = parse_pipeline(c.pipeline, DefaultSchedule{}, parse_border(c.border));
            const cv::Mat src = random_image(size[0], size[1], c.input_channels, Depth::u8, 13);
            GraphExecutor fused(g, options(true, true, true)), plain(g, options(false, true)), cpu(g, options(false));
            const cv::Mat a = first_output(fused, src), b = first_output(plain, src);
            EXPECT_NE(fused.describe().find("through line buffers"), std::string::npos) << fused.describe();
            EXPECT_NE(fused.describe().find("(1 stencil fused into the next)"), std::string::npos) << fused.describe();
            ASSERT_EQ(a.type(), b.type());
            EXPECT_EQ(cv::norm(a, b, cv::NORM_INF), 0.0);
            EXPECT_EQ(cv::norm(a, first_output(cpu, src), cv::NORM_INF), 0.0);
        }
}

TEST(Fusion, StreamPairsOutsideTheLineBufferKernelRunUnfusedOnTheGpu) {
    std::string why;
    if (!has_gpu(why)) GTEST_SKIP() << "no CUDA device: " << why;
    const auto describe = [](const char* pipeline, Depth depth, int channels, const char* border = "reflect101") {
        GraphExecutor ex(parse_pipeline(pipeline, ScheduleSpec{}, parse_border(border)), options(true, true, true));
        ex.plan(64, 48, channels, depth);
        return ex.describe();
    };
    EXPECT_EQ(describe("blur:3@stream:64x8 | blur:7@stream:64x8", Depth::u8, 1).find("fused"),
              std::string::npos);  // 7x7
    EXPECT_EQ(describe("blur:3@stream:64x8 | blur:5@stream:64x8", Depth::f32, 1).find("fused"),
              std::string::npos);  // float
    EXPECT_EQ(describe("sobel:mag@stream:64x8 | blur:3@stream:64x8", Depth::u8, 1).find("fused"),
              std::string::npos);  // not a blur first
    EXPECT_EQ(describe("blur:3@stream:64x8 | blur:5@stream:64x8", Depth::u8, 1, "wrap").find("fused"),
              std::string::npos);
    EXPECT_EQ(describe("blur:3@stream:64x8 | blur:5@stream:64x8", Depth::u8, 4).find("fused"),
              std::string::npos);  // 4 channels
    EXPECT_EQ(describe("blur:7@stream:64x8 | blur:3@stream:64x8", Depth::u8, 1).find("fused"),
              std::string::npos);  // 7x7 first
    EXPECT_EQ(describe("gaussian:3@stream:64x8 | laplacian:3@stream:64x8", Depth::u8, 1).find("stencil fused"),
              std::string::npos);
    // A Gaussian of another sigma: its fixed-point weights have no common factor, so its sums outgrow 16-bit lanes.
    EXPECT_EQ(describe("gaussian:5:0.8@stream:64x8 | sobel:y@stream:64x8", Depth::u8, 1).find("stencil fused"),
              std::string::npos);
    EXPECT_EQ(describe("color:sepia | blur:5@stream:64x8 | gaussian:3@stream:64x8", Depth::u8, 3).find("stencil fused"),
              std::string::npos);  // a colour matrix other than gray
    EXPECT_EQ(describe("color:gray | blur:5@stream:64x8 | gaussian:3@stream:64x8", Depth::u8, 4).find("stencil fused"),
              std::string::npos);  // gray of BGRA
    EXPECT_EQ(describe("color:gray | blur:5@stream:64x8 | gaussian:3@stream:64x8", Depth::u8, 1).find("stencil fused"),
              std::string::npos);  // gray of gray
    // Not asked for (a blur before a Gaussian), or --no-fuse: every node its own kernel.
    GraphExecutor smoothing(parse_pipeline("blur:3 | gaussian:5", DefaultSchedule{}), options(true, true));
    smoothing.plan(64, 48, 3, Depth::u8);
    EXPECT_EQ(smoothing.describe().find("fused"), std::string::npos) << smoothing.describe();
    GraphExecutor off(parse_pipeline("color:gray | gaussian:5 | sobel:mag", DefaultSchedule{}), options(false, true));
    off.plan(64, 48, 3, Depth::u8);
    EXPECT_EQ(off.describe().find("fused"), std::string::npos) << off.describe();
}

// By default (no --fuse-stencils) a stencil pair fuses where the line-buffer
// kernel was measured faster (fuses_pair_by_default): 8-bit pairs on stream
// with a gray conversion of BGR before them, with a 3x3 Sobel at the end,
// or a Gaussian before a Gaussian or a Sobel. Such images run here, against
// the unfused graph and the CPU.
TEST(Fusion, PairsMeasuredFasterFuseByDefaultOnTheGpu) {
    std::string why;
    if (!has_gpu(why)) GTEST_SKIP() << "no CUDA device: " << why;
    const auto fused = [](const char* pipeline, int width, int height, int channels,
                          RunOptions o = options(true, true)) {
        GraphExecutor ex(parse_pipeline(pipeline, DefaultSchedule{}), o);
        ex.plan(width, height, channels, Depth::u8);
        return ex.describe().find("through line buffers") != std::string::npos;
    };
    EXPECT_TRUE(fused("color:gray | gaussian:5 | sobel:mag", 1920, 1080, 3));
    EXPECT_TRUE(fused("color:gray | gaussian:5 | sobel:mag", 64, 48, 3));
    EXPECT_TRUE(fused("color:gray | blur:3 | gaussian:5", 640, 480, 3));
    EXPECT_TRUE(fused("gaussian:5 | sobel:mag", 6000, 4000, 3));  // a 3x3 Sobel: any size
    EXPECT_TRUE(fused("blur:3 | sobel:x", 640, 480, 1));
    EXPECT_FALSE(fused("blur:3 | gaussian:5", 6000, 4000, 1));  // a blur first, no gray conversion, no 3x3 Sobel
    EXPECT_FALSE(fused("blur:3 | gaussian:5", 640, 480, 1));
    EXPECT_TRUE(fused("gaussian:5 | sobel:mag:5", 6000, 4000, 1));  // a Gaussian first, then a Gaussian or a Sobel
    EXPECT_TRUE(fused("gaussian:3 | gaussian:3", 640, 480, 3));
    RunOptions none = options(true, true);
    none.stencil_pairs = RunOptions::StencilPairs::none;
    EXPECT_FALSE(fused("color:gray | gaussian:5 | sobel:mag", 6000, 4000, 3, none));
    EXPECT_FALSE(fused("color:gray | gaussian:5 | sobel:mag", 6000, 4000, 3, options(false, true)));  // --no-fuse
    // Fused by default, equal to the unfused graph and the CPU.
    const auto fuses_and_matches = [](const char* pipeline, const char* border, const cv::Mat& src) {
        SCOPED_TRACE(pipeline);
        const Graph g = parse_pipeline(pipeline, DefaultSchedule{}, parse_border(border));
        GraphExecutor by_default(g, options(true, true)), plain(g, options(false, true)), cpu(g, options(false));
        const cv::Mat a = first_output(by_default, src);
        EXPECT_NE(by_default.describe().find("through line buffers"), std::string::npos) << by_default.describe();
        EXPECT_EQ(cv::norm(a, first_output(plain, src), cv::NORM_INF), 0.0);
        EXPECT_EQ(cv::norm(a, first_output(cpu, src), cv::NORM_INF), 0.0);
    };
    // Odd-sized images, one of a photo's size.
    fuses_and_matches("color:gray | gaussian:5 | sobel:mag", "reflect101", random_image(4001, 1750, 3, Depth::u8, 17));
    fuses_and_matches("color:gray | blur:3 | gaussian:5", "replicate", random_image(203, 101, 3, Depth::u8, 18));
    // A Sobel pair on a small odd-sized image, 3 channels, constant border.
    fuses_and_matches("blur:5 | sobel:mag", "constant:40", random_image(333, 97, 3, Depth::u8, 19));
    fuses_and_matches("gaussian:5 | gaussian:5", "reflect", random_image(517, 203, 1, Depth::u8, 20));
}

// A stencil, a fused pair or a fused blend on the default table's schedule
// walks strips of the height the backend picks for the image: an image of
// few blocks fills the GPU with the shortest strips; a given schedule keeps
// its height. The outputs stay those of the unfused graph and the CPU.
TEST(Fusion, DefaultStreamSchedulesTakeTheirStripHeightFromTheImage) {
    std::string why;
    if (!has_gpu(why)) GTEST_SKIP() << "no CUDA device: " << why;
    const cv::Mat src = random_image(640, 480, 1, Depth::u8, 23);
    GraphExecutor by_default(parse_pipeline("blur:3 | sobel:x", DefaultSchedule{}), options(true, true));
    GraphExecutor plain(parse_pipeline("blur:3 | sobel:x", DefaultSchedule{}), options(false, true));
    const cv::Mat a = first_output(by_default, src);
    EXPECT_EQ(by_default.schedule_of(2).to_string(), "stream:256x12");  // 80 blocks: one wave on any GPU
    EXPECT_NE(by_default.describe().find("strip height for this image"), std::string::npos) << by_default.describe();
    EXPECT_EQ(by_default.schedule_of(1).to_string(), "stream:256x16");  // runs in the pair's kernel
    EXPECT_EQ(cv::norm(a, first_output(plain, src), cv::NORM_INF), 0.0);
    GraphExecutor given(parse_pipeline("blur:3 | sobel:x", parse_schedule("stream:256x16")), options(true, true));
    EXPECT_EQ(cv::norm(first_output(given, src), a, cv::NORM_INF), 0.0);
    EXPECT_NE(given.describe().find("through line buffers"), std::string::npos) << given.describe();
    EXPECT_EQ(given.schedule_of(2).to_string(), "stream:256x16");
    // One stencil and an unsharp mask on 320x240 of 3 channels: 30 blocks at H = 8, one wave on any GPU.
    const cv::Mat photo = random_image(320, 240, 3, Depth::u8, 31);
    GraphExecutor blur(parse_pipeline("blur:5", DefaultSchedule{}), options(true, true));
    const cv::Mat b = first_output(blur, photo);
    EXPECT_EQ(blur.schedule_of(1).to_string(), "stream:256x8");
    GraphExecutor blur_cpu(parse_pipeline("blur:5", DefaultSchedule{}), options(false));
    EXPECT_EQ(cv::norm(b, first_output(blur_cpu, photo), cv::NORM_INF), 0.0);
    Graph unsharp;
    unsharp.add_output(unsharp.add_blend("sharp", parse_blend("1.5:-0.5"), Graph::input(),
                                         unsharp.add_filter("blurred", parse_filter("gaussian:9"), Graph::input())));
    GraphExecutor sharp(unsharp, options(true, true)), sharp_cpu(unsharp, options(false));
    const cv::Mat s = first_output(sharp, photo);
    EXPECT_NE(sharp.describe().find("stream:256x8 (its stencils' kernel)"), std::string::npos) << sharp.describe();
    EXPECT_EQ(cv::norm(s, first_output(sharp_cpu, photo), cv::NORM_INF), 0.0);
}

TEST(Fusion, StencilPairsWithTheirOwnBordersFuseOnTheGpu) {
    std::string why;
    if (!has_gpu(why)) GTEST_SKIP() << "no CUDA device: " << why;
    Graph g;
    const NodeId blur = g.add_filter("blur", parse_filter("gaussian:9"), Graph::input(),
                                     {parse_schedule("sep:16x8"), parse_border("constant:77")});
    g.add_output(
        g.add_filter("edges", parse_filter("sobel:mag"), blur, {parse_schedule("smem:16x8"), parse_border("reflect")}));
    for (const Depth depth : {Depth::u8, Depth::f32}) {
        const cv::Mat src = random_image(45, 29, 3, depth, 5);
        GraphExecutor fused(g, options(true, true, true)), plain(g, options(false, true));
        const cv::Mat a = first_output(fused, src), b = first_output(plain, src);
        EXPECT_NE(fused.describe().find("edges"), std::string::npos);
        EXPECT_NE(fused.describe().find("computes blur in shared memory"), std::string::npos) << fused.describe();
        EXPECT_EQ(cv::norm(a, b, cv::NORM_INF), 0.0);
    }
}

TEST(Fusion, StencilPairsThatCannotFuseRunUnfused) {
    std::string why;
    if (!has_gpu(why)) GTEST_SKIP() << "no CUDA device: " << why;
    const auto describe = [](const Graph& g) {
        GraphExecutor ex(g, options(true, true, true));
        ex.plan(64, 48, 3, Depth::u8);
        return ex.describe();
    };
    // wrap would need the far side of the image.
    EXPECT_EQ(describe(parse_pipeline("blur:3@sep:32x8 | blur:5@sep:32x8", ScheduleSpec{}, parse_border("wrap")))
                  .find("shared memory"),
              std::string::npos);
    // The consumer's schedule does not stage tiles (stream fuses through line buffers instead).
    EXPECT_EQ(describe(parse_pipeline("blur:3@sep:32x8 | blur:5@stream:64x32")).find("shared memory"),
              std::string::npos);
    // Tile too large for shared memory.
    EXPECT_EQ(describe(parse_pipeline("blur:3@sep:32x8 | blur:31@sep:256x256")).find("shared memory"),
              std::string::npos);
    // The first stencil's output is also a graph output.
    Graph two;
    const NodeId a = two.add_filter("a", parse_filter("blur:3"), Graph::input(), {parse_schedule("sep:32x8"), {}});
    two.add_output(two.add_filter("b", parse_filter("blur:5"), a, {parse_schedule("sep:32x8"), {}}));
    two.add_output(a);
    EXPECT_EQ(describe(two).find("shared memory"), std::string::npos);
    // Chains of three fuse one pair (the first two); the third reads the stored result.
    const std::string three = describe(parse_pipeline("blur:3@sep:32x8 | blur:5@sep:32x8 | blur:7@sep:32x8"));
    EXPECT_NE(three.find("(1 stencil fused into the next)"), std::string::npos) << three;
    // Not asked for (the default): pairs stay two kernels; the colour node still fuses.
    GraphExecutor plain(parse_pipeline("color:gray | gaussian:5@sep:32x8 | sobel:mag@sep:32x8"), options(true, true));
    plain.plan(64, 48, 3, Depth::u8);
    EXPECT_EQ(plain.describe().find("shared memory"), std::string::npos) << plain.describe();
    EXPECT_NE(plain.describe().find("fused into"), std::string::npos) << plain.describe();
}

TEST(Fusion, OnlyColourNodesReadOnceByATileStagingStencilAreFused) {
    std::string why;
    if (!has_gpu(why)) GTEST_SKIP() << "no CUDA device: " << why;
    // Per-pixel schedule: recomputing the matrix for every tap would cost more than it saves.
    GraphExecutor per_pixel(parse_pipeline("color:gray | blur:5@tile:32x8"), options(true, true));
    per_pixel.plan(40, 30, 3, Depth::u8);
    EXPECT_EQ(per_pixel.describe().find("fused"), std::string::npos);
    // The colour image is an output too, or has two readers: it must be stored.
    Graph two_readers;
    const NodeId gray = two_readers.add_filter("gray", parse_filter("color:gray"), Graph::input());
    two_readers.add_output(two_readers.add_filter("a", parse_filter("blur:3"), gray, {parse_schedule("sep:32x8"), {}}));
    two_readers.add_output(two_readers.add_filter("b", parse_filter("blur:5"), gray, {parse_schedule("sep:32x8"), {}}));
    GraphExecutor ex(two_readers, options(true, true));
    ex.plan(40, 30, 3, Depth::u8);
    EXPECT_EQ(ex.describe().find("fused"), std::string::npos) << ex.describe();
    Graph output;
    const NodeId g2 = output.add_filter("gray", parse_filter("color:gray"), Graph::input());
    output.add_output(output.add_filter("a", parse_filter("blur:3"), g2, {parse_schedule("sep:32x8"), {}}));
    output.add_output(g2);
    GraphExecutor ex2(output, options(true, true));
    ex2.plan(40, 30, 3, Depth::u8);
    EXPECT_EQ(ex2.describe().find("fused"), std::string::npos) << ex2.describe();
}

// Blends with the stencils they read (cuda/blend.cu), by default: an
// unsharp mask (a stencil of an image and that image) or a difference of
// two stencils of one image in one kernel, bit-identical to the unfused
// graph and to the CPU backend. Both orders of the sides, boxes and
// Gaussians of 3x3 to 9x9, every border, strips narrower and shorter than
// the halos, weights that saturate both ways, binary fractions (the
// kernel's integer finish) and others (its float finish), 1 and 3
// channels, a stored gray image as the source.
struct BlendCase {
    const char* json;
    int input_channels;
    int fused;  // stencils computed in the blend's kernel
};
constexpr BlendCase kBlends[] = {
    {R"({"nodes": [{"name": "s", "filter": "gaussian:9:2", "input": "input"},
                   {"name": "out", "blend": "blend:1.6:-0.6:0", "inputs": ["input", "s"]}], "outputs": ["out"]})",
     3, 1},
    {R"({"border": "replicate", "nodes": [{"name": "s", "filter": "gaussian:5", "input": "input"},
                   {"name": "out", "blend": "blend:-0.5:1.5:3", "inputs": ["s", "input"]}], "outputs": ["out"]})",
     1, 1},
    {R"({"border": "constant:9", "nodes": [{"name": "fine", "filter": "gaussian:5:1", "input": "input"},
                   {"name": "coarse", "filter": "gaussian:9:2", "input": "input"},
                   {"name": "out", "blend": "blend:4:-4:128", "inputs": ["fine", "coarse"]}], "outputs": ["out"]})",
     3, 2},
    {R"({"border": "wrap", "schedule": "stream:16x3", "nodes": [{"name": "s", "filter": "blur:7", "input": "input"},
                   {"name": "out", "blend": "blend:2:-1", "inputs": ["input", "s"]}], "outputs": ["out"]})",
     1, 1},
    {R"({"border": "reflect", "nodes": [{"name": "a", "filter": "blur:3", "input": "input", "schedule": "stream:7x5"},
                   {"name": "b", "filter": "blur:9", "input": "input", "schedule": "stream:64x8"},
                   {"name": "out", "blend": "blend:1:-1:127.5", "inputs": ["b", "a"]}], "outputs": ["out"]})",
     3, 2},
    {R"({"schedule": "stream:1x1", "nodes": [{"name": "a", "filter": "gaussian:3", "input": "input"},
                   {"name": "b", "filter": "gaussian:7:3", "input": "input"},
                   {"name": "out", "blend": "blend:0.25:0.75", "inputs": ["a", "b"]}], "outputs": ["out"]})",
     1, 2},
    {R"({"border": "reflect101", "nodes": [{"name": "gray", "filter": "color:gray", "input": "input"},
                   {"name": "fine", "filter": "gaussian:5:1", "input": "gray"},
                   {"name": "coarse", "filter": "gaussian:9:2", "input": "gray"},
                   {"name": "out", "blend": "blend:4:-4:128", "inputs": ["fine", "coarse"]}], "outputs": ["out"]})",
     3, 2},
    {R"({"nodes": [{"name": "s", "filter": "gaussian:9", "input": "input"},
                   {"name": "out", "blend": "blend:1.5:-0.5", "inputs": ["input", "s"]}], "outputs": ["out"]})",
     3, 1},
    {R"({"border": "reflect", "nodes": [{"name": "s", "filter": "gaussian:7", "input": "input"},
                   {"name": "out", "blend": "blend:3:-2:-1.5", "inputs": ["input", "s"]}], "outputs": ["out"]})",
     3, 1},
    {R"({"border": "constant:200", "nodes": [{"name": "s", "filter": "gaussian:3", "input": "input"},
                   {"name": "out", "blend": "blend:-1.5:2.5:0.25", "inputs": ["s", "input"]}], "outputs": ["out"]})",
     3, 1},
    // Two Gaussians, the larger first (the kernel skips the smaller's zero weights), float finish.
    {R"({"border": "replicate", "nodes": [{"name": "coarse", "filter": "gaussian:9", "input": "input"},
                   {"name": "fine", "filter": "gaussian:3", "input": "input"},
                   {"name": "out", "blend": "blend:1.7:-0.7:5", "inputs": ["coarse", "fine"]}], "outputs": ["out"]})",
     1, 2},
    {R"({"border": "reflect", "nodes": [{"name": "a", "filter": "gaussian:7:2", "input": "input"},
                   {"name": "b", "filter": "gaussian:7", "input": "input"},
                   {"name": "out", "blend": "blend:-2:3:64", "inputs": ["a", "b"]}], "outputs": ["out"]})",
     3, 2},
};

TEST(Fusion, BlendsFuseWithTheirStencilsOnTheGpu) {
    std::string why;
    if (!has_gpu(why)) GTEST_SKIP() << "no CUDA device: " << why;
    const int sizes[][2] = {{131, 77}, {7, 3}, {1, 1}, {2, 9}, {300, 41}, {509, 12}};
    for (const BlendCase& c : kBlends)
        for (const auto& size : sizes) {
            SCOPED_TRACE(std::string(c.json) + " " + std::to_string(size[0]) + "x" + std::to_string(size[1]));
            const Graph g = graph_from_json(c.json);
            const cv::Mat src = random_image(size[0], size[1], c.input_channels, Depth::u8, 17);
            GraphExecutor fused(g, options(true, true)), plain(g, options(false, true)), cpu(g, options(false));
            const cv::Mat a = first_output(fused, src);
            EXPECT_EQ(last_kernel_path(), KernelPath::cuda_blend_stream8);
            const cv::Mat b = first_output(plain, src);
            const std::string count =
                "(" + std::to_string(c.fused) + " stencil" + (c.fused > 1 ? "s" : "") + " fused into a blend)";
            EXPECT_NE(fused.describe().find(count), std::string::npos) << fused.describe();
            EXPECT_NE(fused.describe().find("in one kernel through line buffers"), std::string::npos)
                << fused.describe();
            EXPECT_NE(fused.describe().find("@stream:"), std::string::npos)
                << fused.describe();  // the kernel's schedule
            EXPECT_NE(fused.describe().find("(its stencils' kernel)"), std::string::npos) << fused.describe();
            ASSERT_EQ(a.type(), b.type());
            EXPECT_EQ(cv::norm(a, b, cv::NORM_INF), 0.0);
            EXPECT_EQ(cv::norm(a, first_output(cpu, src), cv::NORM_INF), 0.0);
        }
}

// A blend of one stencil and its source on sep:WxH (any kind, depth and
// channel count): the stencil's sep kernel blends each output with the
// staged source sample as it stores it, then applies a per-sample node.
TEST(Fusion, BlendsOfAStencilAndItsSourceFuseIntoTheSepKernelOnTheGpu) {
    std::string why;
    if (!has_gpu(why)) GTEST_SKIP() << "no CUDA device: " << why;
    int fused = 0;
    for_each_kind([&]<class F>(std::type_identity<F>) {
        using Kind = FilterKind<F>;
        if (Kind::category != Category::stencil) return;
        for (const std::string_view example : {Kind::examples[0], std::end(Kind::examples)[-1]}) {
            const Filter filter = parse_filter(std::string(Kind::name) + ":" + std::string(example));
            for (const char* schedule : {"sep:16x8", "sep:64x32"})
                for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32})
                    for (const int channels : {1, 3, 4}) {
                        if (!refuses_input(filter, depth, channels).empty()) continue;
                        for (const auto& size : {std::array{37, 23}, std::array{1, 1}, std::array{131, 70}}) {
                            const cv::Mat src = random_image(size[0], size[1], channels, depth, 9);
                            for (const bool stencil_first : {false, true})
                                for (const bool threshold : {false, true}) {
                                    SCOPED_TRACE(to_string(filter) + "@" + schedule + " " + depth_name(depth) + "x" +
                                                 std::to_string(channels) + " " + std::to_string(size[0]) + "x" +
                                                 std::to_string(size[1]) + (stencil_first ? " stencil first" : "") +
                                                 (threshold ? " | threshold" : ""));
                                    const Graph g =
                                        stencil_blend_graph(filter, schedule, depth, stencil_first, threshold);
                                    GraphExecutor one(g, options(true, true)), two(g, options(false, true)),
                                        cpu(g, options(false));
                                    const cv::Mat a = first_output(one, src);
                                    EXPECT_EQ(last_kernel_path(), KernelPath::cuda_sep);
                                    EXPECT_TRUE(same_bytes(a, first_output(two, src)));
                                    if (depth != Depth::f32) {
                                        EXPECT_TRUE(same_bytes(a, first_output(cpu, src)));
                                    }
                                    const std::string d = one.describe();
                                    EXPECT_NE(d.find("(1 stencil fused into a blend)"), std::string::npos) << d;
                                    EXPECT_NE(d.find("blends each tile it stores"), std::string::npos) << d;
                                    if (threshold) {
                                        EXPECT_NE(d.find("(1 per-sample node applied by the kernel before)"),
                                                  std::string::npos)
                                            << d;
                                    }
                                    ++fused;
                                }
                        }
                    }
        }
    });
    EXPECT_GT(fused, 500);
}

// The adaptive threshold's mean, difference and threshold are one kernel on
// the GPU (a Gaussian or a large box on sep:WxH, a box up to 9 on the 8-bit
// stream kernel), equal to OpenCV.
TEST(Fusion, AnAdaptiveThresholdIsOneKernelOnTheGpu) {
    std::string why;
    if (!has_gpu(why)) GTEST_SKIP() << "no CUDA device: " << why;
    for (const char* text :
         {"adaptive:255:gaussian:11:2", "adaptive:200:gaussian:31:-3:binary_inv", "adaptive:255:gaussian:5:0.5",
          "adaptive:255:mean:15:4", "adaptive:255:mean:7:-1:binary_inv"})
        for (const auto& size : {std::array{301, 197}, std::array{5, 3}}) {
            SCOPED_TRACE(std::string(text) + " " + std::to_string(size[0]) + "x" + std::to_string(size[1]));
            const cv::Mat src = random_image(size[0], size[1], 1, Depth::u8, 21);
            const Graph g = parse_pipeline(text);
            GraphExecutor gpu(g, options(true, true)), cpu(g, options(true));
            const cv::Mat a = first_output(gpu, src);
            const std::string d = gpu.describe();
            EXPECT_NE(d.find("1 kernel runs"), std::string::npos) << d;
            EXPECT_TRUE(same_bytes(a, first_output(cpu, src)));
            const AdaptiveFilter f = std::get<AdaptiveFilter>(parse_filter(text));
            cv::Mat want;
            cv::adaptiveThreshold(src, want, f.maxval,
                                  f.gaussian ? cv::ADAPTIVE_THRESH_GAUSSIAN_C : cv::ADAPTIVE_THRESH_MEAN_C,
                                  f.inverse ? cv::THRESH_BINARY_INV : cv::THRESH_BINARY, f.block, f.c);
            EXPECT_TRUE(same_bytes(a, want));
        }
}

// On the GPU a colour node of one output channel (gray) read only by
// median:5 is converted as the median's word kernel stages its window: equal
// to the two nodes and to the CPU, every depth, border and size; other K,
// colour outputs of 3 or 4 channels and erosion keep the colour node. A
// destination off whole words runs the two nodes in scratch.
TEST(Fusion, AColourNodeBeforeAMedianIsConvertedAsItStagesOnTheGpu) {
    std::string why;
    if (!has_gpu(why)) GTEST_SKIP() << "no CUDA device: " << why;
    int fused = 0;
    for (const char* colour : {"gray", "ycrcb", "0.2,0.3,0.5,1,0.5,0.25,0.125,-3,0,0,1,0"})
        for (const char* median : {"median:3", "median:5", "median:7", "erode:3"})
            for (const char* border : {"", "reflect", "wrap", "constant:7"})
                for (const Depth depth : {Depth::u8, Depth::u16, Depth::f32})
                    for (const int channels : {3, 4})
                        for (const auto& size :
                             {std::array{41, 19}, std::array{1, 1}, std::array{3, 2}, std::array{133, 37}}) {
                            const std::string text = std::string("color:") + colour + " | " + median +
                                                     (*border ? std::string("@naive") : "") +
                                                     (depth == Depth::u8 ? " | threshold:100" : "");
                            SCOPED_TRACE(text + " border " + border + " " + depth_name(depth) + "x" +
                                         std::to_string(channels) + " " + std::to_string(size[0]) + "x" +
                                         std::to_string(size[1]));
                            Graph g = parse_pipeline(text);
                            if (*border) g.set_default_border(parse_border(border));
                            const cv::Mat src = random_image(size[0], size[1], channels, depth, 13);
                            GraphExecutor one(g, options(true, true)), two(g, options(false, true)),
                                cpu(g, options(false));
                            const cv::Mat a = first_output(one, src);
                            EXPECT_TRUE(same_bytes(a, first_output(two, src)));
                            EXPECT_TRUE(same_bytes(a, first_output(cpu, src)));
                            const bool through = one.describe().find("through color:") != std::string::npos;
                            const bool gray = std::string(colour) == "gray";
                            const bool takes = std::string(median) == "median:5" && gray;
                            EXPECT_EQ(through, takes) << one.describe();
                            fused += through;
                        }
    EXPECT_EQ(fused, 4 * 3 * 4 * 2);

    // A destination whose rows do not start on whole words.
    const Stream stream;
    for (const Depth depth : {Depth::u8, Depth::u16}) {
        const cv::Mat src = random_image(57, 21, 3, depth, 5);
        const FilterRun node{parse_filter("median:5"), parse_border("replicate"), parse_schedule("naive"),
                             std::get<ColorFilter>(parse_filter("color:gray"))};
        DeviceImage in(src.cols, src.rows, 3, depth), out(src.cols + 1, src.rows, 1, depth);
        upload(view_of(src), in.view, stream.get());
        ImageView shifted = out.view;
        shifted.data += depth_bytes(depth);
        shifted.width = src.cols;
        run_node_cuda(node, in.view, shifted, stream.get(), 256);
        cv::Mat got(src.rows, src.cols, depth == Depth::u8 ? CV_8UC1 : CV_16UC1);
        download(shifted, view_of(got), stream.get());
        stream.synchronize("median through colour, off whole words");
        GraphExecutor cpu(parse_pipeline("color:gray | median:5"), options(false));
        EXPECT_TRUE(same_bytes(got, first_output(cpu, src))) << depth_name(depth);
    }
}

TEST(Fusion, BlendsOutsideTheKernelRunUnfusedOnTheGpu) {
    std::string why;
    if (!has_gpu(why)) GTEST_SKIP() << "no CUDA device: " << why;
    // blend(A(input), B(input)) with the given filters, borders and options.
    const auto describe = [](const char* a, const char* b, Depth depth, int channels,
                             const char* border_b = "reflect101", RunOptions o = options(true, true)) {
        Graph g;
        const NodeId na = g.add_filter("a", parse_filter(a), Graph::input());
        const NodeId nb = g.add_filter("b", parse_filter(b), Graph::input(), {std::nullopt, parse_border(border_b)});
        g.add_output(g.add_blend("out", parse_blend("1:-1:128"), na, nb));
        GraphExecutor ex(g, o);
        ex.plan(64, 48, channels, depth);
        return ex.describe();
    };
    EXPECT_NE(describe("gaussian:5", "gaussian:9", Depth::u8, 3).find("fused into a blend"), std::string::npos);
    EXPECT_EQ(describe("gaussian:5", "gaussian:9", Depth::f32, 3).find("fused"), std::string::npos);  // float
    EXPECT_EQ(describe("gaussian:5", "gaussian:9", Depth::u8, 4).find("fused"), std::string::npos);   // 4 channels
    EXPECT_EQ(describe("gaussian:5", "gaussian:9", Depth::u8, 3, "replicate").find("fused"),
              std::string::npos);                                                                // two borders
    EXPECT_EQ(describe("gaussian:5", "blur:9", Depth::u8, 3).find("fused"), std::string::npos);  // a Gaussian and a box
    EXPECT_EQ(describe("sobel:x", "gaussian:3", Depth::u8, 1).find("fused"), std::string::npos);  // a derivative
    EXPECT_EQ(describe("gaussian:5", "gaussian:11", Depth::u8, 1).find("fused"),
              std::string::npos);  // 11x11: not on stream
    // A Gaussian of sigma 0.1 weighs its centre 256: not one byte, as the kernel's row pass takes its weights.
    EXPECT_EQ(describe("gaussian:3:0.1", "gaussian:9", Depth::u8, 1).find("fused"), std::string::npos);
    EXPECT_EQ(describe("gaussian:5", "gaussian:9", Depth::u8, 3, "reflect101", options(false, true)).find("fused"),
              std::string::npos);  // --no-fuse
    // A side that something else reads too, or that is an output, is stored: the blend reads it.
    Graph shared;
    const NodeId s = shared.add_filter("s", parse_filter("gaussian:5"), Graph::input());
    shared.add_output(shared.add_blend("out", parse_blend("2:-1"), Graph::input(), s));
    shared.add_output(s);
    GraphExecutor ex(shared, options(true, true));
    ex.plan(64, 48, 3, Depth::u8);
    EXPECT_EQ(ex.describe().find("fused"), std::string::npos) << ex.describe();
    // A stencil of another image than the blend's other side.
    Graph other;
    const NodeId gray = other.add_filter("gray", parse_filter("color:gray"), Graph::input());
    const NodeId blur = other.add_filter("blur", parse_filter("gaussian:5"), gray);
    other.add_output(other.add_blend("out", parse_blend("2:-1"), gray, blur));
    other.add_output(other.add_blend("odd", parse_blend("2:-1"),
                                     other.add_filter("g2", parse_filter("color:gray"), Graph::input()),
                                     other.add_filter("b2", parse_filter("gaussian:3"), gray)));
    GraphExecutor ex2(other, options(true, true));
    ex2.plan(64, 48, 3, Depth::u8);
    EXPECT_NE(ex2.describe().find("(1 stencil fused into a blend)"), std::string::npos) << ex2.describe();
}

TEST(Fusion, FusedEqualsUnfusedOnTheGpu) {
    std::string why;
    if (cuda_device_count(why) == 0) GTEST_SKIP() << "no CUDA device: " << why;
    for (const bool pairs : {false, true})  // colour nodes only (the default), and with stencil pairs
        for_each_case(131, 77, [pairs](const Graph& g, const cv::Mat& src) {
            GraphExecutor fused(g, options(true, true, pairs)), plain(g, options(false, true)), cpu(g, options(false));
            const cv::Mat a = first_output(fused, src), b = first_output(plain, src);
            EXPECT_NE(fused.describe().find("fused into n2"), std::string::npos) << fused.describe();
            EXPECT_EQ(cv::norm(a, b, cv::NORM_INF), 0.0);
            if (src.depth() != CV_32F) {
                EXPECT_EQ(cv::norm(a, first_output(cpu, src), cv::NORM_INF), 0.0);
            }
        });
}
#endif

}  // namespace
}  // namespace cbi
