#include "pipeline/defaults.hpp"

#include <algorithm>
#include <exception>

namespace cbi {
namespace {

constexpr int kAny = -1;
constexpr int u8 = static_cast<int>(Depth::u8), f32 = static_cast<int>(Depth::f32);
constexpr bool gpu = true, cpu = false;

// First match wins: specific rows before general ones. Within a row the
// schedules are fastest first.
//
// GPU rows: the fastest fixed schedule per cell of a cbi-bench run, or one
// close to it at both sizes measured; unmeasured formats (16-bit,
// 4 channels) take the row of the nearest measured one. The table does not
// steer stencils toward fusion (a colour node computed in a stencil's tiles
// was slower than the vectorised node plus the streaming stencil); nodes
// whose schedule can fuse still do. CPU rows: sep:WxH's tiles run the
// vectorised separable passes (cpu_separable.hpp); colour and blend rows are
// vectorised under the row-major order. The runs: docs/performance.md#default-table.
constexpr DefaultRow kTable[] = {
    // 8-bit stencils up to 9x9: the 8-bit streaming kernel (cuda_stream8.cuh).
    {gpu, OpKind::box, 9, u8, 0, "stream:256x16 stream:128x16 stream:256x32"},
    {gpu, OpKind::gaussian, 9, u8, 0, "stream:256x16 stream:256x32 stream:128x16"},
    {gpu, OpKind::sobel, 9, u8, 0, "stream:256x16 stream:128x16 stream:256x32"},
    // Float, one channel.
    {gpu, OpKind::box, 9, kAny, 1, "sep:128x32 sep:64x32 stream:128x16"},
    {gpu, OpKind::gaussian, 9, kAny, 1, "sep:128x32 sep:64x32 stream:256x32"},
    {gpu, OpKind::sobel, 9, kAny, 0, "stream:256x16 stream:512x8 stream:128x16"},
    // Laplacian: not measured; sobel:mag's rows for other depths (the same
    // two passes, and the 8-bit streaming kernel does not take it).
    {gpu, OpKind::laplacian, 9, kAny, 0, "stream:256x16 stream:512x8 stream:128x16"},
    // Float, 3 or 4 channels.
    {gpu, OpKind::box, 9, kAny, 0, "sep:32x32 sep:64x32 sep:128x32"},
    {gpu, OpKind::gaussian, 9, kAny, 0, "sep:64x32 sep:32x32 sep:128x32"},
    // Larger stencils (and Sobel, Laplacian KSIZE 1): the staged tiles, whose box sums do not grow with K.
    {gpu, OpKind::box, 0, kAny, 1, "sep:64x32 sep:128x32 sep:32x32"},
    {gpu, OpKind::box, 0, kAny, 0, "sep:32x32 sep:64x32 sep:128x32"},
    {gpu, OpKind::gaussian, 0, kAny, 1, "sep:64x32 sep:128x32 sep:32x32"},
    {gpu, OpKind::gaussian, 0, kAny, 0, "sep:32x32 sep:64x32 sep:128x32"},
    {gpu, OpKind::sobel, 0, kAny, 0, "sep:64x32 sep:32x32 sep:128x32"},
    {gpu, OpKind::laplacian, 0, kAny, 0, "sep:64x32 sep:32x32 sep:128x32"},
    // Pointwise: runs of N pixels as whole words.
    {gpu, OpKind::color, 0, u8, 0, "vec:8 vec:4 vec:16"},
    {gpu, OpKind::color, 0, kAny, 0, "vec:4 vec:2 vec:8"},
    {gpu, OpKind::blend, 0, u8, 0, "vec:8 vec:4 vec:16"},
    {gpu, OpKind::blend, 0, kAny, 0, "vec:4 vec:2 vec:8"},

    {cpu, OpKind::box, 0, kAny, 0, "sep:256x256 sep:128x128 sep:512x512"},
    {cpu, OpKind::gaussian, 0, kAny, 0, "sep:256x256 sep:128x128 sep:512x512"},
    {cpu, OpKind::sobel, 0, kAny, 0, "sep:256x256 sep:128x128 sep:512x512"},
    {cpu, OpKind::laplacian, 0, kAny, 0, "sep:256x256 sep:128x128 sep:512x512"},  // not measured: sobel's row
    {cpu, OpKind::color, 0, kAny, 0, "naive"},
    {cpu, OpKind::blend, 0, kAny, 0, "naive"},
};

int ksize_of(const NodeOp& op) {
    const auto* f = std::get_if<Filter>(&op);
    if (!f) return 0;
    if (const auto* b = std::get_if<BoxFilter>(f)) return b->ksize;
    if (const auto* g = std::get_if<GaussianFilter>(f)) return g->ksize;
    if (const auto* s = std::get_if<SobelFilter>(f)) return s->ksize;
    if (const auto* l = std::get_if<LaplacianFilter>(f)) return l->ksize;
    return 0;
}

bool matches(const DefaultRow& row, const NodeOp& op, const NodeFormat& format) {
    return row.cuda == format.cuda && row.kind == op_kind(op) && (row.max_ksize == 0 || ksize_of(op) <= row.max_ksize) &&
           (row.depth == kAny || row.depth == static_cast<int>(format.depth)) &&
           (row.channels == 0 || row.channels == format.channels);
}

bool runs(const ScheduleSpec& s, const NodeOp& op, const Border& border) {
    if (const auto* f = std::get_if<Filter>(&op)) return supports(s, *f, border);
    return supports(s, std::get<BlendFilter>(op));
}

// Calls f(schedule) for each schedule of each matching row, in order, until f returns true.
template <class F>
void for_each_listed(const NodeOp& op, const NodeFormat& format, F&& f) {
    for (const DefaultRow& row : kTable) {
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
constexpr double kStencilNs = 1.5, kPerTapNs = 0.05, kBoxPerTapNs = 0.01, kPointwiseNs = 0.5, kWideDepth = 2.5;

double sample_ns(const NodeOp& op, Depth depth) {
    const OpKind kind = op_kind(op);
    const double k = ksize_of(op);
    const double ns = kind == OpKind::color || kind == OpKind::blend ? kPointwiseNs
                      : kind == OpKind::box                          ? kStencilNs + kBoxPerTapNs * k
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
    return cpu_seconds(graph, channels_of_nodes(graph, channels), static_cast<double>(width) * static_cast<double>(height),
                       depth, threads);
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

OpKind op_kind(const NodeOp& op) {
    const auto* f = std::get_if<Filter>(&op);
    if (!f) return OpKind::blend;
    if (std::holds_alternative<BoxFilter>(*f)) return OpKind::box;
    if (std::holds_alternative<GaussianFilter>(*f)) return OpKind::gaussian;
    if (std::holds_alternative<SobelFilter>(*f)) return OpKind::sobel;
    if (std::holds_alternative<LaplacianFilter>(*f)) return OpKind::laplacian;
    return OpKind::color;
}

std::span<const DefaultRow> default_table() { return kTable; }

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
    const auto* sobel = std::get_if<SobelFilter>(&pair.filter);
    if (sobel && sobel->ksize == 3) return true;
    return std::holds_alternative<GaussianFilter>(pair.fused_stencil->filter) &&
           (sobel || std::holds_alternative<GaussianFilter>(pair.filter));
}

}  // namespace cbi
