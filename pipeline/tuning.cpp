#include "pipeline/tuning.hpp"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "pipeline/error.hpp"

namespace cbi {
namespace fs = std::filesystem;
namespace {

// Useful parameterisations per family, most promising first (fastest_candidate
// drops a candidate slower than the best so far after one run, and stops at
// its budget): the fast strategies, larger tiles first (a CPU tile recomputes
// its halo: gaussian:255 on 128^2 took 7.7 ms with sep:128x32, 119 ms with
// sep:32x8), then the per-pixel orders, which run K^2 taps a pixel. The
// registry decides which exist.
constexpr const char* kCandidates[] = {
    // Shorter strips: more blocks in flight at 4096^2 (stream:1024x32 filled 0.97 of a wave there);
    // sobel:mag:3 8u:3 stream:256x16 0.194 ms against 0.219 for stream:256x32 (H100).
    "stream:1024x32", "stream:512x32", "stream:256x32", "stream:512x16", "stream:256x16", "stream:512x8",
    "sep:128x32", "sep:64x32",  "sep:128x16", "sep:32x32",  "sep:64x16", "sep:128x8", "sep:32x16", "sep:64x8", "sep:32x8",
    "smem:64x16", "smem:128x8", "smem:32x32", "smem:32x16", "smem:64x8", "smem:32x8",
    "vec:16",     "vec:8",      "vec:4",
    "tile:64x4",  "tile:32x8",  "column:64", "column:32",  "zigzag:32", "naive",
};

std::map<std::string, std::string> read_entries(const fs::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw Error(file.string(), "cannot read the tuning cache");
    std::ostringstream text;
    text << in.rdbuf();
    std::map<std::string, std::string> entries;
    try {
        const auto doc = nlohmann::json::parse(text.str());
        if (!doc.is_object() || doc.value("version", 0) != 1 || !doc.contains("entries") || !doc["entries"].is_object())
            throw Error(file.string(), "not a cbi tuning cache (expected {\"version\": 1, \"entries\": {...}})");
        for (const auto& [key, value] : doc["entries"].items()) {
            if (!value.is_string()) throw Error(file.string(), "tuning cache entry '" + key + "' is not a schedule string");
            const std::string schedule = value.get<std::string>();
            try {
                parse_schedule(schedule);
            } catch (const std::invalid_argument&) {
                continue;  // written by a cbi with other schedules: time it again
            }
            entries[key] = schedule;
        }
    } catch (const nlohmann::json::exception& e) {
        throw Error(file.string(), std::string("the tuning cache is not valid JSON: ") + e.what());
    }
    return entries;
}

}  // namespace

std::string tuning_key(const std::string& device, const std::string& op, const std::string& border, Depth depth,
                       int channels, int width, int height, int block) {
    const auto size_class = [](int n) { return std::bit_ceil(static_cast<unsigned>(n)); };
    std::ostringstream key;
    key << device << "|" << op << "|" << border << "|" << depth_name(depth) << "x" << channels << "|"
        << size_class(width) << "x" << size_class(height) << "|block " << block;
    return key.str();
}

bool tuning_supports(const ScheduleSpec& schedule, const NodeOp& op) {
    try {
        if (const auto* f = std::get_if<Filter>(&op)) check_schedule_supports(schedule, *f);
        if (const auto* b = std::get_if<BlendFilter>(&op)) check_schedule_supports(schedule, *b);
    } catch (const std::invalid_argument&) {
        return false;
    }
    return true;
}

std::vector<ScheduleSpec> tuning_candidates(const NodeOp& op) {
    std::vector<ScheduleSpec> out;
    for (const char* text : kCandidates) {
        ScheduleSpec s;
        try {
            s = parse_schedule(text);
        } catch (const std::invalid_argument&) {
            continue;
        }
        if (tuning_supports(s, op)) out.push_back(s);
    }
    return out;
}

ScheduleSpec fastest_candidate(const std::vector<ScheduleSpec>& candidates, int runs, bool warmup_decides,
                               const std::function<double(const ScheduleSpec&)>& time_once) {
    std::optional<ScheduleSpec> best;
    double best_ms = 0, spent_ms = 0;
    std::exception_ptr first_error;
    std::vector<double> times;
    for (const ScheduleSpec& s : candidates) {
        if (best && spent_ms > std::max(kTuningBudgetFloorMs, kTuningBudgetRuns * best_ms)) break;
        const auto run = [&] {
            const double ms = time_once(s);
            spent_ms += ms;
            return ms;
        };
        const auto too_slow = [&](double ms) { return best && ms > kTuningDropMargin * best_ms; };
        times.clear();
        try {
            const double warm = run();  // first-launch costs, caches
            if (warmup_decides && too_slow(warm)) continue;
            while (static_cast<int>(times.size()) < runs) {
                times.push_back(run());
                if (!warmup_decides && times.size() == 1 && too_slow(times[0])) break;
            }
        } catch (const std::invalid_argument&) {
            if (!first_error) first_error = std::current_exception();
            continue;
        }
        if (static_cast<int>(times.size()) < runs) continue;  // dropped after its first timed run
        std::nth_element(times.begin(), times.begin() + runs / 2, times.end());
        const double median = times[static_cast<std::size_t>(runs / 2)];
        if (!best || median < best_ms) best = s, best_ms = median;
    }
    if (!best && !first_error) throw std::invalid_argument("auto: no candidate schedule for this node");
    if (!best) std::rethrow_exception(first_error);
    return *best;
}

fs::path default_tuning_cache_path() {
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "cbi" / "tuning.json";
    if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "cbi" / "tuning.json";
    return fs::temp_directory_path() / "cbi-tuning.json";
}

TuningCache::TuningCache(fs::path file) : file_(std::move(file)) {
    std::error_code ec;
    if (!fs::exists(file_, ec)) return;
    if (!fs::is_regular_file(file_, ec)) throw Error(file_.string(), "the tuning cache is not a regular file");
    entries_ = read_entries(file_);
}

std::string TuningCache::write_error() const {
    std::lock_guard lock(mutex_);
    return write_error_;
}

std::optional<ScheduleSpec> TuningCache::find(const std::string& key, const NodeOp& op) const {
    std::lock_guard lock(mutex_);
    const auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    const ScheduleSpec schedule = parse_schedule(it->second);
    if (!tuning_supports(schedule, op)) return std::nullopt;
    return schedule;
}

std::size_t TuningCache::size() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
}

void TuningCache::store(const std::string& key, const ScheduleSpec& schedule) {
    std::lock_guard lock(mutex_);
    entries_[key] = schedule.to_string();
    if (file_.empty()) return;
    // Keep what other processes stored meanwhile; ours win on the same key.
    std::error_code ec;
    if (fs::exists(file_, ec)) {
        try {
            for (auto& [k, v] : read_entries(file_)) entries_.try_emplace(k, v);
        } catch (const Error&) {
            // a damaged file is replaced by ours
        }
    }
    nlohmann::ordered_json doc;
    doc["version"] = 1;
    doc["entries"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : entries_) doc["entries"][k] = v;
    if (!file_.parent_path().empty()) fs::create_directories(file_.parent_path(), ec);
    const fs::path tmp = file_.string() + ".tmp-" + std::to_string(::getpid());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        out << doc.dump(2) << "\n";
        out.close();
        if (!out) {
            fs::remove(tmp, ec);
            write_error_ = file_.string() + ": cannot write the tuning cache; the choices of this run are not kept";
            return;
        }
    }
    fs::rename(tmp, file_, ec);
    if (ec) {
        fs::remove(tmp, ec);
        write_error_ = file_.string() + ": cannot replace the tuning cache (" + ec.message() +
                       "); the choices of this run are not kept";
    }
}

}  // namespace cbi
