// cbi-filter: run a pipeline of filters on one image, or on many (batch mode).
//   cbi-filter in.png --blur 9 --schedule column:32 -o out.png
//   cbi-filter in.png --pipeline "color:gray | gaussian:5 | sobel:mag@tile:32x8" -o edges.png
//   cbi-filter in.png --pipeline-file unsharp.json --print-pipeline
//   cbi-filter --input-dir photos --output-dir blurred --recursive --blur 9
//   cbi-filter a.png b.jpg c.tiff --blur 9 -o outdir
// Filter flags (--blur, --gaussian, ...) are sugar for a chain, applied in
// command-line order. Exit codes: 0 success, 1 runtime
// or data error (cbi::Error, cbi::Unsupported), 2 usage error.
// This file: main, the run (one image through cbi::run_file, a batch through
// cbi::run_batch), MPI ranks and signals; the options are cli/options.*,
// what is printed cli/report.*.
#include <pthread.h>
#include <signal.h>
#include <tbb/global_control.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli/options.hpp"
#include "cli/report.hpp"
#include "mpi_ranks.hpp"
#include "pipeline/batch.hpp"
#include "pipeline/device.hpp"
#include "pipeline/error.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/image_io.hpp"
#include "pipeline/opencv.hpp"
#include "pipeline/run_file.hpp"
#include "pipeline/shard.hpp"

namespace fs = std::filesystem;
using namespace cbi_app;

namespace {

constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

// ---------------------------------------------------------------- signals
// SIGINT and SIGTERM are blocked in every thread (before any is started, so
// TBB's workers inherit the mask) and taken by one thread: it removes the
// temporaries of the writes in progress (no partial file, no output renamed
// after that point), then a single image ends at once with 128 + signal;
// a batch stops reading, the images in flight end as cancelled, the summary
// is printed and the exit code is 128 + signal. A second signal ends a batch
// at once.
std::atomic<int> g_interrupted{0};  // the first signal taken, or 0
std::atomic<bool> g_cancel{false};  // tells the batch runner to stop
std::atomic<bool> g_batch_running{false};
bool g_batch_used_cuda = false;  // a batch ran on a CUDA device

double seconds_since_start() {
    return seconds_before_main() + std::chrono::duration<double>(Clock::now() - g_main_start).count();
}

void start_signal_thread() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    if (::pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return;
    std::thread([set] {
        for (;;) {
            int sig = 0;
            if (::sigwait(&set, &sig) != 0) continue;
            const bool first = g_interrupted.exchange(sig) == 0;
            g_cancel = true;
            cbi::abandon_atomic_writes();
            if (!first || !g_batch_running) {
                say("", std::string("interrupted by ") + (sig == SIGINT ? "SIGINT" : "SIGTERM"));
                ::_exit(128 + sig);
            }
        }
    }).detach();
}

// Under MPI (mpirun -n R cbi-filter ...): this process's rank, else null.
// Until the ranks have agreed to start (g_agreed), every rank ends through
// one agreement, so an error is printed once and every rank exits with the
// same code; after it, a rank that cannot go on ends the whole job.
cbi_app::MpiRanks* g_ranks = nullptr;
bool g_agreed = false;

// The exit code of a rank that stops before the first job (0: it is ready),
// agreed among the ranks; `message` is printed by one rank only.
int agreed_exit(int code, const std::string& message = {}) {
    if (!g_ranks || g_agreed) {
        if (!message.empty()) say("error: ", message);
        return code;
    }
    g_agreed = true;
    const auto agreement = g_ranks->agree(code);
    if (agreement.reporter && !message.empty()) say("error: ", message);
    return agreement.code;
}

int fail(int code, const std::string& subject, const std::string& reason) {
    const std::string message = (subject.empty() ? "" : subject + ": ") + reason;
    if (g_ranks && g_agreed) {  // the other ranks are working: end the job
        say("error: ", message);
        g_ranks->abort(code);
    }
    return agreed_exit(code, message);
}

void print_tuning_notice(const cbi::RunOptions& run_options) {
    if (run_options.tuning && !run_options.tuning->write_error().empty())
        say("notice: ", run_options.tuning->write_error());
}

int host_rank() {
    return g_ranks ? g_ranks->local_rank() : 0;
}

// The device's notice (why it is not the one asked for), from rank 0 only.
void print_device_notice(const cbi::ResolvedDevice& device) {
    if (!device.notice.empty() && (!g_ranks || g_ranks->rank() == 0)) say("notice: ", device.notice);
}

// base_run_options on the device `device_spec` resolves to.
cbi::RunOptions resolve_run_options(const Options& o, const cbi::DeviceSpec& device_spec, const cbi::Graph& graph) {
    cbi::RunOptions run_options = base_run_options(o, graph);
    run_options.device = cbi::resolve_device(device_spec, host_rank());
    // --codec gpu without a device ends in require_codec's one error line instead.
    if (!(o.codec == "gpu" && !run_options.device.cuda)) print_device_notice(run_options.device);
    return run_options;
}

int run_batch_mode(const CLI::App& app, const Options& o, const cbi::WriteOptions& write, const cbi::Graph& graph,
                   const cbi::DeviceSpec& device_spec, const std::vector<cbi::DeviceSpec>& device_specs) {
    if (!o.input_dir.empty() && !o.inputs.empty())
        throw UsageError{"IN", "give either --input-dir or input files, not both"};
    if (!o.output.empty() && !o.output_dir.empty()) throw UsageError{"-o", "give either -o or --output-dir, not both"};
    const fs::path out_dir = o.output_dir.empty() ? o.output : o.output_dir;
    std::error_code ec;
    if (!out_dir.empty() && fs::exists(out_dir, ec) && !fs::is_directory(out_dir, ec))
        throw UsageError{out_dir.string(), "is not a folder; in batch mode -o/--output-dir names the output folder"};
    const cbi::OutputFormat format = cbi::parse_output_format(o.format);  // CLI11 checked the value

    cbi::BatchPlan plan;
    try {
        if (!o.input_dir.empty()) {
            if (out_dir.empty() && !o.in_place)
                throw UsageError{"--input-dir",
                                 "--output-dir is required (or --in-place to write NAME.cbi.EXT beside the inputs)"};
            cbi::FolderOptions folder;
            folder.input_dir = o.input_dir;
            folder.output_dir = out_dir;
            folder.recursive = o.recursive;
            folder.pattern = o.pattern;
            folder.format = format;
            folder.in_place = o.in_place;
            plan = cbi::plan_folder(folder);
        } else {
            plan = cbi::plan_files({o.inputs.begin(), o.inputs.end()}, out_dir, format, o.in_place);
        }
    } catch (const std::invalid_argument& e) {
        throw UsageError{!o.output_dir.empty() ? "--output-dir" : !o.output.empty() ? "-o" : "--in-place", e.what()};
    }
    // This process's part of the inputs: --shard, else a Slurm array task's or step's.
    std::optional<cbi::Shard> shard;
    if (!o.shard.empty()) {
        try {
            shard = cbi::parse_shard(o.shard);
        } catch (const std::invalid_argument& e) {
            throw UsageError{"--shard", e.what()};
        }
    } else if (const auto from_launcher = cbi::shard_from_environment(g_ranks && g_ranks->size() > 1)) {
        shard = from_launcher->shard;
        if (!g_ranks || g_ranks->rank() == 0)
            say("notice: ", "shard " + std::to_string(shard->index) + "/" + std::to_string(shard->count) +
                                " of the inputs, from " + from_launcher->source);
    }
    if (shard) plan = cbi::select_shard(std::move(plan), *shard, o.input_dir);
    // Outputs that would replace an input: all of them, one line each, and
    // nothing is run.
    if (!plan.conflicts.empty()) {
        for (std::size_t i = 0; i + 1 < plan.conflicts.size(); ++i)
            if (!g_ranks || g_ranks->rank() == 0) say("error: ", plan.conflicts[i]);
        return agreed_exit(kExitUsage, plan.conflicts.back());
    }

    std::vector<fs::path> outputs;
    for (const cbi::BatchJob& job : plan.jobs) outputs.push_back(job.output);
    check_encoding_flags(app, outputs);

    // After the plan: its usage errors come before any notice.
    // Ranks sharing a batch keep their GPUs: those on one host share its cores.
    const cbi::DeviceSpec spec = g_ranks && g_ranks->size() > 1
                                     ? device_spec
                                     : cbi::choose_device(device_spec, graph, plan.jobs, cbi::parse_codec(o.codec));
    const cbi::RunOptions run_options = resolve_run_options(o, spec, graph);
    cbi::require_codec(cbi::parse_codec(o.codec), run_options.device);
    cbi::BatchOptions batch;
    batch.jobs = o.jobs > 0 ? o.jobs : o.threads;
    batch.in_flight = o.in_flight;
    batch.overlap = !o.no_overlap;
    batch.skip_existing = o.skip_existing;
    batch.max_pixels = o.max_pixels;
    batch.max_bytes = o.max_memory;
    batch.jpeg = o.codec == "cpu"   ? cbi::BatchOptions::JpegCodec::cpu
                 : o.codec == "gpu" ? cbi::BatchOptions::JpegCodec::device
                                    : cbi::BatchOptions::JpegCodec::automatic;
    batch.write = write;
    batch.cancel = &g_cancel;
    const bool reports = !g_ranks || g_ranks->rank() == 0;  // progress and summary: rank 0's, for all ranks
    ProgressReporter reporter(o.quiet || !reports);
    batch.on_progress = std::ref(reporter);
    if (g_ranks) {
        // Rank 0 reports the files that could not be listed; ranks share the jobs.
        if (g_ranks->rank() != 0) plan.rejected.clear();
        batch.lock_output_roots = g_ranks->rank() == 0;
        batch.next_job = [] { return g_ranks->next_job(&g_cancel); };
        batch.on_progress = [&reporter](const cbi::BatchProgress& p) {
            const cbi_app::RankCounts mine{p.done - p.failed - p.skipped - p.cancelled, p.failed, p.skipped,
                                           p.cancelled};
            g_ranks->report(mine);
            cbi::BatchProgress all = p;
            if (g_ranks->rank() == 0) {
                const cbi_app::RankCounts others = g_ranks->others();
                all.done += others.processed + others.failed + others.skipped + others.cancelled;
                all.failed += others.failed;
                all.skipped += others.skipped;
                all.cancelled += others.cancelled;
            }
            reporter(all);
        };
        if (const int code = agreed_exit(0); code != 0) return code;  // another rank cannot start
        g_ranks->start(plan.jobs.size());
    }
    // One executor per image in flight, its buffers reused image after image.
    g_batch_running = true;
    const double before_batch = seconds_since_start();
    const double before_batch_in_main = std::chrono::duration<double>(Clock::now() - g_main_start).count();
    const cbi::BatchSummary summary = cbi::run_batch(
        plan, cbi::batch_devices(graph, run_options, device_specs, host_rank(), cbi::jpeg_on_device(plan, batch.jpeg)),
        batch);
    const double in_run_batch = seconds_since_start() - before_batch;
    g_batch_used_cuda = std::any_of(summary.devices.begin(), summary.devices.end(),
                                    [](const cbi::DeviceStats& d) { return d.name.starts_with("cuda"); });
    const int signal = g_interrupted.load();
    reporter.clear_bar();

    cbi_app::RankCounts counts{summary.processed, summary.failed, summary.skipped, summary.cancelled};
    if (g_ranks && signal != 0)
        g_ranks->abandon();  // the launcher is ending the job: no collectives
    else if (g_ranks)
        counts = g_ranks->combine(counts);
    if ((!o.quiet || signal != 0) && (reports || signal != 0)) {
        const double rate = summary.wall_s > 0 ? static_cast<double>(counts.processed) / summary.wall_s : 0;
        std::ostringstream line;
        line << std::fixed << std::setprecision(1) << kProgram << ": "
             << counts.processed + counts.failed + counts.skipped + counts.cancelled << " files: " << counts.processed
             << " processed, " << counts.failed << " failed, " << counts.skipped << " skipped";
        if (signal != 0)
            line << ", " << counts.cancelled << " not done (interrupted by "
                 << (signal == SIGINT ? "SIGINT" : "SIGTERM") << ")";
        line << " in " << std::setprecision(2) << summary.wall_s << " s (" << rate << " images/s)\n";
        write_message(line.str());
    }
    if (o.stats && !g_ranks) {
        // Where a whole process's time goes besides the batch's wall.
        std::cout << format_stats(summary) << std::fixed << std::setprecision(3) << "process: " << before_batch
                  << " s before the batch (" << before_batch - before_batch_in_main << " loading, "
                  << before_batch_in_main << " plan and devices), " << std::max(0.0, in_run_batch - summary.wall_s)
                  << " s around its wall (processors made and freed)\n";
    } else if (o.stats && signal == 0) {  // every rank's block, printed by rank 0
        const std::vector<std::string> blocks = g_ranks->gather(format_stats(summary));
        for (std::size_t r = 0; r < blocks.size(); ++r)
            std::cout << (blocks.size() > 1
                              ? "rank " + std::to_string(r) + " of " + std::to_string(blocks.size()) + ":\n"
                              : "")
                      << blocks[r];
    }
    print_tuning_notice(run_options);
    if (signal != 0) return 128 + signal;
    return counts.failed > 0 ? kExitRuntime : 0;
}

// --print-pipeline: the resolved graph, and with an input image its buffer
// plan for that image's format (read from the file); nothing is run.
int print_pipeline(const Options& o, const cbi::Graph& graph, const cbi::DeviceSpec& device_spec) {
    if (o.input.empty()) {
        std::cout << cbi::GraphExecutor(graph, resolve_run_options(o, device_spec, graph)).describe();
        return 0;
    }
    const std::vector<std::uint8_t> bytes = cbi::read_file(o.input);
    const cbi::ImageHeader header = cbi::check_image(bytes, o.input, o.max_pixels, o.max_memory);
    cbi::GraphExecutor executor(
        graph,
        resolve_run_options(o, cbi::choose_device(device_spec, graph, header, cbi::parse_codec(o.codec)), graph));
    const cv::Mat image = cbi::decode_image(bytes, o.input, o.max_pixels, o.max_memory);
    const cbi::ImageView in = cbi::view_of(image);
    try {
        executor.plan(in.width, in.height, in.channels, in.depth);  // allocates nothing
    } catch (const cbi::Error& e) {
        throw cbi::Error(o.input, e.what());
    }
    std::cout << executor.describe();
    return 0;
}

int run(const CLI::App& app, Options& o) {
    if (o.list_schedules) {
        list_schedules();
        return 0;
    }
    if (o.list_filters) {
        list_filters();
        return 0;
    }
    for (const char* path_option : {"--output", "--output-dir", "--input-dir"})
        if (app.count(path_option) > 0 && app.get_option(path_option)->as<std::string>().empty())
            throw UsageError{path_option, "an empty path"};
    const bool batch = !o.input_dir.empty() || !o.output_dir.empty() || o.inputs.size() > 1;
    if (!batch) {
        for (const char* flag : kBatchFlags)
            if (app.count(flag) > 0)
                throw UsageError{flag, "applies to batch mode only (--input-dir, --output-dir or several inputs)"};
        if (!o.inputs.empty()) o.input = o.inputs.front();
    }
    if (!batch && g_ranks && g_ranks->size() > 1)
        throw UsageError{
            "mpirun",
            "several ranks share batch work only (--input-dir or several inputs); run one image without mpirun"};
    if (batch && o.print_pipeline)
        throw UsageError{"--print-pipeline", "takes at most one input image (it plans buffers for that image's size)"};
    if (!batch && o.input.empty() && !o.print_pipeline)
        throw UsageError{"IN", "an input image is required (see --help)"};
    if (batch && o.input_dir.empty() && o.inputs.empty())
        throw UsageError{"IN", "input images or --input-dir are required (see --help)"};

    // A device list (cuda:all, cuda:0,2) feeds one batch; RunOptions take its first device.
    std::vector<cbi::DeviceSpec> devices;
    try {
        devices = cbi::parse_devices(o.device);
    } catch (const std::invalid_argument& e) {
        throw UsageError{"--device", e.what()};
    }
    if (!batch && (devices.size() > 1 || devices.front().index == cbi::kAllDevices))
        throw UsageError{"--device",
                         "a device list (" + o.device + ") applies to batch mode; give one device for one image"};
    const cbi::DeviceSpec device_spec =
        devices.front().index == cbi::kAllDevices ? cbi::DeviceSpec{cbi::DeviceSpec::Kind::cuda} : devices.front();
    const cbi::Graph graph = build_graph(app, o);
    const cbi::WriteOptions write = write_options(app, o);

    // The limit must cover --jobs too: an arena asking for more workers than
    // the limit gets fewer (and TBB warns).
    std::optional<tbb::global_control> thread_limit;
    if (o.threads > 0 || o.jobs > 0)
        thread_limit.emplace(tbb::global_control::max_allowed_parallelism,
                             static_cast<std::size_t>(std::max(o.threads, o.jobs)));

    if (batch) return run_batch_mode(app, o, write, graph, device_spec, devices);
    if (o.print_pipeline) return print_pipeline(o, graph, device_spec);

    const fs::path input = o.input;
    const fs::path output = o.output.empty() ? default_output(input) : fs::path(o.output);
    if (cbi::same_file(input, output))
        throw UsageError{"-o " + output.string(), "is the input file; cbi never overwrites its input"};
    std::vector<fs::path> outputs;
    for (std::size_t i = 0; i < graph.outputs().size(); ++i) outputs.push_back(cbi::output_path(output, graph, i));
    check_encoding_flags(app, outputs);
    Steps steps(o.stats);
    steps("options");

    cbi::FileOptions file;
    file.device = device_spec;
    file.host_rank = host_rank();
    file.codec = cbi::parse_codec(o.codec);
    file.run = base_run_options(o, graph);
    file.max_pixels = o.max_pixels;
    file.max_bytes = o.max_memory;
    file.write = write;
    file.on_message = [](cbi::FileOptions::Message kind, const std::string& text) {
        if (kind == cbi::FileOptions::Message::warning)
            say("warning: ", text);
        else if (!g_ranks || g_ranks->rank() == 0)
            say("notice: ", text);
    };
    steps.add(cbi::run_file(input, output, graph, file));
    print_tuning_notice(file.run);
    steps.print();
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    g_main_start = Clock::now();
    silence_library_stderr();
    start_signal_thread();  // before any other thread exists
    std::unique_ptr<cbi_app::MpiRanks>
        ranks;  // under an MPI launcher: this rank (after the signal thread: MPI's threads inherit its mask)
    try {
        ranks = cbi_app::MpiRanks::join_if_launched(&argc, &argv);
    } catch (const std::exception& e) {
        return fail(kExitRuntime, "MPI", e.what());
    }
    g_ranks = ranks.get();
    CLI::App app{"cbi-filter: image filters with selectable thread schedules (CPU or CUDA)", kProgram};
    Options o;
    add_options(app, o);

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        return fail(kExitUsage, "", std::string(e.what()) + " (see --help)");
    }
    try {
        const int rc = run(app, o);
        // Ended while nvJPEG is still starting (a batch of a few JPEGs): the
        // exit would wait for that start (about 0.8 s on the H100 host), so
        // that CUDA is not torn down under it; after a batch on a GPU the
        // teardown of CUDA and nvJPEG does nothing the outputs need. Every
        // output is written and renamed by now; MPI is finalised, the
        // streams flushed, and _exit skips the teardown.
        if (cbi::gpu_codec_starting() || g_batch_used_cuda) {
            ranks.reset();
            std::cout.flush();
            std::fflush(nullptr);
            ::_exit(rc);
        }
        return rc;
    } catch (const UsageError& e) {
        return fail(kExitUsage, e.subject, e.reason);
    } catch (const cbi::Unsupported& e) {  // a cbi::Error: before it, and never a usage error
        return fail(kExitRuntime, "", e.what());
    } catch (const cbi::Error& e) {
        return fail(kExitRuntime, "", e.what());
    } catch (const std::invalid_argument& e) {
        return fail(kExitUsage, "", e.what());
    } catch (const cv::Exception& e) {
        return fail(kExitRuntime, o.input, "OpenCV: " + e.msg);
    } catch (const std::bad_alloc&) {
        return fail(kExitRuntime, o.input, "out of memory");
    } catch (const std::exception& e) {
        return fail(kExitRuntime, o.input, e.what());
    }
}
