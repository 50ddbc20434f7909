#include "pipeline/executor.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <iomanip>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <oneapi/tbb/task.h>
#include <oneapi/tbb/task_group.h>

#include "pipeline/backend.hpp"
#include "pipeline/defaults.hpp"
#include "pipeline/error.hpp"

namespace cbi {

namespace {

// Seconds between calls of next (PathTimes).
class Lap {
public:
    double next() {
        const auto now = std::chrono::steady_clock::now();
        return std::chrono::duration<double>(now - std::exchange(t_, now)).count();
    }

private:
    std::chrono::steady_clock::time_point t_ = std::chrono::steady_clock::now();
};

// How a node's schedule was chosen: given (the node's or the graph's), from
// the default table (table_sized: with the strip height the backend picked
// for the image), or by auto (from the tuning cache, timed on this run, or
// still to be timed).
enum class Choice { given, table, table_sized, cached, timed, pending };

bool is_stencil(const NodeOp& op) {
    const auto* filter = std::get_if<Filter>(&op);
    return filter && cbi::is_stencil(*filter);
}

// Whether the node reads samples outside the image (its border matters).
bool reads_border(const NodeOp& op) {
    const auto* filter = std::get_if<Filter>(&op);
    return filter && category_of(*filter) != Category::pointwise;
}

}  // namespace

// What runs for one input format, built by plan() in five steps:
// order_nodes, choose_schedules, fuse, size_strips, assign_buffers.
struct GraphExecutor::Plan {
    int width = 0, height = 0, channels = 0;
    Depth depth = Depth::u8;
    std::vector<NodeId> order;                            // nodes that feed an output, inputs first
    std::vector<int> channels_of;                         // per node
    std::vector<ScheduleSpec> schedule;                   // per node: the schedule it runs with
    std::vector<Choice> choice;                           // per node
    std::vector<std::string> tuning_key;                  // per auto node
    std::vector<NodeFormat> format;                       // per default or auto node: what the default table is asked
    std::vector<std::vector<NodeId>> reads;               // per node: the buffers it reads (its inputs, unless fused)
    std::vector<std::optional<ColorFilter>> fused_color;  // per stencil node: a colour node fused into its loads
    std::vector<NodeId> fused_into;                       // per fused node: the stencil that computes it, or -1
    std::vector<NodeId> fused_stencil;                    // per stencil node: the stencil fused into it, or -1
    std::vector<std::optional<BlendRun>> fused_blend;     // per blend node: run with its stencils in one kernel
    std::vector<NodeId> applied_by;  // per per-sample node: the node whose kernel applies it, or -1
    std::vector<int> buffer_of;                           // per node; -1: the graph input
    std::vector<int> buffer_channels;                     // capacity of each buffer, in channels

    void order_nodes(const Graph& graph);
    void choose_schedules(const Graph& graph, const RunOptions& options, const Backend& backend);
    void fuse(const Graph& graph, const RunOptions& options, const Backend& backend);
    void size_strips(const Graph& graph, const Backend& backend);
    void assign_buffers(const Graph& graph);

    // The FilterRun node `id` (a filter) runs as: its colour and stencil
    // fused in, with `schedule`.
    FilterRun filter_run(const Graph& graph, NodeId id, const ScheduleSpec& schedule) const {
        FilterRun run{std::get<Filter>(graph.nodes()[id].op), graph.border_of(id), schedule, fused_color[id]};
        if (const NodeId first = fused_stencil[id]; first >= 0)
            run.fused_stencil = FusedStencil{std::get<Filter>(graph.nodes()[first].op), graph.border_of(first)};
        return run;
    }

    ImageView view(std::byte* base, NodeId node) const {
        return contiguous_view(base, width, height, channels_of[node], depth);
    }

private:
    void fuse_colour(const Graph& graph, const std::vector<int>& readers);
    void fuse_colour_into_windows(const Graph& graph, const std::vector<int>& readers, const Backend& backend);
    void fuse_stencil_pairs(const Graph& graph, const std::vector<int>& readers, const Backend& backend, bool all,
                            bool colour, bool cuda);
    void fuse_blends(const Graph& graph, const std::vector<int>& readers, const Backend& backend);
    void fuse_per_sample(const Graph& graph, const std::vector<int>& readers, const Backend& backend);
};

// Only nodes that feed an output run. Node ids are already topological:
// every node's inputs were added before it.
void GraphExecutor::Plan::order_nodes(const Graph& graph) {
    const auto& nodes = graph.nodes();
    std::vector<bool> needed(nodes.size(), false);
    for (NodeId o : graph.outputs()) needed[o] = true;
    for (NodeId id = static_cast<NodeId>(nodes.size()) - 1; id > 0; --id)
        if (needed[id])
            for (NodeId in : nodes[id].inputs) needed[in] = true;
    for (NodeId id = 1; id < static_cast<NodeId>(nodes.size()); ++id)
        if (needed[id]) order.push_back(id);
}

// Given schedules as given; default ones from the default table; auto ones
// from the tuning cache, else timed on the first run.
void GraphExecutor::Plan::choose_schedules(const Graph& graph, const RunOptions& options, const Backend& backend) {
    const auto& nodes = graph.nodes();
    schedule.assign(nodes.size(), ScheduleSpec{});
    choice.assign(nodes.size(), Choice::given);
    tuning_key.assign(nodes.size(), "");
    format.assign(nodes.size(), NodeFormat{});
    std::string device;
    for (NodeId id : order) {
        const ScheduleChoice chosen = graph.schedule_of(id);
        if (const auto* given = std::get_if<ScheduleSpec>(&chosen)) {
            schedule[id] = *given;
            continue;
        }
        const Border border = graph.border_of(id);
        format[id] = NodeFormat{depth, channels_of[nodes[id].inputs[0]], options.device.cuda};
        if (std::holds_alternative<DefaultSchedule>(chosen)) {
            schedule[id] = default_schedule(nodes[id].op, border, format[id]);
            choice[id] = Choice::table;
            continue;
        }
        if (device.empty()) device = backend.device_name();
        tuning_key[id] =
            cbi::tuning_key(device, nodes[id].op_string(), reads_border(nodes[id].op) ? to_string(border) : "-", depth,
                            format[id].channels, width, height, options.device.cuda ? options.block : 0);
        if (const auto hit = options.tuning->find(tuning_key[id], nodes[id].op)) {
            schedule[id] = *hit;
            choice[id] = Choice::cached;
        } else {
            choice[id] = Choice::pending;
        }
    }
}

// Fusion, where the backend fuses (RunOptions::fuse), decided once the
// schedules are chosen: a colour node into the stencil that reads it (where
// fuses_color_by_default, or with every pair) or into the window node that
// reads it (where the backend's kernel takes it), then
// stencil pairs (RunOptions::stencil_pairs), then blends with the stencils
// they read, then per-sample nodes into the kernel before them. Nodes still to be timed are not
// fused: auto times each node on its own, and the executor plans again once
// they are tuned (run()).
void GraphExecutor::Plan::fuse(const Graph& graph, const RunOptions& options, const Backend& backend) {
    const auto& nodes = graph.nodes();
    reads.assign(nodes.size(), {});
    fused_color.assign(nodes.size(), std::nullopt);
    fused_into.assign(nodes.size(), -1);
    fused_stencil.assign(nodes.size(), -1);
    fused_blend.assign(nodes.size(), std::nullopt);
    applied_by.assign(nodes.size(), -1);
    for (NodeId id : order) reads[id] = nodes[id].inputs;
    if (!options.fuse || !backend.fuses()) return;
    std::vector<int> readers(nodes.size(), 0);  // of each node's output
    for (NodeId id : order)
        for (NodeId in : nodes[id].inputs) ++readers[in];
    for (NodeId o : graph.outputs()) ++readers[o];
    const bool all = options.stencil_pairs == RunOptions::StencilPairs::all;
    const bool colour = all || fuses_color_by_default(options.device.cuda);
    if (colour) fuse_colour(graph, readers);
    fuse_colour_into_windows(graph, readers, backend);
    if (options.stencil_pairs != RunOptions::StencilPairs::none)
        fuse_stencil_pairs(graph, readers, backend, all, colour, options.device.cuda);
    fuse_blends(graph, readers, backend);
    fuse_per_sample(graph, readers, backend);
    std::erase_if(order, [&](NodeId id) { return fused_into[id] >= 0; });
}

// A colour node read only by one stencil is not stored where the stencil's
// schedule can compute it (Capabilities::fuses_color): the stencil applies
// the matrix to each sample it stages (ColorSource).
void GraphExecutor::Plan::fuse_colour(const Graph& graph, const std::vector<int>& readers) {
    const auto& nodes = graph.nodes();
    for (NodeId id : order) {
        if (!is_stencil(nodes[id].op) || choice[id] == Choice::pending) continue;
        const NodeId in = nodes[id].inputs[0];
        const auto* pre = in == Graph::input() ? nullptr : std::get_if<Filter>(&nodes[in].op);
        const auto* colour = pre && readers[in] == 1 ? std::get_if<ColorFilter>(pre) : nullptr;
        if (!colour ||
            !supports(schedule[id], std::get<Filter>(nodes[id].op), graph.border_of(id), Fusion{true, false}))
            continue;
        fused_color[id] = *colour;
        fused_into[in] = id;
        reads[id] = nodes[in].inputs;
    }
}

// A colour node read only by a window kind's node (a median after
// color:gray) is not stored where the backend's kernel converts each source
// row as it loads it (Backend::kernel_shape: the CPU's median rows): the
// window node reads the colour node's input.
void GraphExecutor::Plan::fuse_colour_into_windows(const Graph& graph, const std::vector<int>& readers,
                                                   const Backend& backend) {
    const auto& nodes = graph.nodes();
    for (NodeId id : order) {
        const auto* f = std::get_if<Filter>(&nodes[id].op);
        if (!f || category_of(*f) != Category::window || choice[id] == Choice::pending) continue;
        const NodeId in = nodes[id].inputs[0];
        const auto* pre = in == Graph::input() ? nullptr : std::get_if<Filter>(&nodes[in].op);
        const auto* colour = pre && readers[in] == 1 && choice[in] != Choice::pending && fused_into[in] < 0
                                 ? std::get_if<ColorFilter>(pre)
                                 : nullptr;
        if (!colour) continue;
        FilterRun run = filter_run(graph, id, schedule[id]);
        run.fused_color = *colour;
        if (!backend.kernel_shape(run, {depth, channels_of[nodes[in].inputs[0]], channels_of[id], width, height}).fits)
            continue;
        fused_color[id] = *colour;
        fused_into[in] = id;
        reads[id] = nodes[in].inputs;
    }
}

// A stencil read only by one stencil fuses into it where the consumer's
// schedule computes pairs (Capabilities::fuses_stencil) and the backend's
// kernel takes them (Backend::kernel_shape): stream walks strips through line
// buffers (cuda/pair_strip.cuh); smem/sep stage each tile's intermediate
// in shared memory (pair_tiles.hpp); the CPU walks tiles through line buffers
// (cpu/pair_lines.hpp). A colour node read only by the first stencil runs in the
// same kernel where colour nodes fuse (`colour_fuses`). Pairs only; not
// with the wrap border. Unless `all`, only the pairs fuses_pair_by_default
// names.
void GraphExecutor::Plan::fuse_stencil_pairs(const Graph& graph, const std::vector<int>& readers,
                                             const Backend& backend, bool all, bool colour_fuses, bool cuda) {
    const auto& nodes = graph.nodes();
    const auto stencil = [&](NodeId id) -> const Filter* {
        return id != Graph::input() && is_stencil(nodes[id].op) && choice[id] != Choice::pending
                   ? &std::get<Filter>(nodes[id].op)
                   : nullptr;
    };
    for (NodeId id : order) {
        const NodeId in = nodes[id].inputs.empty() ? Graph::input() : nodes[id].inputs[0];
        const Filter* second = stencil(id);
        const Filter* first = stencil(in);
        if (!second || !first || readers[in] != 1 || fused_stencil[in] >= 0) continue;
        // The colour node before the first stencil, when that stencil did not take it on its own.
        std::optional<ColorFilter> colour = fused_color[in];
        const NodeId before = nodes[in].inputs[0];
        const auto* pre = before == Graph::input() ? nullptr : std::get_if<Filter>(&nodes[before].op);
        if (!colour && colour_fuses && pre && readers[before] == 1 && std::holds_alternative<ColorFilter>(*pre))
            colour = std::get<ColorFilter>(*pre);
        const Border b1 = graph.border_of(in), b2 = graph.border_of(id);
        const Fusion fusion{colour.has_value(), true};
        if (!supports(schedule[id], *second, b2, fusion) || !supports(schedule[id], *second, b1, fusion)) continue;
        const FilterRun chained{*second, b2, schedule[id], colour, FusedStencil{*first, b1}};
        const NodeId source = colour && !fused_color[in] ? nodes[before].inputs[0] : reads[in][0];
        if (!backend.kernel_shape(chained, {depth, channels_of[source], channels_of[in], width, height}).fits) continue;
        if (!all && !fuses_pair_by_default(chained, NodeFormat{depth, channels_of[source], cuda})) continue;
        if (colour && !fused_color[in]) {
            fused_into[before] = in;  // moved to this kernel below, with the first stencil's
            reads[in] = nodes[before].inputs;
        }
        fused_stencil[id] = in;
        fused_color[id] = colour;
        for (NodeId& into : fused_into)
            if (into == in) into = id;  // a colour node fused into the first stencil now runs in this kernel
        fused_into[in] = id;
        reads[id] = reads[in];
    }
}

// A blend of a stencil of an image and that image (an unsharp mask), or of
// two stencils of one image (a difference of Gaussians), runs in one kernel
// with its stencils where their schedule computes blends
// (Capabilities::fuses_blend) and the backend's kernel takes them
// (Backend::kernel_shape); the stencils, read by the blend only, are not
// stored. The kernel runs with the first stencil's schedule; both sides
// must have one border.
void GraphExecutor::Plan::fuse_blends(const Graph& graph, const std::vector<int>& readers, const Backend& backend) {
    const auto& nodes = graph.nodes();
    const auto fusable = [&](NodeId s) {
        return s != Graph::input() && is_stencil(nodes[s].op) && choice[s] != Choice::pending && readers[s] == 1 &&
               fused_into[s] < 0 && fused_stencil[s] < 0 && !fused_color[s];
    };
    for (NodeId id : order) {
        const auto* blend = std::get_if<BlendFilter>(&nodes[id].op);
        if (!blend || choice[id] == Choice::pending) continue;
        const std::array<NodeId, 2> in{nodes[id].inputs[0], nodes[id].inputs[1]};
        std::array<bool, 2> side{fusable(in[0]), fusable(in[1])};  // computed in the blend's kernel
        if (!(side[0] && side[1] &&
              nodes[in[0]].inputs[0] == nodes[in[1]].inputs[0])) {  // not two stencils of one image:
            side[0] = side[0] && nodes[in[0]].inputs[0] == in[1];   // a stencil and its input
            side[1] = !side[0] && side[1] && nodes[in[1]].inputs[0] == in[0];
            if (!side[0] && !side[1]) continue;
        }
        const NodeId first = side[0] ? in[0] : in[1];
        BlendRun run{*blend, std::nullopt, std::nullopt, graph.border_of(first), schedule[first]};
        bool fits = true;
        for (int k = 0; k < 2; ++k) {
            if (!side[k]) continue;
            const Filter& f = std::get<Filter>(nodes[in[k]].op);
            (k == 0 ? run.a : run.b) = f;
            fits = fits && graph.border_of(in[k]) == run.border &&
                   supports(schedule[in[k]], f, run.border, Fusion{.blend = true});
        }
        const NodeId source = nodes[first].inputs[0];
        if (!fits) continue;
        const KernelShape shape =
            backend.kernel_shape(run, {depth, channels_of[source], channels_of[source], width, height});
        if (!shape.fits) continue;
        for (int k = 0; k < 2; ++k)
            if (side[k]) fused_into[in[k]] = id;
        // The strip height for this image, as size_strips gives stencils.
        if (choice[first] == Choice::table && shape.strip_height) run.schedule.height = *shape.strip_height;
        fused_blend[id] = run;
        reads[id] = {source};
    }
}

// A per-sample node (is_per_sample: threshold, scale, gamma) whose input is
// read by it alone is applied by that node's kernel as it stores each
// sample (FilterRun::then, BlendRun::then), where the backend's kernel takes
// it (Backend::kernel_shape): one pass over memory instead of two, and no
// buffer for the input. The per-sample node runs that kernel (with what is
// fused into it) and keeps its own id, buffer and outputs; a kernel applies
// one such node (the next per-sample node runs on its own).
void GraphExecutor::Plan::fuse_per_sample(const Graph& graph, const std::vector<int>& readers, const Backend& backend) {
    const auto& nodes = graph.nodes();
    for (NodeId id : order) {
        const auto* then = std::get_if<Filter>(&nodes[id].op);
        if (!then || !is_per_sample(*then) || choice[id] == Choice::pending) continue;
        const NodeId in = nodes[id].inputs[0];
        if (in == Graph::input() || readers[in] != 1 || fused_into[in] >= 0 || applied_by[in] >= 0 ||
            choice[in] == Choice::pending)
            continue;
        KernelFormat kernel{depth, channels_of[reads[in][0]], channels_of[in], width, height};
        bool fits = false;
        if (std::holds_alternative<Filter>(nodes[in].op)) {
            FilterRun run = filter_run(graph, in, schedule[in]);
            run.then = *then;
            if (fused_stencil[in] >= 0) kernel.channels = channels_of[fused_stencil[in]];
            fits = backend.kernel_shape(run, kernel).fits;
        } else {
            BlendRun run = fused_blend[in] ? *fused_blend[in]
                                           : BlendRun{std::get<BlendFilter>(nodes[in].op), std::nullopt, std::nullopt,
                                                      Border{}, schedule[in]};
            run.then = *then;
            fits = backend.kernel_shape(run, kernel).fits;
        }
        if (!fits) continue;
        applied_by[id] = in;
        fused_into[in] = id;
        reads[id] = reads[in];
    }
}

// A stencil (or stencil pair) whose schedule came from the default table
// takes the strip height the backend picks for this image
// (Backend::kernel_shape: on the GPU, the 8-bit stream kernels' by waves).
void GraphExecutor::Plan::size_strips(const Graph& graph, const Backend& backend) {
    const auto& nodes = graph.nodes();
    for (NodeId node : order) {
        const NodeId id = applied_by[node] >= 0 ? applied_by[node] : node;  // the node whose kernel runs
        if (!is_stencil(nodes[id].op) || choice[id] != Choice::table) continue;
        const FilterRun run = filter_run(graph, id, schedule[id]);
        const int channels = fused_stencil[id] >= 0 ? channels_of[fused_stencil[id]] : channels_of[id];
        if (const auto h =
                backend.kernel_shape(run, {depth, channels_of[reads[id][0]], channels, width, height}).strip_height) {
            schedule[id].height = *h;
            choice[id] = Choice::table_sized;
        }
    }
}

// Buffers by lifetime: a node's buffer is free again once every node that
// reads it has run; outputs keep theirs. A node never writes the buffer it
// reads (stencils cannot run in place).
void GraphExecutor::Plan::assign_buffers(const Graph& graph) {
    constexpr int kForever = 1 << 30;
    std::vector<int> last_read(graph.nodes().size(), -1);
    for (std::size_t step = 0; step < order.size(); ++step)
        for (NodeId in : reads[order[step]]) last_read[in] = static_cast<int>(step);
    for (NodeId o : graph.outputs()) last_read[o] = kForever;
    buffer_of.assign(graph.nodes().size(), -1);
    std::vector<bool> buffer_free;
    std::vector<NodeId> holders;  // nodes whose buffer is still live
    for (std::size_t step = 0; step < order.size(); ++step) {
        for (auto it = holders.begin(); it != holders.end();)
            if (last_read[*it] < static_cast<int>(step)) {
                buffer_free[buffer_of[*it]] = true;
                it = holders.erase(it);
            } else {
                ++it;
            }
        const NodeId id = order[step];
        const int want = channels_of[id];
        int best = -1;
        for (std::size_t b = 0; b < buffer_free.size(); ++b)
            if (buffer_free[b] && buffer_channels[b] >= want &&
                (best < 0 || buffer_channels[b] < buffer_channels[best]))
                best = static_cast<int>(b);
        if (best < 0) {
            best = static_cast<int>(buffer_channels.size());
            buffer_channels.push_back(want);
            buffer_free.push_back(false);
        }
        buffer_free[best] = false;
        buffer_of[id] = best;
        holders.push_back(id);
    }
}

GraphExecutor::GraphExecutor(Graph graph, RunOptions options)
    : user_graph_(std::move(graph)), options_(std::move(options)) {
    user_graph_.check_complete();
    ExpandedGraph expanded = expand_compound(user_graph_, options_.device.cuda);
    graph_ = std::move(expanded.graph);
    user_ids_ = std::move(expanded.ids);
    if (!options_.tuning) options_.tuning = std::make_shared<TuningCache>();
    if (options_.block < 1 || options_.block > 1024) throw std::invalid_argument("--block must be from 1 to 1024");
    backend_ = make_backend(options_.device, options_.block);
}

GraphExecutor::~GraphExecutor() = default;

void GraphExecutor::plan(int width, int height, int channels, Depth depth) {
    const ImageView probe{nullptr,  width, height,
                          channels, depth, static_cast<std::size_t>(width) * channels * depth_bytes(depth)};
    check_supported(probe, "input");
    if (probe.pixels() > max_schedulable_pixels)
        throw Error("input", cbi::describe(probe) + " has more than 2^32-1 pixels, the most a schedule can index");

    // Kinds that take only some images (adaptive: 8-bit, 1 channel) say so
    // before anything runs; compound nodes are gone from graph_, so ask the user's.
    const std::vector<int> user_channels = node_channels(user_graph_, channels);
    for (const GraphNode& n : user_graph_.nodes())
        if (const auto* f = std::get_if<Filter>(&n.op); f && !n.inputs.empty())
            if (const std::string why = refuses_input(*f, depth, user_channels[static_cast<std::size_t>(n.inputs[0])]);
                !why.empty())
                throw Error(to_string(*f), why);

    auto plan = std::make_unique<Plan>();
    plan->width = width, plan->height = height, plan->channels = channels, plan->depth = depth;
    plan->channels_of = node_channels(graph_, channels);
    plan->order_nodes(graph_);
    plan->choose_schedules(graph_, options_, *backend_);
    plan->fuse(graph_, options_, *backend_);
    plan->size_strips(graph_, *backend_);
    plan->assign_buffers(graph_);

    backend_->release();
    prepared_ = ran_ = false;
    plan_ = std::move(plan);
    outputs_.assign(graph_.outputs().size(), ImageView{});
}

bool GraphExecutor::planned_for(int width, int height, int channels, Depth depth) const {
    return plan_ && plan_->width == width && plan_->height == height && plan_->channels == channels &&
           plan_->depth == depth;
}

void GraphExecutor::prepare(int width, int height, int channels, Depth depth) {
    if (!planned_for(width, height, channels, depth)) plan(width, height, channels, depth);
    std::vector<int> output_channels;
    for (NodeId o : graph_.outputs()) output_channels.push_back(plan_->channels_of[o]);
    allocations_ += backend_->allocate({width, height, channels, depth, plan_->buffer_channels, output_channels});
    prepared_ = true;
}

ImageView GraphExecutor::view_of(NodeId id) const {
    if (id == Graph::input()) return input_;
    if (!direct_outputs_.empty())
        for (std::size_t o = 0; o < direct_outputs_.size(); ++o)
            if (graph_.outputs()[o] == id) return direct_outputs_[o];
    return plan_->view(backend_->buffer(plan_->buffer_of[id]), id);
}

// Runs (or enqueues) node `id` with `schedule` on the band of `rows` rows
// from `first_row` (a tuning run on the CPU; every row otherwise).
void GraphExecutor::run_node(NodeId id, const ScheduleSpec& schedule, int first_row, int rows) {
    const auto band = [&](ImageView v) {
        v.data += static_cast<std::size_t>(first_row) * v.stride;
        v.height = rows;
        return v;
    };
    const ImageView dst = band(view_of(id));
    // A per-sample node applied by the node before it runs that node's kernel (Plan::fuse_per_sample).
    const NodeId k = plan_->applied_by[id] >= 0 ? plan_->applied_by[id] : id;
    std::optional<Filter> then;
    if (k != id) then = std::get<Filter>(graph_.nodes()[id].op);
    const ScheduleSpec& kernel_schedule = k != id ? plan_->schedule[k] : schedule;
    const GraphNode& n = graph_.nodes()[k];
    if (std::holds_alternative<Filter>(n.op)) {
        FilterRun node = plan_->filter_run(graph_, k, kernel_schedule);
        node.then = then;
        backend_->run_node(node, band(view_of(plan_->reads[id][0])), dst);
    } else if (const auto& fused = plan_->fused_blend[k]) {
        BlendRun run = *fused;
        run.then = then;
        backend_->run_fused_blend(run, band(view_of(plan_->reads[id][0])), dst);
    } else {
        backend_->run_blend(std::get<BlendFilter>(n.op), kernel_schedule, band(view_of(n.inputs[0])),
                            band(view_of(n.inputs[1])), dst, then);
    }
}

// Every node in order (timing pending auto nodes first), reading the input
// the last upload gave.
void GraphExecutor::run_nodes() {
    for (NodeId id : plan_->order) {
        if (plan_->choice[id] == Choice::pending) tune(id);
        run_node(id, plan_->schedule[id], 0, plan_->height);
    }
}

void GraphExecutor::tune(NodeId id) {
    Plan& plan = *plan_;
    const std::string& key = plan.tuning_key[id];
    std::lock_guard timing(options_.tuning->timing_mutex());
    const NodeOp& op = graph_.nodes()[id].op;
    if (const auto hit = options_.tuning->find(key, op)) {  // another executor timed it meanwhile
        plan.schedule[id] = *hit;
        plan.choice[id] = Choice::cached;
        return;
    }
    const TuningMethod method = backend_->tuning();
    const int rows =
        method.band_of_rows ? std::min(plan.height, std::max(kTuningBandRows, plan.height / 8)) : plan.height;
    const int first_row = (plan.height - rows) / 2;
    // Timed on their own; fused from the next plan on where the choice can.
    plan.schedule[id] = fastest_candidate(default_candidates(op, graph_.border_of(id), plan.format[id]), method.runs,
                                          method.warmup_decides, [&](const ScheduleSpec& s) {
                                              backend_->start_timer();
                                              run_node(id, s, first_row, rows);
                                              return backend_->stop_timer_ms();
                                          });
    // Interrupted (a batch cancels its images' parallel loops): the timings
    // were cut short, so nothing is kept and the next run times again.
    if (tbb::task_group_context* ctx = tbb::task::current_context(); ctx && ctx->is_group_execution_cancelled()) return;
    plan.choice[id] = Choice::timed;
    replan_ = true;  // the next run fuses what the tuned schedules can
    options_.tuning->store(key, plan.schedule[id]);
}

void GraphExecutor::prepare_for(const ImageView& input) {
    check_supported(input, "input");
    if (replan_) {
        replan_ = false;
        plan(input.width, input.height, input.channels, input.depth);
    }
    if (!prepared_ || !planned_for(input.width, input.height, input.channels, input.depth))
        prepare(input.width, input.height, input.channels, input.depth);
}

std::span<const ImageView> GraphExecutor::run(const ImageView& input) {
    prepare_for(input);
    input_ = backend_->upload(input);
    run_nodes();
    for (std::size_t i = 0; i < outputs_.size(); ++i) outputs_[i] = backend_->download(view_of(graph_.outputs()[i]), i);
    backend_->finish();
    ran_ = true;
    return outputs_;
}

void GraphExecutor::check_outputs(std::span<const ImageView> outputs) const {
    const auto& ids = graph_.outputs();
    if (outputs.size() != ids.size())
        throw std::invalid_argument("the pipeline has " + std::to_string(ids.size()) + " output" +
                                    (ids.size() == 1 ? "" : "s") + ", " + std::to_string(outputs.size()) + " given");
    for (std::size_t o = 0; o < outputs.size(); ++o) {
        const ImageView& v = outputs[o];
        const ImageView want{nullptr, plan_->width, plan_->height, plan_->channels_of[ids[o]], plan_->depth, 0};
        if (v.width != want.width || v.height != want.height || v.channels != want.channels || v.depth != want.depth ||
            v.stride < v.row_bytes() || (v.data == nullptr && !v.empty()))
            throw std::invalid_argument("output " + std::to_string(o) + " is " + cbi::describe(v) + " (stride " +
                                        std::to_string(v.stride) + "); the pipeline writes " + cbi::describe(want));
    }
    // Nodes read what they write only through their own buffers: an output
    // sharing memory with the input (or another output) would be read after
    // it was overwritten.
    const auto span_of = [](const ImageView& v) {
        const std::byte* first = v.data;
        return std::pair{first, first + (v.height - 1) * v.stride + v.row_bytes()};
    };
    const auto overlap = [&](const ImageView& a, const ImageView& b) {
        const auto [a0, a1] = span_of(a);
        const auto [b0, b1] = span_of(b);
        return a0 < b1 && b0 < a1;
    };
    for (std::size_t o = 0; o < outputs.size(); ++o) {
        if (overlap(outputs[o], input_))
            throw std::invalid_argument("output " + std::to_string(o) +
                                        " overlaps the input: filters cannot run in place");
        for (std::size_t p = 0; p < o; ++p)
            if (overlap(outputs[o], outputs[p]))
                throw std::invalid_argument("outputs " + std::to_string(p) + " and " + std::to_string(o) + " overlap");
    }
}

void GraphExecutor::run_into(const ImageView& input, std::span<const ImageView> outputs) {
    prepare_for(input);
    input_ = input;
    check_outputs(outputs);
    ran_ = false;
    if (options_.device.cuda) {  // through the device: staged upload, downloads into the caller's views
        input_ = backend_->upload(input);
        run_nodes();
        for (std::size_t i = 0; i < outputs.size(); ++i)
            backend_->download_into(view_of(graph_.outputs()[i]), outputs[i]);
        backend_->finish();
        ran_ = true;
        return;
    }
    input_ = backend_->use_input(input);
    direct_outputs_ = outputs;
    struct Reset {
        std::span<const ImageView>& outputs;
        ~Reset() { outputs = {}; }
    } reset{direct_outputs_};
    run_nodes();
    for (std::size_t i = 0; i < outputs.size(); ++i)
        if (graph_.outputs()[i] == Graph::input()) backend_->copy_image(input_, outputs[i]);
    backend_->finish();
}

void GraphExecutor::enqueue(const ImageView& input, std::span<const ImageView> outputs, CUstream_st* stream) {
    if (!options_.device.cuda) throw std::logic_error("GraphExecutor::enqueue needs a CUDA executor");
    // First, so that preparing (which makes the executor's device current)
    // leaves the caller's current device as it was.
    backend_->begin_external(stream);
    try {
        prepare_for(input);
        input_ = input;
        check_outputs(outputs);
        ran_ = false;  // time_kernels_ms would read the caller's input after the call
        input_ = backend_->use_input(input);
        direct_outputs_ = outputs;
        run_nodes();
        for (std::size_t i = 0; i < outputs.size(); ++i)
            if (graph_.outputs()[i] == Graph::input()) backend_->copy_image(input_, outputs[i]);
    } catch (...) {
        direct_outputs_ = {};
        try {
            backend_->end_external();
        } catch (...) {  // the first error is the one to report
        }
        throw;
    }
    direct_outputs_ = {};
    backend_->end_external();
}

float GraphExecutor::time_kernels_ms() {
    if (!options_.device.cuda || !prepared_ || !ran_)
        throw std::logic_error("GraphExecutor::time_kernels_ms needs a CUDA executor that has run");
    backend_->start_timer();
    run_nodes();
    return static_cast<float>(backend_->stop_timer_ms());
}

Image GraphExecutor::process(const ImageView& input) {
    const ImageView out = run(input).front();
    Image copy(out.width, out.height, out.channels, out.depth);
    copy_pixels(out, copy.view());
    return copy;
}

bool GraphExecutor::decodes_jpeg() const {
    return backend_->jpeg() != nullptr;
}

std::optional<Processor::FileResult> GraphExecutor::process_jpeg(std::span<const std::uint8_t> jpeg, int jpeg_quality,
                                                                 bool wait, bool hardware) {
    DeviceJpeg* codec = backend_->jpeg();
    if (!codec) return std::nullopt;
    Lap lap;
    const std::optional<ImageView> format = codec->parse(jpeg, wait, hardware);
    if (!format) return std::nullopt;
    prepare_for(*format);
    const std::optional<ImageView> input = codec->decode_input(jpeg);
    times_.decode_s += lap.next();
    if (!input) return std::nullopt;
    input_ = *input;
    run_nodes();
    ran_ = true;
    times_.filter_s += lap.next();
    FileResult r = file_result(jpeg_quality);
    times_.result_s += lap.next();
    return r;
}

PathTimes GraphExecutor::path_times() const {
    PathTimes t = times_;
    if (const DeviceJpeg* codec = backend_->jpeg()) std::tie(t.hw_batches, t.hw_images) = codec->hardware_batches();
    return t;
}

bool GraphExecutor::jpeg_codec_ready() {
    DeviceJpeg* codec = backend_->jpeg();
    return codec && codec->codec_ready(false);
}

bool GraphExecutor::jpeg_decoder_ready() {
    DeviceJpeg* codec = backend_->jpeg();
    return codec && codec->decoder_ready();
}

Processor::FileResult GraphExecutor::process_file(const ImageView& input, int jpeg_quality) {
    if (jpeg_quality <= 0 || !jpeg_codec_ready()) return Processor::process_file(input, jpeg_quality);
    Lap lap;
    prepare_for(input);
    input_ = backend_->upload(input);
    run_nodes();
    ran_ = true;
    times_.filter_s += lap.next();
    FileResult r = file_result(jpeg_quality);
    times_.result_s += lap.next();
    return r;
}

Processor::FileResult GraphExecutor::file_result(int jpeg_quality) {
    FileResult result;
    const ImageView out = view_of(graph_.outputs().front());
    if (jpeg_quality > 0 && out.depth == Depth::u8 && (out.channels == 1 || out.channels == 3)) {
        result.encoded = backend_->jpeg()->encode(out, jpeg_quality);
        result.channels = out.channels;
        return result;
    }
    const ImageView host = backend_->download(out, 0);
    backend_->finish();
    result.image = Image(host.width, host.height, host.channels, host.depth);
    copy_pixels(host, result.image.view());
    return result;
}

int GraphExecutor::channels_of(NodeId id) const {
    if (!plan_) throw std::logic_error("GraphExecutor::channels_of before plan");
    return plan_->channels_of.at(static_cast<std::size_t>(user_ids_.at(static_cast<std::size_t>(id))));
}

ScheduleSpec GraphExecutor::schedule_of(NodeId id) const {
    if (!plan_) throw std::logic_error("GraphExecutor::schedule_of before prepare");
    return plan_->schedule.at(static_cast<std::size_t>(user_ids_.at(static_cast<std::size_t>(id))));
}

std::string GraphExecutor::describe() const {
    std::ostringstream s;
    const auto& nodes = graph_.nodes();
    s << "pipeline on "
      << (options_.device.cuda ? "cuda:" + std::to_string(options_.device.index) : std::string("cpu"));
    if (plan_)
        s << ", input "
          << cbi::describe(ImageView{nullptr, plan_->width, plan_->height, plan_->channels, plan_->depth, 0});
    s << "\n";
    // The schedule and where it came from: given, the default table, auto.
    const auto schedule_text = [&](NodeId id) {
        std::string text = to_string(graph_.schedule_of(id));
        // Nodes that do not run (not needed by any output) keep the text; fused ones show their kernel's schedule.
        if (!plan_ || (plan_->buffer_of[id] < 0 && plan_->fused_into[id] < 0)) return text;
        if (const auto& fused = plan_->fused_blend[id]) return fused->schedule.to_string() + " (its stencils' kernel)";
        if (const NodeId k = plan_->applied_by[id]; k >= 0) {
            if (const auto& fused = plan_->fused_blend[k])
                return fused->schedule.to_string() + " (" + nodes[k].name + "'s kernel)";
            return plan_->schedule[k].to_string() + " (" + nodes[k].name + "'s kernel)";
        }
        const std::string spec = plan_->schedule[id].to_string();
        switch (plan_->choice[id]) {
            case Choice::given: return spec + " (given)";
            case Choice::table: {
                const auto* fixed = std::get_if<ScheduleSpec>(&graph_.default_schedule());
                return spec + (fixed && !nodes[id].options.schedule
                                   ? " (default table: " + fixed->to_string() + " cannot run it)"
                                   : std::string(" (default table)"));
            }
            case Choice::table_sized: return spec + " (default table, strip height for this image)";
            case Choice::cached: return spec + " (auto, cached)";
            case Choice::timed: return spec + " (auto, timed)";
            case Choice::pending: return std::string("auto (timed on the first run)");
        }
        return text;
    };
    // A kernel's taps (filter2d, or the Gaussian an adaptive threshold expands to) can run to
    // thousands of characters: the table shows their start.
    const auto op_text = [&](NodeId id) {
        constexpr std::size_t kMax = 48;
        std::string t = nodes[id].op_string();
        return t.size() <= kMax ? t : t.substr(0, kMax - 3) + "...";
    };
    std::size_t name_width = 5, op_width = 8, schedule_width = 12;
    for (NodeId id = 1; id < static_cast<NodeId>(nodes.size()); ++id) {
        name_width = std::max(name_width, nodes[id].name.size());
        op_width = std::max(op_width, op_text(id).size());
        schedule_width = std::max(schedule_width, schedule_text(id).size());
    }
    for (NodeId id = 1; id < static_cast<NodeId>(nodes.size()); ++id) {
        const GraphNode& n = nodes[id];
        std::string inputs;
        for (NodeId in : n.inputs) inputs += (inputs.empty() ? "" : ", ") + nodes[in].name;
        s << "  " << std::left << std::setw(static_cast<int>(name_width)) << n.name << "  "
          << std::setw(static_cast<int>(op_width)) << op_text(id) << "  @"
          << std::setw(static_cast<int>(schedule_width)) << schedule_text(id);
        if (reads_border(n.op))
            s << "  border " << std::setw(12) << to_string(graph_.border_of(id));
        else
            s << "  " << std::setw(19) << "";
        s << "  <- " << inputs;
        if (plan_ && plan_->fused_stencil[id] >= 0) {
            const NodeId first = plan_->fused_stencil[id];
            const bool lines = !options_.device.cuda || plan_->schedule[id].family == ScheduleFamily::stream;
            s << "  (fused: computes " << nodes[first].name << (lines ? " through line buffers" : " in shared memory")
              << ", reading " << nodes[plan_->reads[id][0]].name;
            if (plan_->fused_color[id]) s << " through " << to_string(Filter(*plan_->fused_color[id]));
            s << ")";
        } else if (plan_ && plan_->fused_blend[id]) {
            std::string sides;
            for (NodeId in : n.inputs)
                if (plan_->fused_into[in] == id) sides += (sides.empty() ? "" : " and ") + nodes[in].name;
            // The GPU's stream kernel walks line buffers; sep:WxH's (and the CPU's) stencil blends each tile as it
            // stores it.
            const bool lines =
                options_.device.cuda && plan_->fused_blend[id]->schedule.family == ScheduleFamily::stream;
            s << "  (fused: computes " << sides
              << (lines ? " in one kernel through line buffers" : " and blends each tile it stores") << ", reading "
              << nodes[plan_->reads[id][0]].name << ")";
        } else if (plan_ && plan_->fused_color[id]) {
            s << "  (fused: reads " << nodes[plan_->reads[id][0]].name << " through "
              << to_string(Filter(*plan_->fused_color[id])) << ")";
        } else if (plan_ && plan_->applied_by[id] >= 0) {
            s << "  (fused: applied as " << nodes[plan_->applied_by[id]].name << " stores each sample)";
        }
        if (plan_) {
            if (plan_->fused_into[id] >= 0)
                s << "  -> fused into " << nodes[plan_->fused_into[id]].name << ", not stored";
            else if (plan_->buffer_of[id] < 0)
                s << "  (not needed by any output: skipped)";
            else
                s << "  -> buffer " << plan_->buffer_of[id] << " (" << plan_->channels_of[id] << " ch)";
        }
        for (std::size_t o = 0; o < graph_.outputs().size(); ++o)
            if (graph_.outputs()[o] == id) s << "  [output " << o << "]";
        s << "\n";
    }
    if (plan_) {
        const std::size_t plane = static_cast<std::size_t>(plan_->width) * plan_->height * depth_bytes(plan_->depth);
        std::size_t bytes = 0;
        for (int ch : plan_->buffer_channels) bytes += plane * ch;
        std::ptrdiff_t colours = 0, stencils = 0, blended = 0, applied = 0;  // fused nodes, by what they are fused into
        for (NodeId id = 1; id < static_cast<NodeId>(nodes.size()); ++id) {
            const NodeId into = plan_->fused_into[id];
            if (into < 0) continue;
            if (plan_->applied_by[into] == id)
                ++applied;
            else if (!is_stencil(nodes[id].op))
                ++colours;
            else if (plan_->fused_blend[into])
                ++blended;
            else
                ++stencils;
        }
        const std::size_t kernels = plan_->order.size(), buffers = plan_->buffer_channels.size();
        s << "  " << kernels << (kernels == 1 ? " kernel runs" : " kernels run");
        if (colours > 0) s << " (" << colours << " colour node" << (colours > 1 ? "s" : "") << " fused)";
        if (stencils > 0) s << " (" << stencils << " stencil" << (stencils > 1 ? "s" : "") << " fused into the next)";
        if (blended > 0) s << " (" << blended << " stencil" << (blended > 1 ? "s" : "") << " fused into a blend)";
        if (applied > 0)
            s << " (" << applied << " per-sample node" << (applied > 1 ? "s" : "") << " applied by the kernel before)";
        s << ", " << buffers << (buffers == 1 ? " buffer (" : " buffers (") << std::fixed << std::setprecision(1)
          << bytes / 1048576.0 << " MiB) reused by lifetime\n";
    } else {
        s << "  buffers are planned when the input's size is known\n";
    }
    return s.str();
}

ProcessorFactory graph_processor_factory(Graph graph, RunOptions options) {
    graph.check_complete();
    return [graph = std::move(graph), options]() -> std::unique_ptr<Processor> {
        return std::make_unique<GraphExecutor>(graph, options);
    };
}

Image run_sequence(std::span<const FilterRun> nodes, const ImageView& input, const RunOptions& options) {
    GraphExecutor executor(sequence_graph(nodes), options);
    return executor.process(input);
}

}  // namespace cbi
