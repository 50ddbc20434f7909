#include "pipeline/defaults.hpp"

#include <algorithm>
#include <exception>

namespace cbi {
namespace {

// The blend's rows; the kinds bring theirs (FilterKind<F>::defaults).
// First match wins: specific rows before general ones; within a row the
// schedules are fastest first. GPU rows: the fastest fixed schedule per
// cell of a cbi-bench run, or one close to it at both sizes measured;
// unmeasured formats (16-bit, 4 channels) take the row of the nearest
// measured one. CPU rows: sep:WxH's tiles run the vectorised separable
// passes (cpu/separable.hpp); pointwise rows are vectorised under the
// row-major order. The runs: docs/performance.md#default-table.
constexpr DefaultRow kBlendRows[] = {
    // Runs of N pixels as whole words.
    {"blend", true, 0, static_cast<int>(Depth::u8), 0, "vec:8 vec:4 vec:16"},
    {"blend", true, 0, kAnyDepth, 0, "vec:4 vec:2 vec:8"},
    {"blend", false, 0, kAnyDepth, 0, "naive"},
};

const std::vector<DefaultRow>& table() {
    static const std::vector<DefaultRow> rows = [] {
        std::vector<DefaultRow> out;
        for_each_kind([&]<class F>(std::type_identity<F>) {
            for (const KindDefault& r : FilterKind<F>::defaults)
                out.push_back({FilterKind<F>::name, r.cuda, r.max_ksize, r.depth, r.channels, r.schedules});
        });
        out.insert(out.end(), std::begin(kBlendRows), std::end(kBlendRows));
        return out;
    }();
    return rows;
}

// Stencils whose weights are all 1 (FilterKind<F>::unit_weights): their
// sums slide, so their cost barely grows with the window.
bool slides_sums(const Filter& f) {
    return visit_kind(f, [](auto kind, const auto&) {
        if constexpr (requires { decltype(kind)::unit_weights; })
            return decltype(kind)::unit_weights;
        else
            return false;
    });
}

// Which stencil pairs a kind fuses into by default (FilterKind<F>::pair_fusion).
PairFusion pair_fusion_of(const Filter& f) {
    return visit_kind(f, [](auto kind, const auto& params) {
        if constexpr (decltype(kind)::category == Category::stencil)
            return decltype(kind)::pair_fusion(params);
        else
            return PairFusion{};
    });
}

// The side of the window a node reads (1 for pointwise nodes and blends).
int ksize_of(const NodeOp& op) {
    const auto* f = std::get_if<Filter>(&op);
    if (!f) return 1;
    const Footprint fp = footprint_of(*f);
    return std::max(fp.width, fp.height);
}

bool matches(const DefaultRow& row, const NodeOp& op, const NodeFormat& format) {
    return row.cuda == format.cuda && row.kind == op_kind(op) &&
           (row.max_ksize == 0 || ksize_of(op) <= row.max_ksize) &&
           (row.depth == kAnyDepth || row.depth == static_cast<int>(format.depth)) &&
           (row.channels == 0 || row.channels == format.channels);
}

bool runs(const ScheduleSpec& s, const NodeOp& op, const Border& border) {
    if (const auto* f = std::get_if<Filter>(&op)) return supports(s, *f, border);
    return supports(s, std::get<BlendFilter>(op));
}

// Calls f(schedule) for each schedule of each matching row, in order, until f returns true.
template <class F>
void for_each_listed(const NodeOp& op, const NodeFormat& format, F&& f) {
    for (const DefaultRow& row : table()) {
        if (!matches(row, op, format)) continue;
        std::string_view rest = row.schedules;
        while (!rest.empty()) {
            const auto space = rest.find(' ');
            if (f(parse_schedule(rest.substr(0, space)))) return;
            rest = space == std::string_view::npos ? std::string_view{} : rest.substr(space + 1);
        }
    }
}

// Nanoseconds one core spends per sample of a node on the CPU rows above, for
// 8-bit images: a base, plus a part growing with the kernel size (the box
// slides its sums, so barely). Other depths take kWideDepth times as long.
// Fitted, rounding up, to `cbi-filter --device cpu --stats` runs
// (docs/performance.md#cpu-sample-costs).
// Window kinds (a median, a morphology pass) read every sample of their
// window: kWindowPerTapNs per sample read, an estimate, not fitted.
constexpr double kStencilNs = 1.5, kPerTapNs = 0.05, kBoxPerTapNs = 0.01, kPointwiseNs = 0.5, kWideDepth = 2.5;
constexpr double kWindowPerTapNs = 0.3;

double sample_ns(const NodeOp& op, Depth depth) {
    const auto* f = std::get_if<Filter>(&op);
    const double k = ksize_of(op);
    if (f && category_of(*f) == Category::window) {
        const Footprint fp = footprint_of(*f);
        const double ns = kStencilNs + kWindowPerTapNs * fp.width * fp.height;
        return depth == Depth::u8 ? ns : ns * kWideDepth;
    }
    const double ns = !f || !is_stencil(*f) ? kPointwiseNs
                      : slides_sums(*f)     ? kStencilNs + kBoxPerTapNs * k
                                            : kStencilNs + kPerTapNs * k;
    return depth == Depth::u8 ? ns : ns * kWideDepth;
}

std::vector<int> channels_of_nodes(const Graph& graph, int channels) {
    try {
        return node_channels(graph, channels);
    } catch (const std::exception&) {
        // channels is an upper bound the graph may not take: every node keeps it
        return std::vector<int>(graph.nodes().size(), channels);
    }
}

// cpu_run_seconds for nodes of `node_ch` channels.
double cpu_seconds(const Graph& graph, const std::vector<int>& node_ch, double pixels, Depth depth, int threads) {
    double ns = 0;
    for (NodeId id = 1; id < static_cast<NodeId>(graph.nodes().size()); ++id) {
        if (std::holds_alternative<ScheduleSpec>(graph.schedule_of(id))) return -1;
        const GraphNode& node = graph.nodes()[id];
        ns += pixels * std::max(node_ch[node.inputs[0]], node_ch[id]) * sample_ns(node.op, depth);
    }
    return ns * 1e-9 / std::max(threads, 1);
}

}  // namespace

double cpu_run_seconds(const Graph& graph, std::uint64_t width, std::uint64_t height, int channels, Depth depth,
                       int threads) {
    return cpu_seconds(graph, channels_of_nodes(graph, channels),
                       static_cast<double>(width) * static_cast<double>(height), depth, threads);
}

bool one_image_runs_on_cpu(const Graph& graph, std::uint64_t width, std::uint64_t height, int channels, Depth depth,
                           int threads) {
    const std::vector<int> node_ch = channels_of_nodes(graph, channels);
    const double pixels = static_cast<double>(width) * static_cast<double>(height);
    const double cpu = cpu_seconds(graph, node_ch, pixels, depth, threads);
    if (cpu < 0) return false;
    double samples = channels;
    for (const NodeId out : graph.outputs()) samples += node_ch[out];
    return cpu <= kCudaStartSeconds + kCudaSecondsPerByte * pixels * samples * static_cast<double>(depth_bytes(depth));
}

bool batch_runs_on_cpu(const Graph& graph, std::uint64_t width, std::uint64_t height, int channels, Depth depth,
                       int threads, std::uint64_t images) {
    const double cpu = cpu_run_seconds(graph, width, height, channels, depth, threads);
    return cpu >= 0 && cpu * static_cast<double>(images) <= kCudaStartSeconds;
}

std::string_view op_kind(const NodeOp& op) {
    const auto* f = std::get_if<Filter>(&op);
    if (!f) return "blend";
    return visit_kind(*f, [](auto kind, const auto&) { return decltype(kind)::name; });
}

std::span<const DefaultRow> default_table() {
    return table();
}

ScheduleSpec default_schedule(const NodeOp& op, const Border& border, const NodeFormat& format) {
    ScheduleSpec chosen{};
    for_each_listed(op, format, [&](const ScheduleSpec& s) {
        if (!runs(s, op, border)) return false;
        chosen = s;
        return true;
    });
    return chosen;
}

std::vector<ScheduleSpec> default_candidates(const NodeOp& op, const Border& border, const NodeFormat& format) {
    std::vector<ScheduleSpec> out;
    for_each_listed(op, format, [&](const ScheduleSpec& s) {
        if (runs(s, op, border) && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
        return false;
    });
    if (out.empty()) out.push_back(ScheduleSpec{});
    return out;
}

bool fuses_pair_by_default(const FilterRun& pair, const NodeFormat& format) {
    if (!pair.fused_stencil || !format.cuda) return false;
    if (format.depth != Depth::u8 || pair.schedule.family != ScheduleFamily::stream) return false;
    if (pair.fused_color) return format.channels == 3;
    const PairFusion first = pair_fusion_of(pair.fused_stencil->filter), second = pair_fusion_of(pair.filter);
    return second.always_second || (first.first && second.second);
}

}  // namespace cbi
