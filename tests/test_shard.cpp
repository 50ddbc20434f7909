// Shards of a batch (--shard K/N, Slurm arrays): every input in exactly one
// shard, shards stable when files come and go, the launcher's environment.
#include "pipeline/shard.hpp"

#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "cli.hpp"
#include "pipeline/error.hpp"

namespace fs = std::filesystem;
using namespace cbi;
using cbi::test::TempDir;

namespace {

// Relative paths like a photo tree: a few folders, numbered names, two extensions.
std::vector<std::string> photo_names(int first, int count) {
    std::vector<std::string> names;
    for (int i = first; i < first + count; ++i)
        names.push_back("day" + std::to_string(i % 5) + "/IMG_" + std::to_string(1000 + i) + (i % 3 ? ".jpg" : ".png"));
    return names;
}

BatchPlan plan_of(const fs::path& root, const std::vector<std::string>& names) {
    BatchPlan plan;
    for (const auto& n : names) plan.jobs.push_back({root / n, "out" / fs::path(n)});
    return plan;
}

std::set<std::string> inputs_of(const BatchPlan& plan, const fs::path& root) {
    std::set<std::string> s;
    for (const auto& j : plan.jobs) s.insert(j.input.lexically_relative(root).generic_string());
    return s;
}

}  // namespace

TEST(Shard, ParsesKOfN) {
    EXPECT_EQ(parse_shard("0/1"), (Shard{0, 1}));
    EXPECT_EQ(parse_shard("3/4"), (Shard{3, 4}));
    for (const char* bad : {"", "1", "4/4", "5/4", "-1/4", "1/0", "a/4", "1/4/2", "1 /4", "1/4x", "/4", "1/"})
        EXPECT_THROW(parse_shard(bad), std::invalid_argument) << bad;
}

TEST(Shard, EveryInputIsInExactlyOneShard) {
    const fs::path root = "/photos";
    const auto names = photo_names(0, 300);
    for (int n = 1; n <= 7; ++n) {
        std::map<std::string, int> seen;
        for (int k = 0; k < n; ++k) {
            const BatchPlan part = select_shard(plan_of(root, names), Shard{k, n}, root);
            EXPECT_FALSE(part.jobs.empty()) << k << "/" << n;
            for (const auto& input : inputs_of(part, root)) ++seen[input];
        }
        ASSERT_EQ(seen.size(), names.size()) << "N = " << n;
        for (const auto& [input, times] : seen) EXPECT_EQ(times, 1) << input << " N = " << n;
    }
}

TEST(Shard, AFileKeepsItsShardWhenOthersComeAndGo) {
    const fs::path root = "/photos";
    const auto before = photo_names(0, 200);
    auto after = photo_names(100, 250);  // the first 100 removed, 150 added
    for (int n = 2; n <= 7; ++n)
        for (int k = 0; k < n; ++k) {
            const auto was = inputs_of(select_shard(plan_of(root, before), Shard{k, n}, root), root);
            const auto is = inputs_of(select_shard(plan_of(root, after), Shard{k, n}, root), root);
            const std::set<std::string> kept(after.begin(), after.end());
            for (const auto& input : was)
                if (kept.count(input)) {
                    EXPECT_TRUE(is.count(input)) << input << " left shard " << k << "/" << n;
                }
        }
}

TEST(Shard, KeysArePathsRelativeToTheInputFolder) {
    // The same tree under two mount points is sharded alike.
    const auto names = photo_names(0, 50);
    const auto a =
        inputs_of(select_shard(plan_of("/mnt/a/photos", names), Shard{1, 3}, "/mnt/a/photos"), "/mnt/a/photos");
    const auto b =
        inputs_of(select_shard(plan_of("/scratch/photos", names), Shard{1, 3}, "/scratch/photos"), "/scratch/photos");
    EXPECT_EQ(a, b);
    // The hash is fixed: a shard's files do not change between machines or builds.
    EXPECT_EQ(shard_of("day0/IMG_1000.png", 1), 0);
    EXPECT_EQ(shard_of("", 7), static_cast<int>(14695981039346656037ull % 7));
}

TEST(Shard, RejectedItemsBelongToOneShardAndConflictsToAll) {
    BatchPlan plan = plan_of("/in", photo_names(0, 10));
    plan.rejected.push_back({"/in/unreadable-folder", "", ItemStatus::failed, "cannot list"});
    plan.conflicts.push_back("out/a.png would replace the input a.png");
    int rejected = 0;
    for (int k = 0; k < 4; ++k) {
        const BatchPlan part = select_shard(plan, Shard{k, 4}, "/in");
        rejected += static_cast<int>(part.rejected.size());
        EXPECT_EQ(part.conflicts, plan.conflicts);
    }
    EXPECT_EQ(rejected, 1);
}

TEST(Shard, RealFolderPlanPartitions) {
    TempDir dir;
    for (const auto& n : photo_names(0, 40)) {
        fs::create_directories((dir / "in" / n).parent_path());
        std::ofstream(dir / "in" / n) << "x";
    }
    FolderOptions options;
    options.input_dir = dir / "in";
    options.output_dir = dir / "out";
    options.recursive = true;
    const BatchPlan all = plan_folder(options);
    ASSERT_EQ(all.jobs.size(), 40u);
    std::size_t total = 0;
    std::set<fs::path> outputs;
    for (int k = 0; k < 3; ++k) {
        const BatchPlan part = select_shard(all, Shard{k, 3}, options.input_dir);
        total += part.jobs.size();
        for (const auto& j : part.jobs) outputs.insert(j.output);
    }
    EXPECT_EQ(total, 40u);
    EXPECT_EQ(outputs.size(), 40u);
}

namespace {

std::function<const char*(const char*)> env(std::map<std::string, std::string> vars) {
    auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
    return [shared](const char* name) -> const char* {
        const auto it = shared->find(name);
        return it == shared->end() ? nullptr : it->second.c_str();
    };
}

}  // namespace

TEST(Shard, SlurmArrayTask) {
    auto s = shard_from_environment(false, env({{"SLURM_ARRAY_TASK_ID", "2"}, {"SLURM_ARRAY_TASK_COUNT", "5"}}));
    ASSERT_TRUE(s);
    EXPECT_EQ(s->shard, (Shard{2, 5}));
    EXPECT_NE(s->source.find("SLURM_ARRAY_TASK_ID=2"), std::string::npos) << s->source;
    // --array=1-8 and --array=10-40:10.
    s = shard_from_environment(false, env({{"SLURM_ARRAY_TASK_ID", "8"},
                                           {"SLURM_ARRAY_TASK_COUNT", "8"},
                                           {"SLURM_ARRAY_TASK_MIN", "1"},
                                           {"SLURM_ARRAY_TASK_MAX", "8"}}));
    ASSERT_TRUE(s);
    EXPECT_EQ(s->shard, (Shard{7, 8}));
    s = shard_from_environment(false, env({{"SLURM_ARRAY_TASK_ID", "30"},
                                           {"SLURM_ARRAY_TASK_COUNT", "4"},
                                           {"SLURM_ARRAY_TASK_MIN", "10"},
                                           {"SLURM_ARRAY_TASK_STEP", "10"}}));
    ASSERT_TRUE(s);
    EXPECT_EQ(s->shard, (Shard{2, 4}));
    // The array wins over the step's tasks (srun inside an array task), also for MPI ranks.
    s = shard_from_environment(true, env({{"SLURM_ARRAY_TASK_ID", "1"},
                                          {"SLURM_ARRAY_TASK_COUNT", "2"},
                                          {"SLURM_PROCID", "3"},
                                          {"SLURM_NTASKS", "4"}}));
    ASSERT_TRUE(s);
    EXPECT_EQ(s->shard, (Shard{1, 2}));
    // One task: no shard.
    EXPECT_FALSE(shard_from_environment(false, env({{"SLURM_ARRAY_TASK_ID", "0"}, {"SLURM_ARRAY_TASK_COUNT", "1"}})));
}

TEST(Shard, SlurmStepTasksUnlessRanksShareTheWork) {
    const auto vars = env({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "3"}});
    const auto s = shard_from_environment(false, vars);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->shard, (Shard{1, 3}));
    EXPECT_FALSE(shard_from_environment(true, vars));
    EXPECT_FALSE(shard_from_environment(false, env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}})));
    EXPECT_FALSE(shard_from_environment(false, env({})));
}

TEST(Shard, SlurmValuesThatFormNoShardAreErrors) {
    for (const auto& vars : std::vector<std::map<std::string, std::string>>{
             {{"SLURM_ARRAY_TASK_ID", "x"}, {"SLURM_ARRAY_TASK_COUNT", "4"}},
             {{"SLURM_ARRAY_TASK_ID", "4"}, {"SLURM_ARRAY_TASK_COUNT", "4"}},
             {{"SLURM_ARRAY_TASK_ID", "3"}},
             {{"SLURM_ARRAY_TASK_ID", "15"},
              {"SLURM_ARRAY_TASK_COUNT", "4"},
              {"SLURM_ARRAY_TASK_MIN", "10"},
              {"SLURM_ARRAY_TASK_STEP", "10"}},
             {{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "3"}},
             {{"SLURM_PROCID", "-1"}, {"SLURM_NTASKS", "3"}}}) {
        try {
            shard_from_environment(false, env(vars));
            ADD_FAILURE() << "accepted " << vars.begin()->first << "=" << vars.begin()->second;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("SLURM_"), std::string::npos) << e.what();
        }
    }
}

// ------------------------------------------------------------ the real cbi-filter

namespace {

// A folder of small real-looking images (noise, so every output differs).
void make_folder(const fs::path& dir, int count) {
    cv::RNG rng(7);
    for (int i = 0; i < count; ++i) {
        cv::Mat m(17 + i, 23 + 2 * i, CV_8UC3);
        rng.fill(m, cv::RNG::UNIFORM, 0, 256);
        fs::create_directories(dir / ("sub" + std::to_string(i % 2)));
        cv::imwrite((dir / ("sub" + std::to_string(i % 2)) / ("img" + std::to_string(i) + ".png")).string(), m);
    }
}

std::map<std::string, std::string> files_under(const fs::path& dir) {
    std::map<std::string, std::string> files;
    if (!fs::exists(dir)) return files;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.is_regular_file()) files[e.path().lexically_relative(dir).generic_string()] = cbi::test::slurp(e.path());
    return files;
}

struct ScopedEnv {
    std::vector<std::string> names;
    explicit ScopedEnv(std::map<std::string, std::string> vars) {
        for (const auto& [k, v] : vars) {
            ::setenv(k.c_str(), v.c_str(), 1);
            names.push_back(k);
        }
    }
    ~ScopedEnv() {
        for (const auto& k : names) ::unsetenv(k.c_str());
    }
};

}  // namespace

TEST(ShardCli, ShardsTogetherWriteWhatOneRunWrites) {
    TempDir dir;
    make_folder(dir / "in", 12);
    const std::vector<std::string> common{
        "--input-dir", (dir / "in").string(), "--recursive", "--blur", "3", "--device", "cpu", "--quiet"};
    auto args = common;
    args.insert(args.end(), {"--output-dir", (dir / "all").string()});
    ASSERT_EQ(cbi::test::run_cli(args, dir.path()).code, 0);
    const auto all = files_under(dir / "all");
    ASSERT_EQ(all.size(), 12u);
    std::size_t sum = 0;
    for (int k = 0; k < 3; ++k) {
        auto part = common;
        part.insert(part.end(), {"--output-dir", (dir / "parts").string(), "--shard", std::to_string(k) + "/3"});
        const auto before = files_under(dir / "parts").size();
        const auto r = cbi::test::run_cli(part, dir.path());
        ASSERT_EQ(r.code, 0) << r.err;
        const auto written = files_under(dir / "parts").size() - before;
        FolderOptions folder;
        folder.input_dir = dir / "in";
        folder.output_dir = dir / "parts";
        folder.recursive = true;
        EXPECT_EQ(written, select_shard(plan_folder(folder), Shard{k, 3}, folder.input_dir).jobs.size());
        sum += written;
    }
    EXPECT_EQ(sum, 12u);
    EXPECT_EQ(files_under(dir / "parts"), all);
}

TEST(ShardCli, SlurmArrayTaskTakesItsShardAndSaysSoOnce) {
    TempDir dir;
    make_folder(dir / "in", 9);
    const std::vector<std::string> common{
        "--input-dir", (dir / "in").string(), "--recursive", "--blur", "3", "--device", "cpu", "--quiet"};
    auto explicit_args = common;
    explicit_args.insert(explicit_args.end(), {"--output-dir", (dir / "explicit").string(), "--shard", "2/3"});
    ASSERT_EQ(cbi::test::run_cli(explicit_args, dir.path()).code, 0);
    ScopedEnv slurm({{"SLURM_ARRAY_TASK_ID", "12"}, {"SLURM_ARRAY_TASK_COUNT", "3"}, {"SLURM_ARRAY_TASK_MIN", "10"}});
    auto env_args = common;
    env_args.insert(env_args.end(), {"--output-dir", (dir / "slurm").string()});
    const auto r = cbi::test::run_cli(env_args, dir.path());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err,
              "cbi-filter: notice: shard 2/3 of the inputs, from SLURM_ARRAY_TASK_ID=12 of SLURM_ARRAY_TASK_COUNT=3\n");
    EXPECT_EQ(files_under(dir / "slurm"), files_under(dir / "explicit"));
    EXPECT_FALSE(files_under(dir / "slurm").empty());
}

TEST(ShardCli, BadShardsAreUsageOrDataErrors) {
    TempDir dir;
    make_folder(dir / "in", 2);
    const std::vector<std::string> common{
        "--input-dir", (dir / "in").string(), "--output-dir", (dir / "out").string(), "--blur", "3", "--device", "cpu"};
    auto bad = common;
    bad.insert(bad.end(), {"--shard", "3/3"});
    auto r = cbi::test::run_cli(bad, dir.path());
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("--shard"), std::string::npos) << r.err;
    // Single-image mode takes no shard.
    r = cbi::test::run_cli({(dir / "in/sub0/img0.png").string(), "--shard", "0/2", "--blur", "3"}, dir.path());
    EXPECT_EQ(r.code, 2);
    ScopedEnv slurm({{"SLURM_ARRAY_TASK_ID", "5"}, {"SLURM_ARRAY_TASK_COUNT", "2"}});
    r = cbi::test::run_cli(common, dir.path());
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("SLURM_ARRAY_TASK_ID"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "out" / "sub0"));
}
