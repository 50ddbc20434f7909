#include "pipeline/executor.hpp"

#include <tbb/task_arena.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <exception>
#include <functional>
#include <iomanip>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "filters/cpu_backend.hpp"
#include "pipeline/defaults.hpp"
#include "pipeline/error.hpp"
#if CBI_HAVE_CUDA
#include "filters/cuda_backend.hpp"
#include "pipeline/cuda_runtime.hpp"
#endif

namespace cbi {

bool built_with_cuda() {
#if CBI_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

DeviceSpec parse_device(std::string_view text) {
    if (text == "auto") return {DeviceSpec::Kind::automatic, 0};
    if (text == "cpu") return {DeviceSpec::Kind::cpu, 0};
    if (text == "cuda") return {DeviceSpec::Kind::cuda, 0};
    if (text.starts_with("cuda:")) {
        const auto digits = text.substr(5);
        int index = -1;
        auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
        if (!digits.empty() && ec == std::errc{} && ptr == digits.data() + digits.size() && index >= 0)
            return {DeviceSpec::Kind::cuda, index};
    }
    throw std::invalid_argument("device '" + std::string(text) + "' must be auto, cpu, cuda or cuda:N");
}

ResolvedDevice resolve_device(const DeviceSpec& spec) {
    if (spec.kind == DeviceSpec::Kind::cpu) return {false, 0, ""};
#if CBI_HAVE_CUDA
    std::string why;
    const int count = cuda_device_count(why);
    if (spec.kind == DeviceSpec::Kind::cuda) {
        if (count == 0) throw Error("--device cuda", "no CUDA device is usable: " + why);
        if (spec.index >= count)
            throw Error("--device cuda:" + std::to_string(spec.index),
                        "no such device; this machine has " + std::to_string(count));
        return {true, spec.index, ""};
    }
    if (count > 0) return {true, 0, ""};
    return {false, 0, "no CUDA device (" + why + "), running on the CPU"};
#else
    if (spec.kind == DeviceSpec::Kind::cuda)
        throw Error("--device cuda", "this build of cbi has no CUDA backend (configured with CBI_WITH_CUDA=OFF or without nvcc)");
    return {false, 0, "this build has no CUDA backend, running on the CPU"};
#endif
}

namespace {

// How a node's schedule was chosen: given (the node's or the graph's), from
// the default table, or by auto (from the tuning cache, timed on this run,
// or still to be timed).
enum class Choice { given, table, cached, timed, pending };

}  // namespace

struct GraphExecutor::Plan {
    int width = 0, height = 0, channels = 0;
    Depth depth = Depth::u8;
    std::vector<NodeId> order;          // nodes that feed an output, inputs first
    std::vector<int> channels_of;       // per node
    std::vector<ScheduleSpec> schedule;  // per node: the schedule it runs with
    std::vector<Choice> choice;          // per node
    std::vector<std::string> tuning_key; // per auto node
    std::vector<NodeFormat> format;      // per default or auto node: what the default table is asked
    std::vector<std::vector<NodeId>> reads;             // per node: the buffers it reads (its inputs, unless fused)
    std::vector<std::optional<ColorFilter>> fused_color; // per stencil node: a colour node fused into its loads
    std::vector<NodeId> fused_into;                      // per fused node: the stencil that computes it, or -1
    std::vector<NodeId> fused_stencil;                   // per stencil node: the stencil fused into it (CUDA), or -1
    std::vector<int> buffer_of;         // per node; -1: the graph input
    std::vector<int> buffer_channels;   // capacity of each buffer, in channels

    ImageView view(std::byte* base, NodeId node) const {
        ImageView v{base, width, height, channels_of[node], depth, 0};
        v.stride = v.row_bytes();
        return v;
    }
};

#if CBI_HAVE_CUDA
struct GraphExecutor::CudaState {
    Stream stream;
    DeviceImage input;
    std::vector<DeviceBuffer> buffers;
    PinnedBuffer input_staging;
    std::vector<PinnedBuffer> output_staging;
};
#else
struct GraphExecutor::CudaState {};
#endif

// A stencil read only by one stencil, both on smem/sep, fuses into it: one
// kernel computes the first stencil's output tile by tile in shared memory
// (chain.hpp, cuda_chain.cu). Pairs only; not with the wrap border; only
// where the tile fits the device's shared memory.
void GraphExecutor::fuse_stencil_pairs(Plan& plan, const std::vector<int>& readers) const {
#if CBI_HAVE_CUDA
    const auto& nodes = graph_.nodes();
    const auto stencil = [&](NodeId id) -> const Filter* {
        const auto* f = id == Graph::input() ? nullptr : std::get_if<Filter>(&nodes[id].op);
        return f && !std::holds_alternative<ColorFilter>(*f) && plan.choice[id] != Choice::pending ? f : nullptr;
    };
    for (NodeId id : plan.order) {
        const NodeId in = nodes[id].inputs.empty() ? Graph::input() : nodes[id].inputs[0];
        const Filter* second = stencil(id);
        const Filter* first = stencil(in);
        if (!second || !first || readers[in] != 1 || plan.fused_stencil[in] >= 0) continue;
        const Border b1 = graph_.border_of(in), b2 = graph_.border_of(id);
        const Fusion fusion{plan.fused_color[in].has_value(), true};
        if (!supports(plan.schedule[id], *second, b2, fusion) || !supports(plan.schedule[id], *second, b1, fusion)) continue;
        const FilterRun chained{*second, b2, plan.schedule[id], plan.fused_color[in], FusedStencil{*first, b1}};
        if (!cuda_chain_fits(chained, plan.depth, plan.channels_of[in], options_.device.index)) continue;
        plan.fused_stencil[id] = in;
        plan.fused_color[id] = plan.fused_color[in];
        for (NodeId& into : plan.fused_into)
            if (into == in) into = id;  // a colour node fused into the first stencil now runs in this kernel
        plan.fused_into[in] = id;
        plan.reads[id] = plan.reads[in];
    }
#else
    (void)plan, (void)readers;
#endif
}

FilterRun GraphExecutor::node_to_run(NodeId id, const ScheduleSpec& schedule) const {
    const Plan& plan = *plan_;
    FilterRun node{std::get<Filter>(graph_.nodes()[id].op), graph_.border_of(id), schedule, plan.fused_color[id], std::nullopt};
    if (const NodeId first = plan.fused_stencil[id]; first >= 0)
        node.fused_stencil = FusedStencil{std::get<Filter>(graph_.nodes()[first].op), graph_.border_of(first)};
    return node;
}

GraphExecutor::GraphExecutor(Graph graph, RunOptions options) : graph_(std::move(graph)), options_(std::move(options)) {
    graph_.check_complete();
    if (!options_.tuning) options_.tuning = std::make_shared<TuningCache>();
    if (options_.block < 1 || options_.block > 1024) throw std::invalid_argument("--block must be from 1 to 1024");
#if !CBI_HAVE_CUDA
    if (options_.device.cuda) throw Error("--device cuda", "this build of cbi has no CUDA backend");
#endif
}

GraphExecutor::~GraphExecutor() = default;

void GraphExecutor::plan(int width, int height, int channels, Depth depth) {
    const ImageView probe{nullptr, width, height, channels, depth, static_cast<std::size_t>(width) * channels * depth_bytes(depth)};
    check_supported(probe, "input");
    if (probe.pixels() > max_schedulable_pixels)
        throw Error("input", cbi::describe(probe) + " has more than 2^32-1 pixels, the most a schedule can index");

    auto plan = std::make_unique<Plan>();
    plan->width = width, plan->height = height, plan->channels = channels, plan->depth = depth;
    plan->channels_of = node_channels(graph_, channels);

    // Only nodes that feed an output run. Node ids are already topological:
    // every node's inputs were added before it.
    const auto& nodes = graph_.nodes();
    std::vector<bool> needed(nodes.size(), false);
    for (NodeId o : graph_.outputs()) needed[o] = true;
    for (NodeId id = static_cast<NodeId>(nodes.size()) - 1; id > 0; --id)
        if (needed[id])
            for (NodeId in : nodes[id].inputs) needed[in] = true;
    for (NodeId id = 1; id < static_cast<NodeId>(nodes.size()); ++id)
        if (needed[id]) plan->order.push_back(id);

    // Readers of each node's output, and whether a stencil may compute the
    // colour node it reads (fusion, on the GPU only, RunOptions::fuse: a
    // colour node read only by one stencil is not stored; the stencil
    // applies the matrix to each sample it stages, ColorSource).
    std::vector<int> readers(nodes.size(), 0);
    for (NodeId id : plan->order)
        for (NodeId in : nodes[id].inputs) ++readers[in];
    for (NodeId o : graph_.outputs()) ++readers[o];
    const bool fusing = options_.fuse && options_.device.cuda;
    const auto colour_producer = [&](NodeId id) -> const ColorFilter* {
        const auto* filter = std::get_if<Filter>(&nodes[id].op);
        if (!fusing || !filter || std::holds_alternative<ColorFilter>(*filter)) return nullptr;
        const NodeId in = nodes[id].inputs[0];
        const auto* pre = in == Graph::input() ? nullptr : std::get_if<Filter>(&nodes[in].op);
        return pre && readers[in] == 1 ? std::get_if<ColorFilter>(pre) : nullptr;
    };

    // Schedules: given ones as given; default ones from the default table;
    // auto ones from the tuning cache, else timed on the first run.
    plan->schedule.assign(nodes.size(), ScheduleSpec{});
    plan->choice.assign(nodes.size(), Choice::given);
    plan->tuning_key.assign(nodes.size(), "");
    plan->format.assign(nodes.size(), NodeFormat{});
    std::string device;
    for (NodeId id : plan->order) {
        const ScheduleChoice choice = graph_.schedule_of(id);
        if (const auto* given = std::get_if<ScheduleSpec>(&choice)) {
            plan->schedule[id] = *given;
            continue;
        }
        const Border border = graph_.border_of(id);
        const NodeFormat format{depth, plan->channels_of[nodes[id].inputs[0]], options_.device.cuda};
        plan->format[id] = format;
        if (std::holds_alternative<DefaultSchedule>(choice)) {
            plan->schedule[id] = default_schedule(nodes[id].op, border, format);
            plan->choice[id] = Choice::table;
            continue;
        }
        if (device.empty()) device = device_name();
        const bool stencil = std::holds_alternative<Filter>(nodes[id].op) &&
                             !std::holds_alternative<ColorFilter>(std::get<Filter>(nodes[id].op));
        plan->tuning_key[id] = tuning_key(device, nodes[id].op_string(), stencil ? to_string(border) : "-", depth,
                                          format.channels, width, height, options_.device.cuda ? options_.block : 0);
        if (const auto hit = options_.tuning->find(plan->tuning_key[id], nodes[id].op)) {
            plan->schedule[id] = *hit;
            plan->choice[id] = Choice::cached;
        } else {
            plan->choice[id] = Choice::pending;
        }
    }

    // Fusion, decided once the schedules are chosen: a colour node into the
    // stencil that reads it where the stencil's schedule can compute it
    // (Capabilities::fuses_color), then stencil pairs (fuse_stencil_pairs).
    // Nodes still to be timed are not fused: auto times each node on its
    // own, and the executor plans again once they are tuned (run()).
    // The CPU backend runs nodes with fused colour or stencils too (C++ API,
    // tests), but its executor does not fuse: there the colour matrix runs
    // vectorised on its own (cpu_color.cpp) while a fused one is computed
    // sample by sample in the stencil's row loads. Measured on
    // color:gray | gaussian:5@sep:256x256 | sobel:mag@sep:256x256, 2048^2
    // 8u:3, 2 threads: 15-25 ms fused, 10.3-10.8 ms unfused (OpenCV's calls
    // 10.7-11.5 ms).
    plan->reads.assign(nodes.size(), {});
    plan->fused_color.assign(nodes.size(), std::nullopt);
    plan->fused_into.assign(nodes.size(), -1);
    plan->fused_stencil.assign(nodes.size(), -1);
    for (NodeId id : plan->order) plan->reads[id] = nodes[id].inputs;
    if (fusing) {
        for (NodeId id : plan->order) {
            const ColorFilter* pre = colour_producer(id);
            if (!pre || plan->choice[id] == Choice::pending ||
                !supports(plan->schedule[id], std::get<Filter>(nodes[id].op), graph_.border_of(id), Fusion{true, false}))
                continue;
            const NodeId in = nodes[id].inputs[0];
            plan->fused_color[id] = *pre;
            plan->fused_into[in] = id;
            plan->reads[id] = nodes[in].inputs;
        }
        if (options_.fuse_stencils) fuse_stencil_pairs(*plan, readers);
        std::erase_if(plan->order, [&](NodeId id) { return plan->fused_into[id] >= 0; });
    }

    // Buffers by lifetime: a node's buffer is free again once every node
    // that reads it has run; outputs keep theirs. A node never writes the
    // buffer it reads (stencils cannot run in place).
    constexpr int kForever = 1 << 30;
    std::vector<int> last_read(nodes.size(), -1);
    for (std::size_t step = 0; step < plan->order.size(); ++step)
        for (NodeId in : plan->reads[plan->order[step]]) last_read[in] = static_cast<int>(step);
    for (NodeId o : graph_.outputs()) last_read[o] = kForever;
    plan->buffer_of.assign(nodes.size(), -1);
    std::vector<bool> buffer_free;
    std::vector<NodeId> holders;  // nodes whose buffer is still live
    for (std::size_t step = 0; step < plan->order.size(); ++step) {
        for (auto it = holders.begin(); it != holders.end();)
            if (last_read[*it] < static_cast<int>(step)) {
                buffer_free[plan->buffer_of[*it]] = true;
                it = holders.erase(it);
            } else {
                ++it;
            }
        const NodeId id = plan->order[step];
        const int want = plan->channels_of[id];
        int best = -1;
        for (std::size_t b = 0; b < buffer_free.size(); ++b)
            if (buffer_free[b] && plan->buffer_channels[b] >= want &&
                (best < 0 || plan->buffer_channels[b] < plan->buffer_channels[best]))
                best = static_cast<int>(b);
        if (best < 0) {
            best = static_cast<int>(plan->buffer_channels.size());
            plan->buffer_channels.push_back(want);
            buffer_free.push_back(false);
        }
        buffer_free[best] = false;
        plan->buffer_of[id] = best;
        holders.push_back(id);
    }

    host_buffers_.clear();
    cuda_.reset();
    prepared_ = ran_ = false;
    plan_ = std::move(plan);
    outputs_.assign(graph_.outputs().size(), ImageView{});
}

bool GraphExecutor::planned_for(int width, int height, int channels, Depth depth) const {
    return plan_ && plan_->width == width && plan_->height == height && plan_->channels == channels && plan_->depth == depth;
}

void GraphExecutor::prepare(int width, int height, int channels, Depth depth) {
    if (!planned_for(width, height, channels, depth)) plan(width, height, channels, depth);
    // Allocate once for this format.
    const Plan& plan = *plan_;
    const std::size_t plane = static_cast<std::size_t>(width) * height * depth_bytes(depth);
    if (!options_.device.cuda) {
        for (int ch : plan.buffer_channels) {
            host_buffers_.emplace_back(width, height, ch, depth);
            ++allocations_;
        }
    }
#if CBI_HAVE_CUDA
    else {
        use_device(options_.device.index);
        cuda_ = std::make_unique<CudaState>();
        cuda_->input = DeviceImage(width, height, channels, depth);
        for (int ch : plan.buffer_channels) cuda_->buffers.emplace_back(plane * ch);
        cuda_->input_staging = PinnedBuffer(plane * channels);
        for (NodeId o : graph_.outputs()) cuda_->output_staging.emplace_back(plane * plan.channels_of[o]);
        allocations_ += 3 + cuda_->buffers.size() + cuda_->output_staging.size();  // + stream
    }
#endif
    (void)plane;
    prepared_ = true;
}

std::string GraphExecutor::device_name() const {
#if CBI_HAVE_CUDA
    if (options_.device.cuda) return cuda_device_name(options_.device.index);
#endif
    return "cpu, " + std::to_string(tbb::this_task_arena::max_concurrency()) + " threads";
}

void GraphExecutor::tune(NodeId id, const std::function<double(const ScheduleSpec&)>& time_once) {
    Plan& plan = *plan_;
    const std::string& key = plan.tuning_key[id];
    std::lock_guard timing(options_.tuning->timing_mutex());
    const NodeOp& op = graph_.nodes()[id].op;
    if (const auto hit = options_.tuning->find(key, op)) {  // another executor timed it meanwhile
        plan.schedule[id] = *hit;
        plan.choice[id] = Choice::cached;
        return;
    }
    // CPU: 3 runs, and a slow warm-up drops a candidate at once (its runs are
    // long); GPU: 5 runs, the first timed one decides (first launches load modules).
    const bool cuda = options_.device.cuda;
    // Timed on their own; fused from the next plan on where the choice can.
    plan.schedule[id] =
        fastest_candidate(default_candidates(op, graph_.border_of(id), plan.format[id]), cuda ? 5 : 3, !cuda, time_once);
    plan.choice[id] = Choice::timed;
    replan_ = true;  // the next run fuses what the tuned schedules can
    options_.tuning->store(key, plan.schedule[id]);
}

std::span<const ImageView> GraphExecutor::run(const ImageView& input) {
    check_supported(input, "input");
    if (replan_) {
        replan_ = false;
        plan(input.width, input.height, input.channels, input.depth);
    }
    if (!prepared_ || !planned_for(input.width, input.height, input.channels, input.depth))
        prepare(input.width, input.height, input.channels, input.depth);
    const Plan& plan = *plan_;
    const auto& nodes = graph_.nodes();
    const auto& outs = graph_.outputs();

    if (!cuda_) {
        const auto view_of_node = [&](NodeId id) {
            return id == Graph::input() ? input : plan.view(host_buffers_[plan.buffer_of[id]].view().data, id);
        };
        // rows: the band of rows a tuning run computes (every row otherwise).
        const auto run_node = [&](NodeId id, const ScheduleSpec& schedule, int first_row, int rows) {
            const GraphNode& n = nodes[id];
            const auto band = [&](ImageView v) {
                v.data += static_cast<std::size_t>(first_row) * v.stride;
                v.height = rows;
                return v;
            };
            const ImageView dst = band(view_of_node(id));
            if (std::holds_alternative<Filter>(n.op))
                run_node_cpu(node_to_run(id, schedule), band(view_of_node(plan.reads[id][0])), dst);
            else
                run_blend_cpu(std::get<BlendFilter>(n.op), schedule, band(view_of_node(n.inputs[0])),
                              band(view_of_node(n.inputs[1])), dst);
        };
        // CPU tuning times the candidates on a band of rows from the middle
        // of the node's input (an eighth of a large image): a run of a
        // candidate then costs an eighth of a run of the node.
        const int band_rows = std::min(plan.height, std::max(kTuningBandRows, plan.height / 8));
        const int band_first = (plan.height - band_rows) / 2;
        for (NodeId id : plan.order) {
            if (plan.choice[id] == Choice::pending)
                tune(id, [&](const ScheduleSpec& s) {
                    const auto t0 = std::chrono::steady_clock::now();
                    run_node(id, s, band_first, band_rows);
                    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
                });
            run_node(id, plan.schedule[id], 0, plan.height);
        }
        for (std::size_t i = 0; i < outs.size(); ++i) outputs_[i] = view_of_node(outs[i]);
        return outputs_;
    }
#if CBI_HAVE_CUDA
    CudaState& cu = *cuda_;
    const cudaStream_t stream = cu.stream.get();
    const auto device_view = [&](NodeId id) {
        return id == Graph::input() ? cu.input.view : plan.view(cu.buffers[plan.buffer_of[id]].data(), id);
    };
    // Stage through pinned memory so the copies are asynchronous DMA.
    const ImageView staged = plan.view(cu.input_staging.data(), Graph::input());
    copy_pixels(input, staged);
    upload(staged, cu.input.view, stream);
    enqueue_nodes_cuda();
    for (std::size_t i = 0; i < outs.size(); ++i) {
        outputs_[i] = plan.view(cu.output_staging[i].data(), outs[i]);
        download(device_view(outs[i]), outputs_[i], stream);
    }
    cu.stream.synchronize("cudaStreamSynchronize after the graph");
    ran_ = true;
#endif
    return outputs_;
}

#if CBI_HAVE_CUDA
// Enqueues every node on the stream (timing pending auto nodes first), reading
// the device copy of the input.
void GraphExecutor::enqueue_nodes_cuda() {
    Plan& plan = *plan_;
    const auto& nodes = graph_.nodes();
    CudaState& cu = *cuda_;
    const cudaStream_t stream = cu.stream.get();
    const auto device_view = [&](NodeId id) {
        return id == Graph::input() ? cu.input.view : plan.view(cu.buffers[plan.buffer_of[id]].data(), id);
    };
    const auto run_node = [&](NodeId id, const ScheduleSpec& schedule) {
        const GraphNode& n = nodes[id];
        const ImageView dst = device_view(id);
        if (std::holds_alternative<Filter>(n.op))
            run_node_cuda(node_to_run(id, schedule), device_view(plan.reads[id][0]), dst, stream, options_.block);
        else
            run_blend_cuda(std::get<BlendFilter>(n.op), schedule, device_view(n.inputs[0]), device_view(n.inputs[1]), dst,
                           stream, options_.block);
    };
    for (NodeId id : plan.order) {
        if (plan.choice[id] == Choice::pending) {
            EventTimer timer;
            tune(id, [&](const ScheduleSpec& s) {
                timer.start(stream);
                run_node(id, s);
                return static_cast<double>(timer.stop_ms(stream));
            });
        }
        run_node(id, plan.schedule[id]);
    }
}
#endif

float GraphExecutor::time_kernels_ms() {
#if CBI_HAVE_CUDA
    if (!cuda_ || !ran_) throw std::logic_error("GraphExecutor::time_kernels_ms needs a CUDA executor that has run");
    EventTimer timer;
    timer.start(cuda_->stream.get());
    enqueue_nodes_cuda();
    return timer.stop_ms(cuda_->stream.get());
#else
    throw std::logic_error("GraphExecutor::time_kernels_ms needs a CUDA executor that has run");
#endif
}

Image GraphExecutor::process(const ImageView& input) {
    const ImageView out = run(input).front();
    Image copy(out.width, out.height, out.channels, out.depth);
    copy_pixels(out, copy.view());
    return copy;
}

int GraphExecutor::channels_of(NodeId id) const {
    if (!plan_) throw std::logic_error("GraphExecutor::channels_of before plan");
    return plan_->channels_of.at(static_cast<std::size_t>(id));
}

ScheduleSpec GraphExecutor::schedule_of(NodeId id) const {
    if (!plan_) throw std::logic_error("GraphExecutor::schedule_of before prepare");
    return plan_->schedule.at(static_cast<std::size_t>(id));
}

std::string GraphExecutor::describe() const {
    std::ostringstream s;
    const auto& nodes = graph_.nodes();
    s << "pipeline on " << (options_.device.cuda ? "cuda:" + std::to_string(options_.device.index) : std::string("cpu"));
    if (plan_) s << ", input " << cbi::describe(ImageView{nullptr, plan_->width, plan_->height, plan_->channels, plan_->depth, 0});
    s << "\n";
    // The schedule and where it came from: given, the default table, auto.
    const auto schedule_text = [&](NodeId id) {
        std::string text = to_string(graph_.schedule_of(id));
        if (!plan_ || plan_->buffer_of[id] < 0) return text;
        const std::string spec = plan_->schedule[id].to_string();
        switch (plan_->choice[id]) {
            case Choice::given: return spec + " (given)";
            case Choice::table: {
                const auto* fixed = std::get_if<ScheduleSpec>(&graph_.default_schedule());
                return spec + (fixed && !nodes[id].options.schedule
                                   ? " (default table: " + fixed->to_string() + " cannot run it)"
                                   : std::string(" (default table)"));
            }
            case Choice::cached: return spec + " (auto, cached)";
            case Choice::timed: return spec + " (auto, timed)";
            case Choice::pending: return std::string("auto (timed on the first run)");
        }
        return text;
    };
    std::size_t name_width = 5, op_width = 8, schedule_width = 12;
    for (NodeId id = 1; id < static_cast<NodeId>(nodes.size()); ++id) {
        name_width = std::max(name_width, nodes[id].name.size());
        op_width = std::max(op_width, nodes[id].op_string().size());
        schedule_width = std::max(schedule_width, schedule_text(id).size());
    }
    for (NodeId id = 1; id < static_cast<NodeId>(nodes.size()); ++id) {
        const GraphNode& n = nodes[id];
        std::string inputs;
        for (NodeId in : n.inputs) inputs += (inputs.empty() ? "" : ", ") + nodes[in].name;
        s << "  " << std::left << std::setw(static_cast<int>(name_width)) << n.name << "  "
          << std::setw(static_cast<int>(op_width)) << n.op_string() << "  @" << std::setw(static_cast<int>(schedule_width))
          << schedule_text(id);
        if (std::holds_alternative<Filter>(n.op) && !std::holds_alternative<ColorFilter>(std::get<Filter>(n.op)))
            s << "  border " << std::setw(12) << to_string(graph_.border_of(id));
        else
            s << "  " << std::setw(19) << "";
        s << "  <- " << inputs;
        if (plan_ && plan_->fused_stencil[id] >= 0) {
            const NodeId first = plan_->fused_stencil[id];
            s << "  (fused: computes " << nodes[first].name << " in shared memory, reading " << nodes[plan_->reads[id][0]].name;
            if (plan_->fused_color[id]) s << " through " << to_string(Filter(*plan_->fused_color[id]));
            s << ")";
        } else if (plan_ && plan_->fused_color[id]) {
            s << "  (fused: reads " << nodes[plan_->reads[id][0]].name << " through " << to_string(Filter(*plan_->fused_color[id]))
              << ")";
        }
        if (plan_) {
            if (plan_->fused_into[id] >= 0) s << "  -> fused into " << nodes[plan_->fused_into[id]].name << ", not stored";
            else if (plan_->buffer_of[id] < 0) s << "  (not needed by any output: skipped)";
            else s << "  -> buffer " << plan_->buffer_of[id] << " (" << plan_->channels_of[id] << " ch)";
        }
        for (std::size_t o = 0; o < graph_.outputs().size(); ++o)
            if (graph_.outputs()[o] == id) s << "  [output " << o << "]";
        s << "\n";
    }
    if (plan_) {
        const std::size_t plane = static_cast<std::size_t>(plan_->width) * plan_->height * depth_bytes(plan_->depth);
        std::size_t bytes = 0;
        for (int ch : plan_->buffer_channels) bytes += plane * ch;
        const auto stencils = std::count_if(plan_->fused_stencil.begin(), plan_->fused_stencil.end(), [](NodeId n) { return n >= 0; });
        const auto colours = std::count_if(plan_->fused_into.begin(), plan_->fused_into.end(), [](NodeId n) { return n >= 0; }) - stencils;
        s << "  " << plan_->order.size() << " kernels run";
        if (colours > 0) s << " (" << colours << " colour node" << (colours > 1 ? "s" : "") << " fused)";
        if (stencils > 0) s << " (" << stencils << " stencil" << (stencils > 1 ? "s" : "") << " fused into the next)";
        s << ", " << plan_->buffer_channels.size() << " buffers ("
          << std::fixed << std::setprecision(1) << bytes / 1048576.0 << " MiB) reused by lifetime\n";
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
