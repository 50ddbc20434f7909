// Fuzz target: the pipeline language (cbi::parse_pipeline), as --pipeline reads it.
// Accepted chains must print back to a chain and to JSON that read back as
// the same graph, and must run on tiny images (fuzz/fuzz_common.hpp).
#include <stdexcept>
#include <string>

#include "fuzz/fuzz_common.hpp"
#include "pipeline/error.hpp"

namespace {

// The chain form of a chain graph: stages FILTER[@SCHEDULE] joined by " | ".
std::string chain_text(const cbi::Graph& g) {
    std::string text;
    for (std::size_t i = 1; i < g.nodes().size(); ++i) {
        const auto& n = g.nodes()[i];
        if (i > 1) text += " | ";
        text += n.op_string();
        if (n.options.schedule) text += "@" + cbi::to_string(*n.options.schedule);
    }
    return text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size > 4096) return -1;  // longer chains add nothing but time
    const auto text = cbi_fuzz::as_text(data, size);
    cbi::Graph g;
    try {
        g = cbi::parse_pipeline(text);
    } catch (const std::invalid_argument&) {
        return 0;
    } catch (const cbi::Error&) {
        return 0;
    }
    const std::string printed = chain_text(g);
    const cbi::Graph back = cbi_fuzz::reparse(printed, [&](const std::string& t) {
        return cbi::parse_pipeline(t, g.default_schedule(), g.default_border());
    });
    FUZZ_CHECK(cbi_fuzz::same(g, back), "chain '" + printed + "' reads back as a different graph");
    FUZZ_CHECK(g == back, "Graph::operator== says chain '" + printed + "' reads back differently");
    cbi_fuzz::check_parsed_graph(g);
    return 0;
}
