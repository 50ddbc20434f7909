#include "pipeline/shard.hpp"

#include <charconv>
#include <cstdlib>
#include <stdexcept>
#include <utility>

#include "pipeline/error.hpp"

namespace cbi {
namespace fs = std::filesystem;

namespace {

// A whole non-negative number, or nullopt.
std::optional<long long> whole_number(std::string_view text) {
    long long v = -1;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || v < 0) return std::nullopt;
    return v;
}

std::string shard_key(const fs::path& path, const fs::path& root) {
    if (root.empty()) return path.generic_string();
    const fs::path relative = path.lexically_relative(root);
    return (relative.empty() ? path : relative).generic_string();
}

}  // namespace

Shard parse_shard(std::string_view text) {
    const auto slash = text.find('/');
    const auto k = slash == std::string_view::npos ? std::nullopt : whole_number(text.substr(0, slash));
    const auto n = slash == std::string_view::npos ? std::nullopt : whole_number(text.substr(slash + 1));
    if (!k || !n || *n < 1 || *k >= *n || *n > (1 << 30))
        throw std::invalid_argument("--shard '" + std::string(text) + "' must be K/N with 0 <= K < N, e.g. 0/4");
    return {static_cast<int>(*k), static_cast<int>(*n)};
}

int shard_of(std::string_view key, int count) {
    std::uint64_t h = 14695981039346656037ull;  // FNV-1a
    for (const char c : key) {
        h ^= static_cast<unsigned char>(c);
        h *= 1099511628211ull;
    }
    return static_cast<int>(h % static_cast<std::uint64_t>(count));
}

BatchPlan select_shard(BatchPlan plan, const Shard& shard, const fs::path& root) {
    const auto mine = [&](const fs::path& input) {
        return shard_of(shard_key(input, root), shard.count) == shard.index;
    };
    std::erase_if(plan.jobs, [&](const BatchJob& job) { return !mine(job.input); });
    std::erase_if(plan.rejected, [&](const BatchItem& item) { return !mine(item.input); });
    return plan;
}

std::optional<EnvironmentShard> shard_from_environment(bool ranks_share_work,
                                                       const std::function<const char*(const char*)>& get) {
    const auto value = [&](const char* name) -> std::optional<std::string> {
        const char* v = get ? get(name) : std::getenv(name);
        if (v == nullptr) return std::nullopt;
        return std::string(v);
    };
    const auto number = [&](const char* name, long long fallback) -> long long {
        const auto v = value(name);
        if (!v) return fallback;
        const auto n = whole_number(*v);
        if (!n) throw Error(name, "'" + *v + "' is not a whole number");
        return *n;
    };
    if (const auto id = value("SLURM_ARRAY_TASK_ID")) {
        const long long task = number("SLURM_ARRAY_TASK_ID", 0), count = number("SLURM_ARRAY_TASK_COUNT", 0);
        const long long first = number("SLURM_ARRAY_TASK_MIN", 0), step = number("SLURM_ARRAY_TASK_STEP", 1);
        if (count < 1 || step < 1 || task < first || (task - first) % step != 0 || (task - first) / step >= count)
            throw Error("SLURM_ARRAY_TASK_ID", "task " + *id + " is not one of SLURM_ARRAY_TASK_COUNT=" +
                                                   std::to_string(count) + " tasks from " + std::to_string(first) +
                                                   " in steps of " + std::to_string(step) + "; give --shard K/N");
        if (count == 1) return std::nullopt;
        const Shard shard{static_cast<int>((task - first) / step), static_cast<int>(count)};
        return EnvironmentShard{shard,
                                "SLURM_ARRAY_TASK_ID=" + *id + " of SLURM_ARRAY_TASK_COUNT=" + std::to_string(count)};
    }
    if (ranks_share_work || !value("SLURM_PROCID")) return std::nullopt;
    const long long rank = number("SLURM_PROCID", 0), tasks = number("SLURM_NTASKS", 1);
    if (tasks <= 1) return std::nullopt;
    if (rank >= tasks)
        throw Error("SLURM_PROCID", std::to_string(rank) + " is not below SLURM_NTASKS=" + std::to_string(tasks));
    return EnvironmentShard{{static_cast<int>(rank), static_cast<int>(tasks)},
                            "SLURM_PROCID=" + std::to_string(rank) + " of SLURM_NTASKS=" + std::to_string(tasks)};
}

}  // namespace cbi
