#include "pipeline/graph.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include "filters/kinds/args.hpp"
#include "pipeline/error.hpp"

namespace cbi {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void invalid(const std::string& message) {
    throw std::invalid_argument(message);
}

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

// Text from the file as it may appear inside one line of an error message:
// control characters and quotes escaped as JSON writes them, bytes that are
// not UTF-8 replaced.
std::string printable(std::string_view text) {
    const std::string quoted =
        nlohmann::json(std::string(text)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return quoted.substr(1, quoted.size() - 2);
}

// nlohmann's own DOM builder behind a check that no object repeats a key
// (json::parse keeps the last of two equal keys without a word: a node with
// two "filter"s would silently lose one). Linear: the keys of each open
// object are kept while it is open, in a short list or, past 16 keys, a hash
// set. (json::parse's callback form rescans the parent after every closed
// object: quadratic in the node count.)
class StrictDom {
public:
    using json = nlohmann::json;
    using number_integer_t = json::number_integer_t;
    using number_unsigned_t = json::number_unsigned_t;
    using number_float_t = json::number_float_t;
    using string_t = json::string_t;
    using binary_t = json::binary_t;

    explicit StrictDom(json& root) : dom_(root, true) {}

    bool null() { return element(), dom_.null(); }
    bool boolean(bool v) { return element(), dom_.boolean(v); }
    bool number_integer(number_integer_t v) { return element(), dom_.number_integer(v); }
    bool number_unsigned(number_unsigned_t v) { return element(), dom_.number_unsigned(v); }
    bool number_float(number_float_t v, const string_t& s) { return element(), dom_.number_float(v, s); }
    bool binary(binary_t& v) { return element(), dom_.binary(v); }
    bool string(string_t& v) {
        element();
        if (in_node() && frames_[2].key == "name" && frames_[2].node_name.empty()) frames_[2].node_name = v;
        return dom_.string(v);
    }
    bool start_object(std::size_t n) { return element(), push(true), dom_.start_object(n); }
    bool end_object() { return --depth_, dom_.end_object(); }
    bool start_array(std::size_t n) { return element(), push(false), dom_.start_array(n); }
    bool end_array() { return --depth_, dom_.end_array(); }
    bool key(string_t& k) {
        Frame& f = frames_[depth_ - 1];
        bool seen;
        if (f.many.empty()) {
            seen = std::find(f.keys.begin(), f.keys.end(), k) != f.keys.end();
            if (!seen) f.keys.push_back(k);
            if (f.keys.size() > 16) f.many.insert(f.keys.begin(), f.keys.end());
        } else {
            seen = !f.many.insert(k).second;
        }
        if (seen) invalid(duplicate(k));
        f.key = k;
        return dom_.key(k);
    }
    template <class Exception>
    bool parse_error(std::size_t position, const std::string& token, const Exception& e) {
        return dom_.parse_error(position, token, e);
    }

private:
    struct Frame {
        bool object = false;
        std::size_t elements = 0;  // arrays: elements begun so far
        std::string key;           // objects: the key being read
        std::string node_name;     // a node's "name", once read
        std::vector<std::string> keys;
        std::unordered_set<std::string> many;
    };

    // A value, object or array begins: count it in the array holding it.
    void element() {
        if (depth_ > 0 && !frames_[depth_ - 1].object) ++frames_[depth_ - 1].elements;
    }
    // Frames are reused, so a million node objects allocate no frame each.
    void push(bool object) {
        if (frames_.size() == depth_) frames_.emplace_back();
        Frame& f = frames_[depth_++];
        f.object = object;
        f.elements = 0;
        f.key.clear();
        f.node_name.clear();
        f.keys.clear();
        if (!f.many.empty()) std::unordered_set<std::string>().swap(f.many);  // clear() would keep the buckets
    }
    // Inside an object of the top-level "nodes" array.
    bool in_node() const {
        return depth_ == 3 && frames_[0].object && frames_[0].key == "nodes" && !frames_[1].object && frames_[2].object;
    }
    std::string duplicate(const std::string& k) const {
        const std::string what = "duplicate key \"" + printable(k) + "\"";
        if (depth_ == 1) return what + " in the pipeline object";
        if (in_node()) {
            const std::string at = "nodes[" + std::to_string(frames_[1].elements - 1) + "]";
            const std::string& name = frames_[2].node_name;
            return (name.empty() ? at : "node '" + printable(name) + "' (" + at + ")") + ": " + what;
        }
        std::string path;
        for (std::size_t d = 0; d + 1 < depth_; ++d)
            path += frames_[d].object ? (d ? "." : "") + printable(frames_[d].key)
                                      : "[" + std::to_string(frames_[d].elements - 1) + "]";
        return what + " in " + path;
    }

    std::vector<Frame> frames_;
    std::size_t depth_ = 0;
    nlohmann::detail::json_sax_dom_parser<json> dom_;
};

}  // namespace

ScheduleChoice parse_schedule_choice(std::string_view text) {
    if (text == "auto") return AutoSchedule{};
    if (text == "default") return DefaultSchedule{};
    try {
        return parse_schedule(text);
    } catch (const std::invalid_argument& e) {
        invalid(std::string(e.what()) + ", or default, or auto");
    }
}

std::string to_string(const ScheduleChoice& choice) {
    if (const auto* s = std::get_if<ScheduleSpec>(&choice)) return s->to_string();
    return std::holds_alternative<AutoSchedule>(choice) ? "auto" : "default";
}

bool supports(const ScheduleSpec& schedule, const NodeOp& op, const Border& border, Fusion fusion) {
    if (const auto* f = std::get_if<Filter>(&op)) return supports(schedule, *f, border, fusion);
    if (const auto* b = std::get_if<BlendFilter>(&op)) return supports(schedule, *b);
    return false;
}

std::string GraphNode::op_string() const {
    if (const auto* f = std::get_if<Filter>(&op)) return to_string(*f);
    if (const auto* b = std::get_if<BlendFilter>(&op)) return to_string(*b);
    return "input";
}

Graph::Graph() {
    nodes_.push_back(GraphNode{"input", std::monostate{}, {}, {}});
    ids_.emplace("input", input());
}

NodeId Graph::add(GraphNode node) {
    if (!valid_name(node.name)) invalid("node name '" + node.name + "' must be letters, digits, '_', '-' or '.'");
    for (NodeId in : node.inputs)
        if (in < 0 || in >= static_cast<NodeId>(nodes_.size()))
            invalid("node '" + node.name + "': input " + std::to_string(in) + " does not exist");
    const auto id = static_cast<NodeId>(nodes_.size());
    if (!ids_.emplace(node.name, id).second) invalid("node '" + node.name + "': the name is used twice");
    nodes_.push_back(std::move(node));
    return id;
}

void Graph::reserve(std::size_t nodes) {
    nodes_.reserve(nodes);
    ids_.reserve(nodes);
}

NodeId Graph::add_filter(std::string name, const Filter& filter, NodeId input, NodeOptions options) {
    if (options.schedule && std::holds_alternative<ScheduleSpec>(*options.schedule)) {
        try {
            check_supports(std::get<ScheduleSpec>(*options.schedule), filter);
        } catch (const Unsupported& e) {
            throw Unsupported("node '" + name + "'", e.what());
        }
    }
    return add(GraphNode{std::move(name), filter, {input}, options});
}

NodeId Graph::add_blend(std::string name, const BlendFilter& blend, NodeId a, NodeId b, NodeOptions options) {
    if (options.schedule && std::holds_alternative<ScheduleSpec>(*options.schedule)) {
        try {
            check_supports(std::get<ScheduleSpec>(*options.schedule), blend);
        } catch (const Unsupported& e) {
            throw Unsupported("node '" + name + "'", e.what());
        }
    }
    return add(GraphNode{std::move(name), blend, {a, b}, options});
}

ScheduleChoice Graph::schedule_of(NodeId id) const {
    const GraphNode& n = nodes_[id];
    if (n.options.schedule) return *n.options.schedule;
    const auto* fixed = std::get_if<ScheduleSpec>(&default_schedule_);
    if (!fixed) return default_schedule_;
    // A fixed default the node cannot run leaves it to the default table.
    if (supports(*fixed, n.op, border_of(id))) return *fixed;
    return DefaultSchedule{};
}

void Graph::add_output(NodeId node) {
    if (node < 0 || node >= static_cast<NodeId>(nodes_.size()))
        invalid("output " + std::to_string(node) + " does not exist");
    if (is_output_.size() < nodes_.size()) is_output_.resize(nodes_.size(), false);
    if (is_output_[node]) invalid("node '" + nodes_[node].name + "' is an output twice");
    is_output_[node] = true;
    outputs_.push_back(node);
}

NodeId Graph::find(std::string_view name) const {
    if (const auto it = ids_.find(std::string(name)); it != ids_.end()) return it->second;
    invalid("no node named '" + printable(name) + "'");
}

void Graph::check_complete() const {
    if (outputs_.empty()) invalid("the pipeline has no output");
}

bool operator==(const Graph& a, const Graph& b) {
    // ids_ and is_output_ follow from nodes_ and outputs_.
    return a.nodes_ == b.nodes_ && a.outputs_ == b.outputs_ && a.default_schedule_ == b.default_schedule_ &&
           a.default_border_ == b.default_border_;
}

Graph sequence_graph(std::span<const FilterRun> nodes) {
    Graph g;
    NodeId last = Graph::input();
    for (std::size_t i = 0; i < nodes.size(); ++i)
        last = g.add_filter("n" + std::to_string(i + 1), nodes[i].filter, last,
                            NodeOptions{nodes[i].schedule, nodes[i].border});
    g.add_output(last);
    return g;
}

Border Graph::border_of(NodeId id) const {
    const GraphNode& n = nodes_[id];
    if (n.options.border) return *n.options.border;
    if (default_border_) return *default_border_;
    if (const auto* f = std::get_if<Filter>(&n.op)) return default_border_of(*f);
    return Border{};
}

namespace {
// Adds `op` as `name` reading `inputs` to `out`, expanded when compound.
NodeId add_expanded(Graph& out, const std::string& name, const NodeOp& op, const std::vector<NodeId>& inputs,
                    const NodeOptions& options, bool cuda) {
    if (const auto* blend = std::get_if<BlendFilter>(&op))
        return out.add_blend(name, *blend, inputs[0], inputs[1], options);
    const Filter& filter = std::get<Filter>(op);
    // The CPU's row kernels run schedule naive (every window kind's CPU default); another schedule that
    // runs the node computes each pixel on its own, as CUDA's kernels do.
    const ScheduleChoice& choice = options.schedule ? *options.schedule : out.default_schedule();
    const auto* fixed = std::get_if<ScheduleSpec>(&choice);
    const bool per_pixel = cuda || (fixed && fixed->family != ScheduleFamily::naive &&
                                    supports(*fixed, op, options.border.value_or(Border{})));
    const Expansion e = expansion_of(filter, per_pixel);
    if (e.steps.empty()) return out.add_filter(name, filter, inputs[0], options);
    std::vector<NodeId> step_ids;
    for (std::size_t k = 0; k < e.steps.size(); ++k) {
        const ExpansionStep& step = e.steps[k];
        const auto in = [&](int i) {
            return i == kExpansionInput ? inputs[0] : step_ids.at(static_cast<std::size_t>(i));
        };
        NodeOp step_op = std::visit([](const auto& o) { return NodeOp{o}; }, step.op);
        NodeOptions o{std::nullopt, step.border ? step.border : options.border};
        if (options.schedule) {
            const auto* fixed = std::get_if<ScheduleSpec>(&*options.schedule);
            if (!fixed || supports(*fixed, step_op, o.border.value_or(Border{}))) o.schedule = options.schedule;
        }
        const bool last = k + 1 == e.steps.size();
        const std::string step_name = last ? name : name + "." + std::to_string(k + 1);
        step_ids.push_back(add_expanded(out, step_name, step_op, {in(step.inputs[0]), in(step.inputs[1])}, o, cuda));
    }
    return step_ids.back();
}
}  // namespace

ExpandedGraph expand_compound(const Graph& graph, bool cuda) {
    ExpandedGraph e;
    e.graph.set_default_schedule(graph.default_schedule());
    e.graph.set_default_border(graph.default_border());
    const auto& nodes = graph.nodes();
    e.ids.assign(nodes.size(), Graph::input());
    for (std::size_t id = 1; id < nodes.size(); ++id) {
        const GraphNode& n = nodes[id];
        std::vector<NodeId> inputs;
        for (NodeId i : n.inputs) inputs.push_back(e.ids[static_cast<std::size_t>(i)]);
        if (inputs.size() < 2) inputs.resize(2, inputs.empty() ? Graph::input() : inputs[0]);
        e.ids[id] = add_expanded(e.graph, n.name, n.op, inputs, n.options, cuda);
    }
    for (NodeId o : graph.outputs()) e.graph.add_output(e.ids[static_cast<std::size_t>(o)]);
    return e;
}

Graph parse_pipeline(std::string_view text, const ScheduleChoice& default_schedule,
                     const std::optional<Border>& default_border) {
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
        const auto where = "stage " + std::to_string(stage) + " '" + args::excerpt(token) + "' (column " +
                           std::to_string(column) + "): ";
        if (token.empty()) invalid(where + "empty stage; stages are FILTER[@SCHEDULE] separated by '|'");
        try {
            const auto at = token.find('@');
            NodeOptions options;
            // Spaces around '@' as around '|'.
            if (at != std::string_view::npos) {
                try {
                    options.schedule = parse_schedule_choice(trim(token.substr(at + 1)));
                } catch (const std::invalid_argument& e) {
                    if (!trim(token.substr(0, at)).ends_with(':')) throw;
                    throw std::invalid_argument(std::string(e.what()) +  // filter2d:@kernel.txt
                                                "; a value read from a file is a flag's form (--NAME @FILE), or "
                                                "write the stage into a --pipeline-file");
                }
            }
            const Filter filter = parse_filter(trim(token.substr(0, at)));
            last = g.add_filter("n" + std::to_string(stage), filter, last, options);
        } catch (const std::invalid_argument& e) {
            invalid(where + e.what());
        } catch (const Unsupported& e) {  // the stage's schedule cannot run its filter
            throw Unsupported("", where + e.what());
        }
        start = bar + 1;
    }
    g.add_output(last);
    return g;
}

Graph graph_from_json(std::string_view json_text) {
    using nlohmann::json;
    json doc;  // not const: each node's object is freed once read
    try {
        StrictDom sax(doc);
        json::sax_parse(json_text.begin(), json_text.end(), &sax);
    } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers such as 9e309
        invalid(std::string("not valid JSON: ") + e.what());
    }
    if (!doc.is_object()) invalid("the pipeline must be a JSON object with \"nodes\" and \"outputs\"");
    const auto text_field = [](const json& obj, const char* key,
                               const std::string& where) -> std::optional<std::string> {
        const auto it = obj.find(key);
        if (it == obj.end()) return std::nullopt;
        if (!it->is_string()) invalid(where + "\"" + key + "\" must be a string");
        return it->get<std::string>();
    };
    for (const auto& [key, value] : doc.items())
        if (key != "nodes" && key != "outputs" && key != "schedule" && key != "border")
            invalid("unknown field \"" + printable(key) + "\" (nodes, outputs, schedule, border)");
    Graph g;
    try {
        if (auto s = text_field(doc, "schedule", "")) g.set_default_schedule(parse_schedule_choice(*s));
        if (auto b = text_field(doc, "border", "")) g.set_default_border(parse_border(*b));
    } catch (const std::invalid_argument& e) {
        invalid(std::string("pipeline defaults: ") + e.what());
    }
    const auto nodes = doc.find("nodes");
    if (nodes == doc.end() || !nodes->is_array()) invalid("\"nodes\" must be an array of node objects");
    const auto outputs = doc.find("outputs");

    // Read every node, then add them in dependency order so that edges may
    // name nodes defined later; what never becomes ready is a cycle.
    struct Pending {
        std::string name;
        NodeOp op;
        std::vector<std::string> inputs;
        NodeOptions options;
    };
    std::vector<Pending> pending;
    pending.reserve(nodes->size());
    for (json& n : *nodes) {
        if (!n.is_object()) invalid("each node must be an object");
        const auto name = text_field(n, "name", "node: ");
        if (!name) invalid("a node has no \"name\"");
        if (!valid_name(*name))
            invalid("node name '" + printable(*name) + "' must be letters, digits, '_', '-' or '.'");
        const std::string where = "node '" + *name + "': ";
        Pending p{*name, {}, {}, {}};
        try {
            for (const auto& [key, value] : n.items())
                if (key != "name" && key != "filter" && key != "blend" && key != "input" && key != "inputs" &&
                    key != "schedule" && key != "border")
                    invalid("unknown field \"" + printable(key) +
                            "\" (name, filter, blend, input, inputs, schedule, border)");
            const auto filter = text_field(n, "filter", where);
            const auto blend = text_field(n, "blend", where);
            if (filter.has_value() == blend.has_value()) invalid("needs exactly one of \"filter\" and \"blend\"");
            if (filter)
                p.op = parse_filter(*filter);
            else
                p.op = parse_blend(blend->starts_with("blend:") ? blend->substr(6) : *blend);
            if (const auto inputs = n.find("inputs"); inputs != n.end()) {
                if (!inputs->is_array()) invalid("\"inputs\" must be an array of node names");
                for (const json& in : *inputs) {
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
        n = nullptr;  // the document and the nodes read from it need not be held at once
    }

    // Every step below is linear in nodes + edges (a hash map by name, a
    // topological sort), so a large graph loads in time proportional to its
    // size; scanning all nodes per node or per round was quadratic.
    const std::size_t count = pending.size();
    constexpr std::size_t kGraphInput = SIZE_MAX;
    std::unordered_map<std::string_view, std::size_t> index;  // views into pending, which no longer grows
    index.reserve(count);
    for (std::size_t i = 0; i < count; ++i)
        if (pending[i].name == "input" || !index.emplace(pending[i].name, i).second)
            invalid("node '" + pending[i].name + "': the name is used twice");
    std::vector<std::array<std::size_t, 2>> from(count);  // the pending index of each input
    std::vector<std::size_t> waiting(count, 0);           // inputs not yet added
    std::vector<std::size_t> user_start(count + 1, 0);    // nodes reading each node, CSR
    for (std::size_t i = 0; i < count; ++i)
        for (std::size_t k = 0; k < pending[i].inputs.size(); ++k) {
            const std::string& in = pending[i].inputs[k];
            if (in == "input") {
                from[i][k] = kGraphInput;
                continue;
            }
            const auto it = index.find(in);
            if (it == index.end())
                invalid("node '" + pending[i].name + "': input '" + printable(in) + "' is not a node");
            from[i][k] = it->second;
            ++waiting[i];
            ++user_start[it->second + 1];
        }
    for (std::size_t i = 0; i < count; ++i) user_start[i + 1] += user_start[i];
    std::vector<std::size_t> users(user_start[count]);
    {
        std::vector<std::size_t> next(user_start.begin(), user_start.end() - 1);
        for (std::size_t i = 0; i < count; ++i)
            for (std::size_t k = 0; k < pending[i].inputs.size(); ++k)
                if (from[i][k] != kGraphInput) users[next[from[i][k]]++] = i;
    }
    // Nodes are added in the order of the former rounds (each round one pass
    // over the file adding what is ready), so node ids do not change: a node
    // joins in round max over its inputs j of round(j) + (j comes after it),
    // and within a round in file order.
    std::vector<std::size_t> round(count, 0), ready;
    for (std::size_t i = 0; i < count; ++i)
        if (waiting[i] == 0) ready.push_back(i);
    std::size_t sorted = 0;
    while (!ready.empty()) {
        const std::size_t j = ready.back();
        ready.pop_back();
        ++sorted;
        for (std::size_t e = user_start[j]; e < user_start[j + 1]; ++e) {
            const std::size_t u = users[e];
            round[u] = std::max(round[u], round[j] + (j > u ? 1 : 0));
            if (--waiting[u] == 0) ready.push_back(u);
        }
    }
    if (sorted != count)
        for (std::size_t i = 0; i < count; ++i)
            if (waiting[i] != 0) invalid("node '" + pending[i].name + "' is part of a cycle");
    std::vector<std::size_t> round_start(count + 1, 0), order(count);
    for (std::size_t i = 0; i < count; ++i) ++round_start[round[i] + 1];
    for (std::size_t r = 0; r < count; ++r) round_start[r + 1] += round_start[r];
    for (std::size_t i = 0; i < count; ++i) order[round_start[round[i]]++] = i;
    index = {};  // its views into the names end here: the names move into the graph
    std::vector<NodeId> id(count);
    const auto id_of = [&](std::size_t p) { return p == kGraphInput ? Graph::input() : id[p]; };
    g.reserve(count + 1);
    for (const std::size_t i : order) {
        Pending& p = pending[i];
        id[i] = std::holds_alternative<Filter>(p.op)
                    ? g.add_filter(std::move(p.name), std::get<Filter>(p.op), id_of(from[i][0]), p.options)
                    : g.add_blend(std::move(p.name), std::get<BlendFilter>(p.op), id_of(from[i][0]), id_of(from[i][1]),
                                  p.options);
        p.inputs = {};
    }

    if (outputs == doc.end() || !outputs->is_array() || outputs->empty())
        invalid("\"outputs\" must be a non-empty array of node names");
    for (const json& o : *outputs) {
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
    } catch (const Unsupported& e) {
        throw Unsupported(path.string(), e.what());
    }
}

std::string graph_to_json(const Graph& g) {
    nlohmann::ordered_json doc;
    doc["schedule"] = to_string(g.default_schedule());
    if (g.default_border()) doc["border"] = to_string(*g.default_border());
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
