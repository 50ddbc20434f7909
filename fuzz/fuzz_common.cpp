#include "fuzz/fuzz_common.hpp"

#include <array>
#include <cstring>
#include <stdexcept>

#include "pipeline/error.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/image.hpp"

namespace cbi_fuzz {
namespace {

std::uint64_t fnv1a(std::string_view s) {
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

bool has_auto(const cbi::Graph& g) {
    for (std::size_t i = 1; i < g.nodes().size(); ++i)
        if (std::holds_alternative<cbi::AutoSchedule>(g.schedule_of(static_cast<cbi::NodeId>(i)))) return true;
    return false;
}

// The same graph with every node on the naive schedule. Node ids are kept:
// a graph stores its nodes with every input before its readers.
cbi::Graph naive_copy(const cbi::Graph& g) {
    cbi::Graph n;
    n.set_default_schedule(cbi::ScheduleSpec{});
    n.set_default_border(g.default_border());
    for (std::size_t i = 1; i < g.nodes().size(); ++i) {
        const auto& node = g.nodes()[i];
        const cbi::NodeOptions o{cbi::ScheduleChoice{cbi::ScheduleSpec{}}, node.options.border};
        if (const auto* f = std::get_if<cbi::Filter>(&node.op))
            n.add_filter(node.name, *f, node.inputs[0], o);
        else
            n.add_blend(node.name, std::get<cbi::BlendFilter>(node.op), node.inputs[0], node.inputs[1], o);
    }
    for (cbi::NodeId out : g.outputs()) n.add_output(out);
    return n;
}

void fill(const cbi::ImageView& v, std::uint64_t seed) {
    std::uint64_t s = seed | 1;
    for (int y = 0; y < v.height; ++y) {
        auto* row = v.row<std::uint8_t>(y);
        for (std::size_t i = 0; i < v.row_bytes(); i += cbi::depth_bytes(v.depth)) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;  // xorshift64
            if (v.depth == cbi::Depth::f32) {
                const float f = static_cast<float>(static_cast<std::int64_t>(s % 200001) - 100000) / 100.0f;
                std::memcpy(row + i, &f, sizeof f);
            } else {
                std::memcpy(row + i, &s, cbi::depth_bytes(v.depth));
            }
        }
    }
}

bool equal_pixels(const cbi::ImageView& a, const cbi::ImageView& b) {
    if (a.width != b.width || a.height != b.height || a.channels != b.channels || a.depth != b.depth) return false;
    for (int y = 0; y < a.height; ++y)
        if (std::memcmp(a.row<std::uint8_t>(y), b.row<std::uint8_t>(y), a.row_bytes()) != 0) return false;
    return true;
}

}  // namespace

void check_graph_round_trip(const cbi::Graph& g) {
    const std::string json = cbi::graph_to_json(g);
    const cbi::Graph back = reparse(json, [](const std::string& t) { return cbi::graph_from_json(t); });
    FUZZ_CHECK(same(g, back), "graph_from_json(graph_to_json(g)) differs by value from g:\n" + json);
    FUZZ_CHECK(g == back, "Graph::operator== says the JSON round trip differs:\n" + json);
    FUZZ_CHECK(cbi::graph_to_json(back) == json, "graph_to_json is not stable over a round trip:\n" + json);
    for (int channels : {1, 3, 4}) {
        try {
            FUZZ_CHECK(cbi::node_channels(g, channels) == cbi::node_channels(back, channels),
                       "node_channels differs after the JSON round trip");
        } catch (const cbi::Error&) {}
    }
}

void check_parsed_graph(const cbi::Graph& g) {
    check_graph_round_trip(g);
    try {
        run_on_tiny_images(g);
    } catch (const cbi::Error&) {
    } catch (const std::invalid_argument&) {}
}

// Window kinds read their whole window per pixel (a 255x255 median, an
// ellipse iterated 255 times): graphs whose windows exceed 64x64 samples are
// parsed and printed, not run, so that one input stays far inside the
// fuzzer's time limit.
static bool too_costly(const cbi::Graph& g) {
    for (const auto& n : g.nodes())
        if (const auto* f = std::get_if<cbi::Filter>(&n.op); f && cbi::category_of(*f) == cbi::Category::window) {
            const cbi::Footprint fp = cbi::footprint_of(*f);
            if (static_cast<double>(fp.width) * fp.height > 64.0 * 64.0) return true;
        }
    return false;
}

void run_on_tiny_images(const cbi::Graph& g) {
    if (has_auto(g) || too_costly(g)) return;
    // One size and depth per graph, chosen by its JSON text, so the corpus
    // covers them all and a given input always runs the same way.
    static constexpr std::array<std::array<int, 2>, 5> sizes{{{1, 1}, {2, 3}, {9, 5}, {33, 2}, {1, 17}}};
    const std::uint64_t h = fnv1a(cbi::graph_to_json(g));
    const auto [w, hgt] = sizes[h % sizes.size()];
    const auto depth = static_cast<cbi::Depth>((h / sizes.size()) % 3);
    const cbi::Graph naive = naive_copy(g);
    for (int channels : {1, 3, 4}) {
        cbi::Image input(w, hgt, channels, depth);
        fill(input.view(), h + static_cast<std::uint64_t>(channels));
        cbi::GraphExecutor ex(g, cbi::RunOptions{});
        try {
            ex.prepare(w, hgt, channels, depth);
        } catch (const cbi::Error&) {
            continue;  // a node cannot take this channel count
        }
        const auto outputs = ex.run(input.view());
        FUZZ_CHECK(outputs.size() == g.outputs().size(), "one result per graph output");
        if (depth == cbi::Depth::f32) continue;  // float box sums may slide (within 1e-5)
        cbi::GraphExecutor ref(naive, cbi::RunOptions{});
        const auto expected = ref.run(input.view());
        for (std::size_t i = 0; i < outputs.size(); ++i)
            FUZZ_CHECK(equal_pixels(outputs[i], expected[i]),
                       "output " + std::to_string(i) + " differs from the naive schedule on " +
                           cbi::describe(input.view()) + ":\n" + cbi::graph_to_json(g));
        // Everything the CPU fuses (--fuse-stencils: colour nodes and stencil pairs through line buffers).
        cbi::RunOptions all;
        all.stencil_pairs = cbi::RunOptions::StencilPairs::all;
        cbi::GraphExecutor fused(g, all);
        const auto fused_outputs = fused.run(input.view());
        for (std::size_t i = 0; i < outputs.size(); ++i)
            FUZZ_CHECK(equal_pixels(fused_outputs[i], expected[i]),
                       "output " + std::to_string(i) + " fused differs from the naive schedule on " +
                           cbi::describe(input.view()) + ":\n" + cbi::graph_to_json(g));
    }
}

}  // namespace cbi_fuzz
