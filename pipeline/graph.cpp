#include "pipeline/graph.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "pipeline/error.hpp"

namespace cbi {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void invalid(const std::string& message) { throw std::invalid_argument(message); }

bool valid_name(std::string_view name) {
    if (name.empty()) return false;
    for (char c : name)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return false;
    return true;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
}

}  // namespace

ScheduleChoice parse_schedule_choice(std::string_view text) {
    if (text == "auto") return AutoSchedule{};
    try {
        return parse_schedule(text);
    } catch (const std::invalid_argument& e) {
        invalid(std::string(e.what()) + ", or auto");
    }
}

std::string to_string(const ScheduleChoice& choice) {
    if (const auto* s = std::get_if<ScheduleSpec>(&choice)) return s->to_string();
    return "auto";
}

std::string GraphNode::op_string() const {
    if (const auto* f = std::get_if<Filter>(&op)) return to_string(*f);
    if (const auto* b = std::get_if<BlendFilter>(&op)) return to_string(*b);
    return "input";
}

Graph::Graph() { nodes_.push_back(GraphNode{"input", std::monostate{}, {}, {}}); }

NodeId Graph::add(GraphNode node) {
    if (!valid_name(node.name))
        invalid("node name '" + node.name + "' must be letters, digits, '_', '-' or '.'");
    for (const auto& n : nodes_)
        if (n.name == node.name) invalid("node '" + node.name + "': the name is used twice");
    for (NodeId in : node.inputs)
        if (in < 0 || in >= static_cast<NodeId>(nodes_.size()))
            invalid("node '" + node.name + "': input " + std::to_string(in) + " does not exist");
    nodes_.push_back(std::move(node));
    return static_cast<NodeId>(nodes_.size()) - 1;
}

NodeId Graph::add_filter(std::string name, const Filter& filter, NodeId input, NodeOptions options) {
    if (options.schedule && std::holds_alternative<ScheduleSpec>(*options.schedule)) {
        try {
            check_schedule_supports(std::get<ScheduleSpec>(*options.schedule), filter);
        } catch (const std::invalid_argument& e) {
            invalid("node '" + name + "': " + e.what());
        }
    }
    return add(GraphNode{std::move(name), filter, {input}, options});
}

NodeId Graph::add_blend(std::string name, const BlendFilter& blend, NodeId a, NodeId b, NodeOptions options) {
    if (options.schedule && std::holds_alternative<ScheduleSpec>(*options.schedule)) {
        try {
            check_schedule_supports(std::get<ScheduleSpec>(*options.schedule), blend);
        } catch (const std::invalid_argument& e) {
            invalid("node '" + name + "': " + e.what());
        }
    }
    return add(GraphNode{std::move(name), blend, {a, b}, options});
}

ScheduleChoice Graph::schedule_of(NodeId id) const {
    const GraphNode& n = nodes_[id];
    if (n.options.schedule) return *n.options.schedule;
    const auto* fixed = std::get_if<ScheduleSpec>(&default_schedule_);
    if (!fixed) return default_schedule_;
    // A default the node's filter cannot take falls back: stencils that
    // stream:WxH does not run take sep:WxH, everything else naive.
    const auto* filter = std::get_if<Filter>(&n.op);
    if (filter ? schedule_supports(*fixed, *filter) : schedule_entry(*fixed).pointwise) return *fixed;
    if (filter && fixed->family == ScheduleFamily::stream && !std::holds_alternative<ColorFilter>(*filter))
        return ScheduleSpec{ScheduleFamily::sep, fixed->width, fixed->height};
    return ScheduleSpec{};
}

void Graph::add_output(NodeId node) {
    if (node < 0 || node >= static_cast<NodeId>(nodes_.size())) invalid("output " + std::to_string(node) + " does not exist");
    for (NodeId o : outputs_)
        if (o == node) invalid("node '" + nodes_[node].name + "' is an output twice");
    outputs_.push_back(node);
}

NodeId Graph::find(std::string_view name) const {
    for (std::size_t i = 0; i < nodes_.size(); ++i)
        if (nodes_[i].name == name) return static_cast<NodeId>(i);
    invalid("no node named '" + std::string(name) + "'");
}

void Graph::check_complete() const {
    if (outputs_.empty()) invalid("the pipeline has no output");
}

bool operator==(const Graph& a, const Graph& b) {
    if (a.nodes_.size() != b.nodes_.size() || a.outputs_ != b.outputs_ ||
        to_string(a.default_schedule_) != to_string(b.default_schedule_) || to_string(a.default_border_) != to_string(b.default_border_))
        return false;
    for (std::size_t i = 0; i < a.nodes_.size(); ++i) {
        const auto &x = a.nodes_[i], &y = b.nodes_[i];
        const auto sched = [](const NodeOptions& o) { return o.schedule ? to_string(*o.schedule) : ""; };
        const auto border = [](const NodeOptions& o) { return o.border ? to_string(*o.border) : ""; };
        if (x.name != y.name || x.op_string() != y.op_string() || x.inputs != y.inputs ||
            sched(x.options) != sched(y.options) || border(x.options) != border(y.options))
            return false;
    }
    return true;
}

Graph chain_graph(std::span<const Node> nodes) {
    Graph g;
    NodeId last = Graph::input();
    for (std::size_t i = 0; i < nodes.size(); ++i)
        last = g.add_filter("n" + std::to_string(i + 1), nodes[i].filter, last,
                            NodeOptions{nodes[i].schedule, nodes[i].border});
    g.add_output(last);
    return g;
}

Graph parse_pipeline(std::string_view text, const ScheduleChoice& default_schedule, const Border& default_border) {
    Graph g;
    g.set_default_schedule(default_schedule);
    g.set_default_border(default_border);
    NodeId last = Graph::input();
    std::size_t start = 0;
    int stage = 0;
    while (start <= text.size()) {
        const std::size_t bar = std::min(text.find('|', start), text.size());
        const std::string_view raw = text.substr(start, bar - start);
        const std::string_view token = trim(raw);
        const std::size_t column = start + (token.empty() ? 0 : token.data() - raw.data()) + 1;
        ++stage;
        const auto where = "stage " + std::to_string(stage) + " '" + std::string(token) + "' (column " +
                           std::to_string(column) + "): ";
        if (token.empty()) invalid(where + "empty stage; stages are FILTER[@SCHEDULE] separated by '|'");
        try {
            const auto at = token.find('@');
            NodeOptions options;
            if (at != std::string_view::npos) options.schedule = parse_schedule_choice(token.substr(at + 1));
            const Filter filter = parse_filter(token.substr(0, at));
            last = g.add_filter("n" + std::to_string(stage), filter, last, options);
        } catch (const std::invalid_argument& e) {
            invalid(where + e.what());
        }
        start = bar + 1;
    }
    g.add_output(last);
    return g;
}

Graph graph_from_json(std::string_view json_text) {
    using nlohmann::json;
    json doc;
    try {
        doc = json::parse(json_text);
    } catch (const json::parse_error& e) {
        invalid(std::string("not valid JSON: ") + e.what());
    }
    if (!doc.is_object()) invalid("the pipeline must be a JSON object with \"nodes\" and \"outputs\"");
    const auto text_field = [](const json& obj, const char* key, const std::string& where) -> std::optional<std::string> {
        if (!obj.contains(key)) return std::nullopt;
        if (!obj[key].is_string()) invalid(where + "\"" + key + "\" must be a string");
        return obj[key].get<std::string>();
    };
    for (const auto& [key, value] : doc.items())
        if (key != "nodes" && key != "outputs" && key != "schedule" && key != "border")
            invalid("unknown field \"" + key + "\" (nodes, outputs, schedule, border)");
    Graph g;
    try {
        if (auto s = text_field(doc, "schedule", "")) g.set_default_schedule(parse_schedule_choice(*s));
        if (auto b = text_field(doc, "border", "")) g.set_default_border(parse_border(*b));
    } catch (const std::invalid_argument& e) {
        invalid(std::string("pipeline defaults: ") + e.what());
    }
    if (!doc.contains("nodes") || !doc["nodes"].is_array()) invalid("\"nodes\" must be an array of node objects");

    // Read every node, then add them in dependency order so that edges may
    // name nodes defined later; what never becomes ready is a cycle.
    struct Pending {
        std::string name;
        std::variant<std::monostate, Filter, BlendFilter> op;
        std::vector<std::string> inputs;
        NodeOptions options;
    };
    std::vector<Pending> pending;
    for (const json& n : doc["nodes"]) {
        if (!n.is_object()) invalid("each node must be an object");
        const auto name = text_field(n, "name", "node: ");
        if (!name) invalid("a node has no \"name\"");
        const std::string where = "node '" + *name + "': ";
        Pending p{*name, {}, {}, {}};
        try {
            for (const auto& [key, value] : n.items())
                if (key != "name" && key != "filter" && key != "blend" && key != "input" && key != "inputs" &&
                    key != "schedule" && key != "border")
                    invalid("unknown field \"" + key + "\" (name, filter, blend, input, inputs, schedule, border)");
            const auto filter = text_field(n, "filter", where);
            const auto blend = text_field(n, "blend", where);
            if (filter.has_value() == blend.has_value()) invalid("needs exactly one of \"filter\" and \"blend\"");
            if (filter) p.op = parse_filter(*filter);
            else p.op = parse_blend(blend->starts_with("blend:") ? blend->substr(6) : *blend);
            if (n.contains("inputs")) {
                if (!n["inputs"].is_array()) invalid("\"inputs\" must be an array of node names");
                for (const json& in : n["inputs"]) {
                    if (!in.is_string()) invalid("\"inputs\" must be an array of node names");
                    p.inputs.push_back(in.get<std::string>());
                }
            } else if (auto in = text_field(n, "input", where)) {
                p.inputs.push_back(*in);
            } else {
                invalid("has no \"input\"");
            }
            const std::size_t want = filter ? 1 : 2;
            if (p.inputs.size() != want)
                invalid(std::string(filter ? "a filter takes 1 input" : "a blend takes 2 inputs") + ", got " +
                        std::to_string(p.inputs.size()));
            if (auto s = text_field(n, "schedule", where)) p.options.schedule = parse_schedule_choice(*s);
            if (auto b = text_field(n, "border", where)) p.options.border = parse_border(*b);
        } catch (const std::invalid_argument& e) {
            if (std::string(e.what()).starts_with(where)) throw;
            invalid(where + e.what());
        }
        pending.push_back(std::move(p));
    }
    std::map<std::string, NodeId> added{{"input", Graph::input()}};
    for (const auto& p : pending)
        for (const auto& in : p.inputs) {
            bool known = in == "input";
            for (const auto& q : pending) known = known || q.name == in;
            if (!known) invalid("node '" + p.name + "': input '" + in + "' is not a node");
        }
    std::vector<bool> done(pending.size(), false);
    for (std::size_t round = 0; round < pending.size(); ++round) {
        bool progressed = false;
        for (std::size_t i = 0; i < pending.size(); ++i) {
            if (done[i]) continue;
            const auto& p = pending[i];
            std::vector<NodeId> ids;
            for (const auto& in : p.inputs)
                if (auto it = added.find(in); it != added.end()) ids.push_back(it->second);
            if (ids.size() != p.inputs.size()) continue;
            const NodeId id = std::holds_alternative<Filter>(p.op)
                                  ? g.add_filter(p.name, std::get<Filter>(p.op), ids[0], p.options)
                                  : g.add_blend(p.name, std::get<BlendFilter>(p.op), ids[0], ids[1], p.options);
            added[p.name] = id;
            done[i] = progressed = true;
        }
        if (!progressed) break;
    }
    for (std::size_t i = 0; i < pending.size(); ++i)
        if (!done[i]) invalid("node '" + pending[i].name + "' is part of a cycle");

    if (!doc.contains("outputs") || !doc["outputs"].is_array() || doc["outputs"].empty())
        invalid("\"outputs\" must be a non-empty array of node names");
    for (const json& o : doc["outputs"]) {
        if (!o.is_string()) invalid("\"outputs\" must be an array of node names");
        g.add_output(g.find(o.get<std::string>()));
    }
    return g;
}

Graph load_pipeline_file(const std::filesystem::path& path) {
    std::error_code ec;
    if (fs::exists(path, ec) && !fs::is_regular_file(path, ec))
        throw Error(path.string(), "the pipeline file is not a regular file");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path.string(), "cannot open the pipeline file");
    std::ostringstream text;
    text << in.rdbuf();
    try {
        return graph_from_json(text.str());
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(path.string() + ": " + e.what());
    }
}

std::string graph_to_json(const Graph& g) {
    nlohmann::ordered_json doc;
    doc["schedule"] = to_string(g.default_schedule());
    doc["border"] = to_string(g.default_border());
    doc["nodes"] = nlohmann::ordered_json::array();
    for (const auto& n : g.nodes()) {
        if (n.is_input()) continue;
        nlohmann::ordered_json node;
        node["name"] = n.name;
        if (std::holds_alternative<Filter>(n.op)) {
            node["filter"] = n.op_string();
            node["input"] = g.nodes()[n.inputs[0]].name;
        } else {
            node["blend"] = n.op_string();
            node["inputs"] = {g.nodes()[n.inputs[0]].name, g.nodes()[n.inputs[1]].name};
        }
        if (n.options.schedule) node["schedule"] = to_string(*n.options.schedule);
        if (n.options.border) node["border"] = to_string(*n.options.border);
        doc["nodes"].push_back(node);
    }
    doc["outputs"] = nlohmann::ordered_json::array();
    for (NodeId o : g.outputs()) doc["outputs"].push_back(g.nodes()[o].name);
    return doc.dump(2) + "\n";
}

std::vector<int> node_channels(const Graph& g, int channels) {
    std::vector<int> out(g.nodes().size(), channels);
    for (std::size_t i = 1; i < g.nodes().size(); ++i) {
        const GraphNode& n = g.nodes()[i];
        try {
            if (const auto* f = std::get_if<Filter>(&n.op)) {
                out[i] = output_channels(*f, out[n.inputs[0]]);
            } else {
                const int a = out[n.inputs[0]], b = out[n.inputs[1]];
                if (a != b)
                    throw Error("", "blend inputs '" + g.nodes()[n.inputs[0]].name + "' and '" +
                                        g.nodes()[n.inputs[1]].name + "' have " + std::to_string(a) + " and " +
                                        std::to_string(b) + " channels");
                out[i] = a;
            }
        } catch (const Error& e) {
            throw Error("node '" + n.name + "'", e.what());
        }
    }
    return out;
}

}  // namespace cbi
