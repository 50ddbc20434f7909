#pragma once
// The schedule registry: one table of name -> parser -> description ->
// examples, feeding the CLI (--list-schedules, validation), the tests (every
// registered schedule is tested) and the benchmarks and the analyser.
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "schedules/schedule.hpp"

namespace cbi {

enum class ScheduleFamily { naive, column, zigzag, tile, smem, sep, stream, vec };

// A parsed schedule string such as "column:32" or "tile:32x8".
struct ScheduleSpec {
    ScheduleFamily family = ScheduleFamily::naive;
    int width = 0;   // column/zigzag/tile width W
    int height = 0;  // tile height H

    std::string to_string() const;
    friend bool operator==(const ScheduleSpec&, const ScheduleSpec&) = default;
};

struct ScheduleEntry {
    std::string_view name;         // "column"
    std::string_view form;         // "column:W"
    std::string_view description;  // one line
    std::string_view examples;     // space-separated strings the tests and benchmarks use
    bool pointwise;                // runs pointwise filters (colour matrix, blend)
    bool stencil;                  // runs stencil filters (blur, gaussian, sobel)
    int max_ksize;                 // largest stencil size it runs (0: any); filters/filter.cpp checks it
    ScheduleSpec (*parse_params)(std::string_view params);  // text after "name:"; throws
};

// Every registered schedule, in the order --list-schedules prints them.
std::span<const ScheduleEntry> schedule_registry();

// Parses "name[:params]". Throws std::invalid_argument whose message lists
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
