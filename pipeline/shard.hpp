#pragma once
// Shards of a batch: K of N processes each take a deterministic part of the
// inputs, for Slurm job arrays and any other launcher that starts N copies.
// A file's shard is a hash of its path relative to the input folder, so it
// does not depend on the other files: adding or removing files moves no
// other file between shards, and a re-run after new files arrive redoes
// nothing (with --skip-existing).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "pipeline/batch.hpp"

namespace cbi {

struct Shard {
    int index = 0;  // K, 0 <= K < N
    int count = 1;  // N
    friend bool operator==(const Shard&, const Shard&) = default;
};

// "K/N" with 0 <= K < N; throws std::invalid_argument.
Shard parse_shard(std::string_view text);

// The shard, 0..count-1, of the file with this key: FNV-1a (64 bits) of the
// key's bytes, modulo count. The same on every machine.
int shard_of(std::string_view key, int count);

// The plan's jobs and rejected items whose path relative to `root` (the
// input folder; empty: the path as given) falls in `shard`. Conflicts stay:
// a plan that would overwrite an input is refused by every shard.
BatchPlan select_shard(BatchPlan plan, const Shard& shard, const std::filesystem::path& root);

// A shard taken from a launcher's environment, and the sentence that says so.
struct EnvironmentShard {
    Shard shard;
    std::string source;  // e.g. "SLURM_ARRAY_TASK_ID=3 of SLURM_ARRAY_TASK_COUNT=8"
};

// Looks up variables through `get` (std::getenv by default; null: unset):
//   a Slurm array task: SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT
//     (with SLURM_ARRAY_TASK_MIN and SLURM_ARRAY_TASK_STEP when the ids do
//     not start at 0 or step by 1: K = (ID - MIN) / STEP);
//   else, unless `ranks_share_work` (MPI ranks, which share the work among
//     themselves), a Slurm step of several tasks: SLURM_PROCID of
//     SLURM_NTASKS.
// Nothing set (or one task): nullopt. Values that do not form a shard throw
// cbi::Error naming the variables.
std::optional<EnvironmentShard> shard_from_environment(bool ranks_share_work,
                                                       const std::function<const char*(const char*)>& get = nullptr);

}  // namespace cbi
