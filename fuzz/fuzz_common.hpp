#pragma once
// Shared by the fuzz targets (fuzz/README.md). A target's entry point,
// LLVMFuzzerTestOneInput, is built twice: with -fsanitize=fuzzer (CBI_FUZZ,
// clang) and with fuzz/replay_main.cpp as a plain program that ctest runs
// over the committed corpus and regressions in every build.
//
// The contract being fuzzed: an input is either accepted or rejected with
// std::invalid_argument (usage error) or cbi::Error (data error). The targets
// catch exactly those two; any other exception escapes, terminates and is
// reported like a crash. Broken properties (round trips) abort through
// FUZZ_CHECK with a one-line reason.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "filters/filter.hpp"
#include "pipeline/graph.hpp"

#define FUZZ_CHECK(cond, what)                                            \
    do {                                                                  \
        if (!(cond)) ::cbi_fuzz::fail(__FILE__, __LINE__, #cond, (what)); \
    } while (0)

namespace cbi_fuzz {

[[noreturn]] inline void fail(const char* file, int line, const char* cond, const std::string& what) {
    std::fprintf(stderr, "%s:%d: property broken: %s: %s\n", file, line, cond, what.c_str());
    std::fflush(stderr);
    std::abort();
}

// Parses what the library printed; rejecting it is a broken property, not
// an expected error.
template <class Parse>
auto reparse(const std::string& printed, Parse&& parse) -> decltype(parse(printed)) {
    try {
        return parse(printed);
    } catch (const std::exception& e) {
        fail(__FILE__, __LINE__, "reparse", "rejects its own printed form '" + printed + "': " + e.what());
    }
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

// Values compare by bits (a round trip must give the same double, not a
// close one); any two NaNs are equal.
inline bool same(double a, double b) {
    if (std::isnan(a) && std::isnan(b)) return true;
    return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

inline bool same(const cbi::BlendFilter& a, const cbi::BlendFilter& b) {
    return same(a.alpha, b.alpha) && same(a.beta, b.beta) && same(a.gamma, b.gamma);
}
inline bool same(const cbi::Border& a, const cbi::Border& b) {
    return a.mode == b.mode && same(a.value, b.value);
}
inline bool same(const cbi::ScheduleChoice& a, const cbi::ScheduleChoice& b) {
    return a == b;
}
// Any kind: equal by value (operator==) and by printed text, which is the
// shortest form that reads back bit for bit, so -0 and 0 differ.
inline bool same(const cbi::Filter& a, const cbi::Filter& b) {
    return a == b && cbi::to_string(a) == cbi::to_string(b);
}
inline bool same(const std::monostate&, const std::monostate&) {
    return true;
}

template <class T>
bool same(const std::optional<T>& a, const std::optional<T>& b) {
    return a.has_value() == b.has_value() && (!a || same(*a, *b));
}

// Value equality of two graphs, field by field: what a round trip must keep
// (Graph's own operator== is checked beside it).
inline bool same(const cbi::Graph& a, const cbi::Graph& b) {
    if (a.nodes().size() != b.nodes().size() || a.outputs() != b.outputs() ||
        !same(a.default_schedule(), b.default_schedule()) || !same(a.default_border(), b.default_border()))
        return false;
    for (std::size_t i = 0; i < a.nodes().size(); ++i) {
        const auto &x = a.nodes()[i], &y = b.nodes()[i];
        if (x.name != y.name || x.inputs != y.inputs || x.op.index() != y.op.index() ||
            !same(x.options.schedule, y.options.schedule) || !same(x.options.border, y.options.border))
            return false;
        const bool op_same =
            std::visit([&](const auto& v) { return same(v, std::get<std::decay_t<decltype(v)>>(y.op)); }, x.op);
        if (!op_same) return false;
    }
    return true;
}

// The checks every parsed graph must pass: its JSON form reads back as the
// same graph (by value and by Graph's operator==), and printing is stable.
void check_graph_round_trip(const cbi::Graph& g);

// Runs the graph on the CPU on a few tiny images (1x1 up to 9x5, every
// depth, 1/3/4 channels): kernels far larger than the image, every border.
// A node that cannot take the channel count is a cbi::Error (fine).
// Integer outputs must equal those of the same graph on the naive schedule
// (every schedule is bit-identical to naive: docs/testing.md). Skips graphs with
// "auto" nodes (they time candidates: slow and not deterministic).
void run_on_tiny_images(const cbi::Graph& g);

// Both, for a graph a parser accepted: the round trip, then the tiny images
// (the data and usage errors a graph may meet on an image are fine).
void check_parsed_graph(const cbi::Graph& g);

}  // namespace cbi_fuzz
