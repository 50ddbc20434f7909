#include "pipeline/tuning.hpp"

#include <unistd.h>
#include <nlohmann/json.hpp>

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
            if (!value.is_string())
                throw Error(file.string(), "tuning cache entry '" + key + "' is not a schedule string");
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
        } catch (const Unsupported&) {  // anything else is a real failure and propagates
            if (!first_error) first_error = std::current_exception();
            continue;
        }
        if (static_cast<int>(times.size()) < runs) continue;  // dropped after its first timed run
        std::nth_element(times.begin(), times.begin() + runs / 2, times.end());
        const double median = times[static_cast<std::size_t>(runs / 2)];
        if (!best || median < best_ms) best = s, best_ms = median;
    }
    if (!best && !first_error) throw Unsupported("auto", "no candidate schedule for this node");
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
    if (!supports(schedule, op)) return std::nullopt;
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
