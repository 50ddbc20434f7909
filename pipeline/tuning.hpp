#pragma once
// Schedule tuning for `--schedule auto`: the first run of an auto node times
// the candidate schedules that support the node's filter on the node's real
// input (dropping slow ones early, within a time budget), keeps the fastest,
// and records it in a tuning cache (like FFTW's wisdom), keyed by what the
// choice depends on. Later runs, in this process
// or the next, take the cached choice without timing.
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "filters/filter.hpp"
#include "pipeline/graph.hpp"

namespace cbi {

// What a tuned choice depends on: device (model, or CPU thread count), the
// node's filter and border, depth, channels, the image's size class (width
// and height each rounded up to a power of two) and the CUDA block size.
std::string tuning_key(const std::string& device, const std::string& op, const std::string& border, Depth depth,
                       int channels, int width, int height, int block);

// auto's candidates are the default table's (pipeline/defaults.hpp): the
// schedules of the rows matching the node, fastest first.
//
// On the CPU the candidates run on a band of at least this many rows (or an
// eighth of the image if more) from the middle of the node's input.
inline constexpr int kTuningBandRows = 256;
// How `auto` bounds its search (without bounds, a huge kernel on a small
// image timed every per-pixel candidate for minutes; docs/performance.md#tuning).
//
// A candidate whose first deciding run is slower than this times the best
// median so far is dropped after that run: to win, its median would have to
// come out a third below that run, more than single runs of one schedule
// spread.
inline constexpr double kTuningDropMargin = 1.5;
// Tuning one node stops trying new candidates once the runs it has timed add
// up to more than max(floor, kTuningBudgetRuns x the best median): the first
// run of an auto node then costs about ten runs of the node more than a run
// with a warm cache. The floor lets small, fast nodes search the whole list,
// so the budget only binds where runs are long.
inline constexpr double kTuningBudgetRuns = 10;
inline constexpr double kTuningBudgetFloorMs = 250;

// The fastest of `candidates` by the median of `runs` timed runs after a
// warm-up, trying them in order. time_once runs the node once with a
// schedule and returns milliseconds. warmup_decides: the warm-up's time may
// drop a candidate (the CPU, where a run has no one-time costs and a slow
// candidate's runs are long); otherwise the first timed run decides (the
// GPU, where a kernel's first launch also loads its module). A candidate
// that this device cannot run (cbi::Unsupported from time_once, e.g. a tile
// plus halo larger than the GPU's shared memory) is skipped and costs
// nothing of the budget; the first such error is rethrown only when no
// candidate ran. Any other exception propagates at once: it is a failure,
// not a refusal.
ScheduleSpec fastest_candidate(const std::vector<ScheduleSpec>& candidates, int runs, bool warmup_decides,
                               const std::function<double(const ScheduleSpec&)>& time_once);

// $XDG_CACHE_HOME/cbi/tuning.json, else $HOME/.cache/cbi/tuning.json.
std::filesystem::path default_tuning_cache_path();

// Thread-safe. File format: {"version": 1, "entries": {KEY: SCHEDULE, ...}}.
class TuningCache {
public:
    TuningCache() = default;  // in memory only
    // Loads `file` if it exists. Throws cbi::Error naming the file when it
    // cannot be read, is not a regular file or is not a tuning cache.
    explicit TuningCache(std::filesystem::path file);

    // The entry for `key` if `op` can run it; a stale or hand-edited entry
    // it cannot (vec:4 for a blur) is ignored, so the node is timed again
    // and the new choice replaces it.
    std::optional<ScheduleSpec> find(const std::string& key, const NodeOp& op) const;
    // Records a choice; with a file, merges it into the file's current
    // entries and replaces the file atomically (temporary + rename). A file
    // that cannot be written does not fail the run: the choice stays in
    // memory and write_error() says why (the apps print it as a notice).
    void store(const std::string& key, const ScheduleSpec& schedule);
    std::string write_error() const;

    const std::filesystem::path& file() const { return file_; }
    std::size_t size() const;
    // Held while timing, so that executors sharing the cache (batch mode)
    // never time candidates at the same time on the same device.
    std::mutex& timing_mutex() { return timing_; }

private:
    mutable std::mutex mutex_;
    std::mutex timing_;
    std::filesystem::path file_;
    std::map<std::string, std::string> entries_;
    std::string write_error_;
};

}  // namespace cbi
