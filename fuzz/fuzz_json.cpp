// Fuzz target: the JSON pipeline loader (cbi::graph_from_json), as
// --pipeline-file reads it. Accepted graphs must survive graph_to_json ->
// graph_from_json unchanged and run on tiny images (fuzz/fuzz_common.hpp).
#include <stdexcept>

#include "fuzz/fuzz_common.hpp"
#include "pipeline/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size > 16384) return -1;
    cbi::Graph g;
    try {
        g = cbi::graph_from_json(cbi_fuzz::as_text(data, size));
    } catch (const std::invalid_argument&) {
        return 0;
    } catch (const cbi::Error&) {
        return 0;
    }
    cbi_fuzz::check_parsed_graph(g);
    return 0;
}
