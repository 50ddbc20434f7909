#pragma once
// A pipeline graph: a DAG whose nodes are filters (one input) or blends
// (two inputs), each with its own schedule and border (or the graph's
// defaults), fed by one input image, with one or more outputs. Structure is
// validated as the graph is built; channel counts when an executor is
// prepared for an image format, before any pixel is touched.
//
// Two textual forms:
//   pipeline text    "color:gray | gaussian:5:1.2@column:32 | sobel:mag@tile:32x8"
//   JSON (DAGs)      {"schedule": "column:32", "border": "reflect101",
//                     "nodes": [{"name": "blurred", "filter": "gaussian:9:2", "input": "input"},
//                               {"name": "sharp", "blend": "blend:1.5:-0.5", "inputs": ["input", "blurred"],
//                                "schedule": "tile:32x8"}],
//                     "outputs": ["sharp"]}
// "input" names the graph's input image.
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "filters/filter.hpp"

namespace cbi {

using NodeId = int;

// "default" (what a node without a schedule runs): the default table's
// schedule for the node's backend, filter and format (pipeline/defaults.hpp).
struct DefaultSchedule {
    friend bool operator==(DefaultSchedule, DefaultSchedule) = default;
};
// "auto": the executor times the default table's candidates for the node on
// its first run and keeps the fastest (pipeline/tuning.hpp).
struct AutoSchedule {
    friend bool operator==(AutoSchedule, AutoSchedule) = default;
};
using ScheduleChoice = std::variant<DefaultSchedule, ScheduleSpec, AutoSchedule>;
// "default", "auto" or a registered schedule; throws std::invalid_argument.
ScheduleChoice parse_schedule_choice(std::string_view text);
std::string to_string(const ScheduleChoice& choice);

struct NodeOptions {
    std::optional<ScheduleChoice> schedule;  // empty: the graph's default
    std::optional<Border> border;            // empty: the graph's default
    friend bool operator==(const NodeOptions&, const NodeOptions&) = default;
};

// What a node computes; monostate is the graph input.
using NodeOp = std::variant<std::monostate, Filter, BlendFilter>;
// cbi::supports for either kind of node (border and fusion as given).
bool supports(const ScheduleSpec& schedule, const NodeOp& op, const Border& border = {}, Fusion fusion = {});

struct GraphNode {
    std::string name;
    NodeOp op;
    std::vector<NodeId> inputs;  // 0, 1 or 2 (blend: A, B)
    NodeOptions options;

    bool is_input() const { return std::holds_alternative<std::monostate>(op); }
    std::string op_string() const;  // "gaussian:5", "blend:1:1:0", "input"
    friend bool operator==(const GraphNode&, const GraphNode&) = default;
};

class Graph {
public:
    // A graph always has its input, node 0, named "input".
    Graph();

    // Structural mistakes (a name used twice, a missing input) throw
    // std::invalid_argument; a schedule the node's filter cannot run,
    // cbi::Unsupported naming the node and the schedules that can.
    NodeId add_filter(std::string name, const Filter& filter, NodeId input, NodeOptions options = {});
    NodeId add_blend(std::string name, const BlendFilter& blend, NodeId a, NodeId b, NodeOptions options = {});
    void add_output(NodeId node);
    // Room for `nodes` nodes (the input included), so a large graph is built
    // without regrowing.
    void reserve(std::size_t nodes);

    void set_default_schedule(const ScheduleChoice& s) { default_schedule_ = s; }
    void set_default_border(const std::optional<Border>& b) { default_border_ = b; }
    const ScheduleChoice& default_schedule() const { return default_schedule_; }
    // Empty: each node without a border takes its kind's default
    // (default_border_of: reflect101, or OpenCV's default for the function).
    const std::optional<Border>& default_border() const { return default_border_; }

    static constexpr NodeId input() { return 0; }
    const std::vector<GraphNode>& nodes() const { return nodes_; }
    const std::vector<NodeId>& outputs() const { return outputs_; }
    // The node named `name` (a hash lookup); throws std::invalid_argument if none.
    NodeId find(std::string_view name) const;

    // The node's own schedule, else the graph's default; a fixed default that
    // the node cannot run (smem:WxH for a colour matrix) leaves that node to
    // the default table (GraphExecutor::describe says so).
    ScheduleChoice schedule_of(NodeId id) const;
    // The node's own border, else the graph's default, else its kind's.
    Border border_of(NodeId id) const;

    // Throws std::invalid_argument naming the graph when it has no output.
    void check_complete() const;

    // Compares values: nodes (names, parameters, inputs, options), outputs
    // and defaults; two sigmas differing in the last bit differ.
    friend bool operator==(const Graph& a, const Graph& b);

private:
    NodeId add(GraphNode node);

    // Building stays linear in the node count (a 1M-node JSON chain loads in
    // seconds): names and outputs are checked through these, not by scans.
    std::vector<GraphNode> nodes_;
    std::unordered_map<std::string, NodeId> ids_;  // name -> node
    std::vector<NodeId> outputs_;
    std::vector<bool> is_output_;  // by node id
    ScheduleChoice default_schedule_;
    std::optional<Border> default_border_;
};

// A sequence: single-input filters, each output feeding the next (a
// linear graph).
Graph sequence_graph(std::span<const FilterRun> nodes);

// The pipeline language (--pipeline): stages separated by '|', each FILTER[@SCHEDULE]
// (SCHEDULE may be "auto").
// Throws std::invalid_argument (malformed text) or cbi::Unsupported (a
// stage's schedule cannot run its filter) pointing at the stage and column.
Graph parse_pipeline(std::string_view text, const ScheduleChoice& default_schedule = DefaultSchedule{},
                     const std::optional<Border>& default_border = std::nullopt);

// JSON form (see above). Errors name the node or field; std::invalid_argument
// for malformed content, cbi::Unsupported for a node's schedule that cannot
// run it, cbi::Error for unreadable files.
Graph graph_from_json(std::string_view json_text);
Graph load_pipeline_file(const std::filesystem::path& path);
std::string graph_to_json(const Graph& graph);

// The graph with each node of a compound kind (expansion_of: open, close,
// adaptive, ...) replaced by its steps, the last keeping the node's name and
// the others named "NAME.1", "NAME.2", ...; `ids` maps each node of `graph`
// to its node (its last step) in the result. A step takes its fixed border,
// else the node's own, else the graph's default, else its kind's default;
// and the node's schedule where that schedule can run it. `cuda`: the steps
// for the CUDA backend, else for the CPU: its row kernels, or per pixel
// where the node's schedule is a fixed one other than naive (expansion_of).
struct ExpandedGraph {
    Graph graph;
    std::vector<NodeId> ids;
};
ExpandedGraph expand_compound(const Graph& graph, bool cuda = true);

// Output channels of every node for an input of `channels` channels;
// throws cbi::Error naming the node that cannot take its input.
std::vector<int> node_channels(const Graph& graph, int channels);

}  // namespace cbi
