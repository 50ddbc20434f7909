#pragma once
// cbi-filter's options: the Options struct, its CLI11 definitions, and what
// is made of them before any file is read (the graph, the write options,
// the run options but the device). Errors tied to an option are UsageError
// (exit 2).
#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "pipeline/executor.hpp"
#include "pipeline/graph.hpp"
#include "pipeline/image_io.hpp"

namespace cbi_app {

struct Options {
    std::vector<std::string> inputs;
    std::string input;  // the single image (inputs[0]) outside batch mode
    std::string output;
    std::string border = "reflect101";
    std::string schedule = "default";
    std::string device = "auto";
    std::string codec = "auto";
    int block = 256;
    int threads = 0;
    std::uint64_t max_pixels = cbi::default_max_pixels;
    std::uint64_t max_memory = cbi::default_max_image_bytes;
    bool list_schedules = false, list_filters = false;
    std::string pipeline, pipeline_file, tuning_cache;
    bool print_pipeline = false, no_fuse = false, fuse_stencils = false;
    // The values of each filter kind's flag (--NAME ARGS), by kind name;
    // their order on the command line is recovered from CLI11's parse order.
    std::map<std::string, std::vector<std::string>, std::less<>> filter_flags;
    std::set<std::string, std::less<>> bare_filter_flags;  // kinds without arguments (--hsv): flags with no value
    // Batch mode: --input-dir, or several inputs, or an output folder.
    std::string input_dir, output_dir, pattern, format = "same", shard;
    bool recursive = false, skip_existing = false, in_place = false, no_overlap = false, stats = false, quiet = false;
    int jobs = 0, in_flight = 0;
    // Output encoding and metadata (single image and batch alike).
    int quality = 0, png_compression = -1;
    bool strip = false;
};

// Flags that only batch mode takes.
inline constexpr const char* kBatchFlags[] = {"--recursive",     "--pattern",  "--format",     "--jobs",  "--in-flight",
                                              "--skip-existing", "--in-place", "--no-overlap", "--quiet", "--shard"};

// A usage error tied to one option: exit 2.
struct UsageError {
    std::string subject, reason;
};

// Every option and flag of cbi-filter, into `o`.
void add_options(CLI::App& app, Options& o);

// --list-filters and --list-schedules, on stdout.
void list_filters();
void list_schedules();

// The pipeline from --pipeline, --pipeline-file or the filter flags, with the
// global --schedule/--border as the defaults of nodes without their own.
cbi::Graph build_graph(const CLI::App& app, const Options& o);

// One image's default output: IN's name with .cbi before the extension.
std::filesystem::path default_output(const std::filesystem::path& input);

// --quality, --png-compression, --strip.
cbi::WriteOptions write_options(const CLI::App& app, const Options& o);

// An encoding flag that no output uses is a mistake (a --quality meant for
// a PNG, say), refused before any work.
void check_encoding_flags(const CLI::App& app, const std::vector<std::filesystem::path>& outputs);

// The run options but the device: block, fusion, and the tuning cache when a
// node is tuned (auto).
cbi::RunOptions base_run_options(const Options& o, const cbi::Graph& graph);

}  // namespace cbi_app
