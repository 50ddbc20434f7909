#pragma once
// Schedule tuning for `--schedule auto`: the first run of an auto node times
// every candidate schedule that supports the node's filter on the node's real
// input, keeps the fastest, and records it in a tuning cache (like FFTW's
// wisdom), keyed by what the choice depends on. Later runs, in this process
// or the next, take the cached choice without timing.
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "filters/filter.hpp"

namespace cbi {

// What a tuned choice depends on: device (model, or CPU thread count), the
// node's filter and border, depth, channels, the image's size class (width
// and height each rounded up to a power of two) and the CUDA block size.
std::string tuning_key(const std::string& device, const std::string& op, const std::string& border, Depth depth,
                       int channels, int width, int height, int block);

// The schedules `auto` chooses from for this operation: a fixed list of
// useful parameterisations of every registered family, less those that
// cannot run the operation.
std::vector<ScheduleSpec> tuning_candidates(const std::variant<std::monostate, Filter, BlendFilter>& op);

// $XDG_CACHE_HOME/cbi/tuning.json, else $HOME/.cache/cbi/tuning.json.
std::filesystem::path default_tuning_cache_path();

// Thread-safe. File format: {"version": 1, "entries": {KEY: SCHEDULE, ...}}.
class TuningCache {
public:
    TuningCache() = default;  // in memory only
    // Loads `file` if it exists. Throws cbi::Error naming the file when it
    // cannot be read, is not a regular file or is not a tuning cache.
    explicit TuningCache(std::filesystem::path file);

    std::optional<ScheduleSpec> find(const std::string& key) const;
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
