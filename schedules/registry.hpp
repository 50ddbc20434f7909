#pragma once
// The schedule registry: one table of name -> parser -> description ->
// examples -> capabilities, feeding the CLI (--list-schedules, validation),
// the tests (every registered schedule is tested), the benchmarks, the
// analyser, the tuner, the fusion planner and the default table.
//
// A schedule is a kernel *strategy* with a *traversal order*:
//   - the per-pixel strategy (the thesis kernel: a thread computes one
//     pixel) takes its order as its name: naive, column:W, zigzag:W,
//     tile:WxH map a thread's index to the pixel it computes (schedule.hpp);
//   - the tile strategies (smem:WxH, sep:WxH: a block computes a staged
//     tile; stream:WxH: a block walks a strip) take an order over their
//     tiles or strips after '+': sep:128x32+column:4 (TileOrder), row-major
//     when none is given;
//   - vec:N (a thread computes a run of N pixels) walks rows in order.
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "schedules/schedule.hpp"

namespace cbi {

enum class ScheduleFamily { naive, column, zigzag, tile, smem, sep, stream, vec };

// A parsed schedule string such as "column:32", "tile:32x8" or
// "sep:128x32+zigzag:2".
struct ScheduleSpec {
    ScheduleFamily family = ScheduleFamily::naive;
    int width = 0;      // W: column/zigzag/tile/smem/sep width; stream: strip width (8-bit: warps per block);
                        // vec: N, pixels per thread
    int height = 0;     // H: tile height; stream: strip height in rows
    TileOrder order{};  // smem, sep, stream: the order blocks take tiles in

    std::string to_string() const;
    friend bool operator==(const ScheduleSpec&, const ScheduleSpec&) = default;
};

// What a strategy can run: the one statement of it, asked by
// cbi::supports (filters/filter.hpp) for the CLI, graph validation,
// fusion, the tuner's candidates, the default table, tests and benchmarks.
// Filter kinds say which category they are (filters/kinds/kind.hpp).
struct Capabilities {
    bool pointwise = false;    // pointwise kinds and blends
    bool stencil = false;      // stencil kinds
    bool window = false;       // window kinds (morphology, median, ...: an op per output pixel)
    int max_ksize = 0;         // largest square window (0: any; a window that is not square counts as larger)
    bool fuses_color = false;  // computes a colour node inside its loads (the colour node is not stored)
    bool fuses_stencil =
        false;  // computes a stencil pair in one kernel, with a colour node before it (GPU; not with the wrap border)
    bool fuses_blend =
        false;  // computes the blend that reads its stencil (of its input and the stencil, or of two stencils of it) in one kernel
    // (GPU: stream, 8-bit; sep, one stencil; CPU: sep and smem, one stencil; Backend::kernel_shape says which)
    bool takes_order = false;  // walks its tiles or strips in a TileOrder (+ORDER)
};

struct ScheduleEntry {
    std::string_view name;         // "column"
    std::string_view form;         // "column:W"
    std::string_view description;  // one line
    std::string_view examples;     // space-separated strings the tests and benchmarks use
    Capabilities can;
    ScheduleSpec (*parse_params)(std::string_view params);  // text after "name:"; throws
};

// Every registered schedule, in the order --list-schedules prints them.
std::span<const ScheduleEntry> schedule_registry();

// Parses "name[:params][+ORDER]" (ORDER: naive, column:W, zigzag:W or
// tile:WxH, for strategies that take one). Throws std::invalid_argument whose message lists
// every valid form.
ScheduleSpec parse_schedule(std::string_view text);

// Every example of every entry, parsed: what tests and benchmarks sweep.
std::vector<ScheduleSpec> example_schedules();

// The registry entry of a parsed schedule.
const ScheduleEntry& schedule_entry(const ScheduleSpec& spec);

// "naive, column:W, zigzag:W, tile:WxH, ..." for error messages.
std::string valid_schedule_forms();

// The one dispatch switch on the schedule axis: calls f with the schedule
// object (a type with map(i, w, h)) that `spec` names.
template <class F>
decltype(auto) with_schedule(const ScheduleSpec& spec, F&& f) {
    switch (spec.family) {
        case ScheduleFamily::column: return std::forward<F>(f)(column_schedule(spec.width));
        case ScheduleFamily::zigzag: return std::forward<F>(f)(zigzag_schedule(spec.width));
        case ScheduleFamily::tile: return std::forward<F>(f)(tile_schedule(spec.width, spec.height));
        case ScheduleFamily::smem: return std::forward<F>(f)(smem_schedule(spec.width, spec.height));
        case ScheduleFamily::sep: return std::forward<F>(f)(sep_schedule(spec.width, spec.height));
        case ScheduleFamily::stream: return std::forward<F>(f)(stream_schedule(spec.width, spec.height));
        case ScheduleFamily::vec: return std::forward<F>(f)(vec_schedule(spec.width));
        case ScheduleFamily::naive: break;
    }
    return std::forward<F>(f)(NaiveSchedule{});
}

}  // namespace cbi
