// cbi-filter: run a pipeline of filters on one image, or on many (batch mode).
//   cbi-filter in.png --blur 9 --schedule column:32 -o out.png
//   cbi-filter in.png --pipeline "color:gray | gaussian:5 | sobel:mag@tile:32x8" -o edges.png
//   cbi-filter in.png --pipeline-file unsharp.json --print-pipeline
//   cbi-filter --input-dir photos --output-dir blurred --recursive --blur 9
//   cbi-filter a.png b.jpg c.tiff --blur 9 -o outdir
// Filter flags (--blur, --gaussian, ...) are sugar for a chain, applied in
// command-line order. Exit codes: 0 success, 1 runtime
// or data error (cbi::Error, cbi::Unsupported), 2 usage error.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <tbb/global_control.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <opencv2/core/utils/logger.hpp>

#include "filters/filter.hpp"
#include "mpi_ranks.hpp"
#include "pipeline/batch.hpp"
#include "pipeline/defaults.hpp"
#include "pipeline/error.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/image_io.hpp"
#include "pipeline/opencv.hpp"
#include "pipeline/run_file.hpp"
#include "pipeline/shard.hpp"
#include "schedules/registry.hpp"

namespace fs = std::filesystem;

namespace {

constexpr const char* kProgram = "cbi-filter";
constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

// ---------------------------------------------------------------- stderr
// cbi-filter's messages go to a private copy of stderr, and fd 2 itself to
// /dev/null: libpng ("libpng error: ..."), OpenCV's imdecode and TBB print
// straight to stderr, and an error must be exactly one line.
// CBI_LIBRARY_STDERR=1 keeps fd 2 (to see that chatter when debugging).
int g_message_fd = STDERR_FILENO;

void silence_library_stderr() {
    cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT);
    if (const char* keep = std::getenv("CBI_LIBRARY_STDERR"); keep && std::string_view(keep) == "1") return;
    const int copy = ::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (copy >= 0 && null >= 0 && ::dup2(null, STDERR_FILENO) >= 0) {
        g_message_fd = copy;
    } else if (copy >= 0) {
        ::close(copy);
    }
    if (null >= 0) ::close(null);
}

// One write, so that lines of different threads never interleave.
void write_message(std::string_view text) {
    while (!text.empty()) {
        const ssize_t n = ::write(g_message_fd, text.data(), text.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        text.remove_prefix(static_cast<std::size_t>(n));
    }
}

// The length of the well-formed UTF-8 sequence at the start of `s` (a
// character from U+00A0 on: C1 controls are not kept), or 0.
std::size_t utf8_length(std::string_view s) {
    const auto b = [&](std::size_t i) { return i < s.size() ? static_cast<unsigned char>(s[i]) : 0u; };
    const unsigned lead = b(0);
    const std::size_t n = lead >= 0xC2 && lead <= 0xDF ? 2 : lead >= 0xE0 && lead <= 0xEF ? 3 : lead >= 0xF0 && lead <= 0xF4 ? 4 : 0;
    if (n == 0) return 0;
    // The second byte's range excludes overlong forms, surrogates and code points past U+10FFFF.
    const unsigned lo = lead == 0xE0 ? 0xA0 : lead == 0xF0 ? 0x90 : 0x80, hi = lead == 0xED ? 0x9F : lead == 0xF4 ? 0x8F : 0xBF;
    if (b(1) < lo || b(1) > hi || (lead == 0xC2 && b(1) < 0xA0)) return 0;
    for (std::size_t i = 2; i < n; ++i)
        if (b(i) < 0x80 || b(i) > 0xBF) return 0;
    return n;
}

// Control characters (a newline in a file name, an escape sequence, C1
// controls) and bytes that are not UTF-8 are written as \n, \t, \xHH, so a
// message stays one line of text on the terminal.
std::string terminal_safe(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const char c = text[i];
        const auto u = static_cast<unsigned char>(c);
        if (u >= 0x80) {
            if (const std::size_t n = utf8_length(text.substr(i))) {
                out += text.substr(i, n);
                i += n;
                continue;
            }
        }
        if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '\r') out += "\\r";
        else if (u < 0x20 || u >= 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", u);
            out += buf;
        } else {
            out += c;
        }
        ++i;
    }
    return out;
}

void say(std::string_view kind, std::string_view message) {
    write_message(std::string(kProgram) + ": " + std::string(kind) + terminal_safe(message) + "\n");
}

// ---------------------------------------------------------------- signals
// SIGINT and SIGTERM are blocked in every thread (before any is started, so
// TBB's workers inherit the mask) and taken by one thread: it removes the
// temporaries of the writes in progress (no partial file, no output renamed
// after that point), then a single image ends at once with 128 + signal;
// a batch stops reading, the images in flight end as cancelled, the summary
// is printed and the exit code is 128 + signal. A second signal ends a batch
// at once.
std::atomic<int> g_interrupted{0};      // the first signal taken, or 0
std::atomic<bool> g_cancel{false};      // tells the batch runner to stop
std::atomic<bool> g_batch_running{false};

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
    // Batch mode: --input-dir, or several inputs, or an output folder.
    std::string input_dir, output_dir, pattern, format = "same", shard;
    bool recursive = false, skip_existing = false, in_place = false, no_overlap = false, stats = false, quiet = false;
    int jobs = 0, in_flight = 0;
    // Output encoding and metadata (single image and batch alike).
    int quality = 0, png_compression = -1;
    bool strip = false;
};

// Flags that only batch mode takes.
constexpr const char* kBatchFlags[] = {"--recursive", "--pattern", "--format", "--jobs", "--in-flight",
                                       "--skip-existing", "--in-place", "--no-overlap", "--quiet",
                                       "--shard"};

// A usage error tied to one option: exit 2.
struct UsageError {
    std::string subject, reason;
};

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

void list_filters() {
    std::size_t width = 0;
    for (const auto& k : cbi::filter_kinds()) width = std::max(width, k.form.size());
    for (const auto& k : cbi::filter_kinds())
        std::cout << k.form << std::string(width + 2 - k.form.size(), ' ') << k.help << "\n"
                  << std::string(width + 2, ' ') << "= " << k.opencv << " (" << cbi::category_name(k.category) << ")\n";
    std::cout << "Each is a pipeline stage NAME:ARGS and a flag --NAME ARGS (the same arguments).\n";
}

void list_schedules() {
    std::cout << "default     (no --schedule) each node runs the default table's schedule for its device, filter and "
                 "format (--print-pipeline shows it)\n";
    for (const auto& e : cbi::schedule_registry())
        std::cout << e.form << std::string(e.form.size() < 12 ? 12 - e.form.size() : 1, ' ') << e.description << "\n";
    std::cout << "auto        the fastest of the default table's candidates for the node, timed on its first run (on the "
                 "CPU on a band of rows) and kept in the tuning cache\n"
                 "+ORDER      smem, sep and stream walk their tiles or strips in an order: naive (row-major, the "
                 "default), column:W, zigzag:W or tile:WxH over tiles, e.g. sep:128x32+column:4\n";
}

// The filter flags as a chain in command-line order; the nodes take the
// graph's default schedule and border.
cbi::Graph chain_from_flags(const CLI::App& app, const Options& o) {
    std::map<const CLI::Option*, std::size_t> seen;
    cbi::Graph graph;
    cbi::NodeId last = cbi::Graph::input();
    for (const CLI::Option* opt : app.parse_order()) {
        const std::string name = opt->get_name();
        const auto values = name.size() > 2 ? o.filter_flags.find(std::string_view(name).substr(2)) : o.filter_flags.end();
        if (values == o.filter_flags.end()) continue;
        const std::string& value = values->second[seen[opt]++];
        if (value.empty()) throw UsageError{name, "needs a value (see --help)"};
        try {
            // --NAME ARGS is the pipeline stage NAME:ARGS.
            const cbi::Filter filter = cbi::parse_filter(values->first + ":" + value);
            last = graph.add_filter("n" + std::to_string(graph.nodes().size()), filter, last);
        } catch (const std::invalid_argument& e) {
            throw UsageError{name + " " + value, e.what()};
        }
    }
    graph.add_output(last);
    return graph;
}

// The pipeline from --pipeline, --pipeline-file or the filter flags. The
// global --schedule/--border are the defaults of nodes without their own;
// given explicitly, they also replace a pipeline file's defaults.
cbi::Graph build_graph(const CLI::App& app, const Options& o) {
    std::size_t flag_count = 0;
    std::string flag_names;
    for (const auto& kind : cbi::filter_kinds()) {
        flag_count += o.filter_flags.find(kind.name)->second.size();
        flag_names += (flag_names.empty() ? "--" : ", --") + std::string(kind.name);
    }
    const bool flags = flag_count > 0;
    const bool text = app.count("--pipeline") > 0, file = app.count("--pipeline-file") > 0;
    if (flags + text + file > 1)
        throw UsageError{file ? "--pipeline-file" : "--pipeline",
                         "give one of --pipeline, --pipeline-file or filter flags (" + flag_names + ")"};
    cbi::Graph graph;
    if (text) {
        try {
            graph = cbi::parse_pipeline(o.pipeline);
        } catch (const std::invalid_argument& e) {
            throw UsageError{"--pipeline", e.what()};
        } catch (const cbi::Unsupported& e) {  // a stage's schedule cannot run its filter: exit 1
            throw cbi::Unsupported("--pipeline", e.what());
        }
    } else if (file) {
        try {
            graph = cbi::load_pipeline_file(o.pipeline_file);  // cbi::Error (unreadable file) is exit 1
        } catch (const std::invalid_argument& e) {
            throw UsageError{"--pipeline-file", e.what()};
        } catch (const cbi::Unsupported& e) {
            throw cbi::Unsupported("--pipeline-file", e.what());
        }
    } else {
        graph = chain_from_flags(app, o);
    }
    if (!file || app.count("--schedule") > 0) {
        try {
            graph.set_default_schedule(cbi::parse_schedule_choice(o.schedule));
        } catch (const std::invalid_argument& e) {
            throw UsageError{"--schedule", e.what()};
        }
    }
    if (!file || app.count("--border") > 0) {
        try {
            graph.set_default_border(cbi::parse_border(o.border));
        } catch (const std::invalid_argument& e) {
            throw UsageError{"--border", e.what()};
        }
    }
    // A given --schedule runs the nodes that can run it (the others take the
    // default table, --print-pipeline says so); one that runs none of them
    // is a mistake, refused with the reason.
    if (const auto* fixed = std::get_if<cbi::ScheduleSpec>(&graph.default_schedule()); fixed && app.count("--schedule")) {
        std::string why;
        for (cbi::NodeId id = 1; id < static_cast<cbi::NodeId>(graph.nodes().size()); ++id) {
            const auto& n = graph.nodes()[id];
            if (n.options.schedule) continue;
            if (cbi::supports(*fixed, n.op, graph.border_of(id))) return graph;
            if (why.empty())
                why = std::holds_alternative<cbi::Filter>(n.op)
                          ? cbi::why_unsupported(*fixed, std::get<cbi::Filter>(n.op), graph.border_of(id))
                          : cbi::why_unsupported(*fixed, std::get<cbi::BlendFilter>(n.op));
        }
        if (!why.empty()) throw cbi::Unsupported("--schedule", why);  // well formed; no node here takes it
    }
    return graph;
}

fs::path default_output(const fs::path& input) {
    return input.parent_path() / (input.stem().string() + ".cbi" + input.extension().string());
}

cbi::WriteOptions write_options(const CLI::App& app, const Options& o) {
    if (app.count("--quality") && (o.quality < 1 || o.quality > 100))
        throw UsageError{"--quality", std::to_string(o.quality) + " is outside 1..100"};
    if (app.count("--png-compression") && (o.png_compression < 0 || o.png_compression > 9))
        throw UsageError{"--png-compression", std::to_string(o.png_compression) + " is outside 0..9"};
    cbi::WriteOptions w;
    w.quality = o.quality;
    w.png_compression = o.png_compression;
    w.strip = o.strip;
    return w;
}

// An encoding flag that no output uses is a mistake (a --quality meant for
// a PNG, say), refused before any work.
void check_encoding_flags(const CLI::App& app, const std::vector<fs::path>& outputs) {
    if (outputs.empty()) return;
    auto refuse = [&](const char* flag, const char* takes, auto uses) {
        if (!app.count(flag)) return;
        for (const fs::path& out : outputs)
            if (uses(cbi::output_format(out))) return;
        const std::string_view format = cbi::output_format(outputs.front());
        throw UsageError{flag, std::string("applies to ") + takes + " outputs only; " +
                                   (outputs.size() == 1 ? outputs.front().string() + " is " +
                                                              (format.empty() ? std::string("of an unknown format") : std::string(format))
                                                        : std::string("no output of this batch is one"))};
    };
    refuse("--quality", "JPEG and WebP", [](std::string_view f) { return f == "JPEG" || f == "WebP"; });
    refuse("--png-compression", "PNG", [](std::string_view f) { return f == "PNG"; });
}

// Progress on stderr: a bar redrawn in place on a terminal, a plain line
// every few seconds otherwise, nothing with --quiet. Failures always get
// their one-line error as they happen.
class ProgressReporter {
public:
    explicit ProgressReporter(bool quiet) : quiet_(quiet), tty_(::isatty(g_message_fd) == 1) {}

    void operator()(const cbi::BatchProgress& p) {
        if (p.item->status == cbi::ItemStatus::failed) {
            clear_bar();
            say("error: ", p.item->error);
        } else if (!p.item->warning.empty()) {
            clear_bar();
            say("warning: ", p.item->warning);
        }
        // Interrupted: no "done" line for an image that was not; the summary follows.
        if (quiet_ || p.item->status == cbi::ItemStatus::cancelled) return;
        const auto now = std::chrono::steady_clock::now();
        const bool last = p.done == p.total;
        if (!last && now - last_print_ < (tty_ ? std::chrono::milliseconds(100) : std::chrono::seconds(5))) return;
        if (last && !tty_) return;  // the summary line follows
        last_print_ = now;
        const double rate = p.elapsed_s > 0 ? static_cast<double>(p.done) / p.elapsed_s : 0;
        const double eta = rate > 0 ? static_cast<double>(p.total - p.done) / rate : 0;
        std::ostringstream line;
        line << std::fixed << std::setprecision(1);
        if (tty_) {
            constexpr int width = 30;
            const int filled = p.total ? static_cast<int>(width * p.done / p.total) : width;
            line << "\r\033[K[" << std::string(filled, '#') << std::string(width - filled, '.') << "] " << p.done << "/"
                 << p.total << "  " << rate << " img/s  ETA " << format_duration(eta);
            if (p.failed) line << "  " << p.failed << " failed";
            if (last) line << "\n";
            bar_shown_ = !last;
        } else {
            line << kProgram << ": " << p.done << "/" << p.total << " done, " << p.failed << " failed, " << rate
                 << " images/s, ETA " << format_duration(eta) << "\n";
        }
        write_message(line.str());
    }

private:
    static std::string format_duration(double s) {
        const long total = static_cast<long>(s + 0.5);
        char buf[32];
        std::snprintf(buf, sizeof buf, "%ld:%02ld", total / 60, total % 60);
        return buf;
    }
public:
    void clear_bar() {
        if (bar_shown_) write_message("\r\033[K");
        bar_shown_ = false;
    }

private:

    bool quiet_, tty_, bar_shown_ = false;
    std::chrono::steady_clock::time_point last_print_ = std::chrono::steady_clock::now();
};

// --stats for a batch: each stage's busy time, the wall time, each device's share.
std::string format_stats(const cbi::BatchSummary& s) {
    std::ostringstream out;
    out << std::fixed << std::setprecision(3);
    out << "stage          busy_s  lanes  busy/lanes_s\n";
    const cbi::StageStats* busiest = &s.stages.front();
    double all_busy = 0;
    for (const auto& st : s.stages) {
        out << std::left << std::setw(13) << st.name << std::right << std::setw(8) << st.busy_s << std::setw(7)
            << st.lanes << std::setw(14) << st.busy_s / st.lanes << "\n";
        if (st.busy_s / st.lanes > busiest->busy_s / busiest->lanes) busiest = &st;
        all_busy += st.busy_s;
    }
    const double bound = busiest->busy_s / busiest->lanes;
    out << "wall " << s.wall_s << " s, " << s.processed << " processed, " << std::setprecision(2) << s.images_per_s()
        << " images/s; jobs " << s.jobs << ", in flight " << s.in_flight << ", overlap " << (s.overlap ? "on" : "off")
        << "\n";
    // The first ratio shows the overlap (<= 1.15: the stages overlap);
    // the second compares with all stages sharing the worker threads.
    out << "wall / (busiest busy / lanes) = " << (bound > 0 ? s.wall_s / bound : 0) << " (" << busiest->name
        << "); wall / (all busy / jobs) = " << (all_busy > 0 ? s.wall_s / (all_busy / s.jobs) : 0) << "\n";
    if (s.jpeg_on_devices + s.jpeg_on_cpu > 0)
        out << "jpeg decodes: " << s.jpeg_on_devices << " on the devices, " << s.jpeg_on_cpu << " on the CPU ("
            << s.jpeg_on_cpu_after_device << " after the device's decoder refused or was starting)\n";
    for (const auto& d : s.devices) {
        out << "device " << d.name << ": " << d.images << " images, busy " << d.busy_s << " s";
        if (!d.lost.empty()) out << ", taken out: " << terminal_safe(d.lost);
        out << "\n";
    }
    return out.str();
}

// --stats for one image: how long each step took, and the time before main
// (loading libraries), read from /proc at 10 ms resolution. The exit after
// the last step (the device's teardown) is not counted here.
using Clock = std::chrono::steady_clock;
Clock::time_point g_main_start;

double seconds_before_main() {
    std::ifstream stat("/proc/self/stat"), uptime("/proc/uptime");
    std::string line;
    double up = 0;
    if (!std::getline(stat, line) || !(uptime >> up)) return 0;
    // Field 22 (starttime, clock ticks since boot) counts from after the ")" of the name.
    std::istringstream fields(line.substr(line.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 22 && fields >> field; ++i) {
    }
    const double started = std::stod(field) / static_cast<double>(::sysconf(_SC_CLK_TCK));
    const double since_main = std::chrono::duration<double>(Clock::now() - g_main_start).count();
    return std::max(0.0, up - started - since_main);
}

class Steps {
public:
    explicit Steps(bool on) : on_(on), last_(g_main_start) {}
    // The step that ends now.
    void operator()(const char* name) {
        if (!on_) return;
        const Clock::time_point now = Clock::now();
        rows_.emplace_back(name, std::chrono::duration<double>(now - last_).count());
        last_ = now;
    }
    // The steps of run_file, which followed the last one; the device the
    // run used is the line above the steps.
    void add(const cbi::FileReport& report) {
        if (!on_) return;
        device_ = report.device.cuda ? "cuda:" + std::to_string(report.device.index) : "cpu";
        for (const cbi::FileStep& step : report.steps) {
            rows_.emplace_back(step.name, step.seconds);
            last_ += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(step.seconds));
        }
    }
    void print() const {
        if (!on_) return;
        std::ostringstream out;
        out << "device " << device_ << "\n" << std::fixed << std::setprecision(3) << "step                  s\n";
        const auto row = [&](std::string_view name, double s) {
            out << std::left << std::setw(17) << name << std::right << std::setw(6) << s << "\n";
        };
        row("before main", seconds_before_main());
        for (const auto& [name, s] : rows_) row(name, s);
        row("main to here", std::chrono::duration<double>(last_ - g_main_start).count());
        std::cout << out.str();
    }

private:
    bool on_;
    Clock::time_point last_;
    std::vector<std::pair<const char*, double>> rows_;
    std::string device_;
};

void print_tuning_notice(const cbi::RunOptions& run_options) {
    if (run_options.tuning && !run_options.tuning->write_error().empty())
        say("notice: ", run_options.tuning->write_error());
}

// The run options but the device: block, fusion, and the tuning cache when a
// node is tuned (auto).
cbi::RunOptions base_run_options(const Options& o, const cbi::Graph& graph) {
    cbi::RunOptions run_options;
    run_options.block = o.block;
    run_options.fuse = !o.no_fuse;
    if (o.fuse_stencils) run_options.stencil_pairs = cbi::RunOptions::StencilPairs::all;
    bool tuned = false;
    for (cbi::NodeId id = 1; id < static_cast<cbi::NodeId>(graph.nodes().size()); ++id)
        tuned = tuned || std::holds_alternative<cbi::AutoSchedule>(graph.schedule_of(id));
    if (tuned)
        run_options.tuning = std::make_shared<cbi::TuningCache>(
            o.tuning_cache.empty() ? cbi::default_tuning_cache_path() : fs::path(o.tuning_cache));
    return run_options;
}

int host_rank() { return g_ranks ? g_ranks->local_rank() : 0; }

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

int run_batch_mode(const CLI::App& app, const Options& o, const cbi::WriteOptions& write, const cbi::Graph& graph, const cbi::DeviceSpec& device_spec,
                   const std::vector<cbi::DeviceSpec>& device_specs) {
    if (!o.input_dir.empty() && !o.inputs.empty())
        throw UsageError{"IN", "give either --input-dir or input files, not both"};
    if (!o.output.empty() && !o.output_dir.empty())
        throw UsageError{"-o", "give either -o or --output-dir, not both"};
    const fs::path out_dir = o.output_dir.empty() ? o.output : o.output_dir;
    std::error_code ec;
    if (!out_dir.empty() && fs::exists(out_dir, ec) && !fs::is_directory(out_dir, ec))
        throw UsageError{out_dir.string(), "is not a folder; in batch mode -o/--output-dir names the output folder"};
    const cbi::OutputFormat format = cbi::parse_output_format(o.format);  // CLI11 checked the value

    cbi::BatchPlan plan;
    try {
        if (!o.input_dir.empty()) {
            if (out_dir.empty() && !o.in_place)
                throw UsageError{"--input-dir", "--output-dir is required (or --in-place to write NAME.cbi.EXT beside the inputs)"};
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
            say("notice: ", "shard " + std::to_string(shard->index) + "/" + std::to_string(shard->count) + " of the inputs, from " +
                            from_launcher->source);
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
    const cbi::DeviceSpec spec =
        g_ranks && g_ranks->size() > 1 ? device_spec : cbi::choose_device(device_spec, graph, plan.jobs, cbi::parse_codec(o.codec));
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
            const cbi_app::RankCounts mine{p.done - p.failed - p.skipped - p.cancelled, p.failed, p.skipped, p.cancelled};
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
    const cbi::BatchSummary summary = cbi::run_batch(plan, cbi::batch_devices(graph, run_options, device_specs, host_rank()), batch);
    const int signal = g_interrupted.load();
    reporter.clear_bar();

    cbi_app::RankCounts counts{summary.processed, summary.failed, summary.skipped, summary.cancelled};
    if (g_ranks && signal != 0) g_ranks->abandon();  // the launcher is ending the job: no collectives
    else if (g_ranks) counts = g_ranks->combine(counts);
    if ((!o.quiet || signal != 0) && (reports || signal != 0)) {
        const double rate = summary.wall_s > 0 ? static_cast<double>(counts.processed) / summary.wall_s : 0;
        std::ostringstream line;
        line << std::fixed << std::setprecision(1) << kProgram << ": "
             << counts.processed + counts.failed + counts.skipped + counts.cancelled << " files: " << counts.processed
             << " processed, " << counts.failed << " failed, " << counts.skipped << " skipped";
        if (signal != 0)
            line << ", " << counts.cancelled << " not done (interrupted by " << (signal == SIGINT ? "SIGINT" : "SIGTERM")
                 << ")";
        line << " in " << std::setprecision(2) << summary.wall_s << " s (" << rate << " images/s)\n";
        write_message(line.str());
    }
    if (o.stats && !g_ranks) {
        std::cout << format_stats(summary);
    } else if (o.stats && signal == 0) {  // every rank's block, printed by rank 0
        const std::vector<std::string> blocks = g_ranks->gather(format_stats(summary));
        for (std::size_t r = 0; r < blocks.size(); ++r)
            std::cout << (blocks.size() > 1 ? "rank " + std::to_string(r) + " of " + std::to_string(blocks.size()) + ":\n" : "")
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
    cbi::GraphExecutor executor(graph, resolve_run_options(o, cbi::choose_device(device_spec, graph, header, cbi::parse_codec(o.codec)), graph));
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
        throw UsageError{"mpirun", "several ranks share batch work only (--input-dir or several inputs); run one image without mpirun"};
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
        throw UsageError{"--device", "a device list (" + o.device + ") applies to batch mode; give one device for one image"};
    const cbi::DeviceSpec device_spec = devices.front().index == cbi::kAllDevices ? cbi::DeviceSpec{cbi::DeviceSpec::Kind::cuda} : devices.front();
    const cbi::Graph graph = build_graph(app, o);
    const cbi::WriteOptions write = write_options(app, o);

    // The limit must cover --jobs too: an arena asking for more workers than
    // the limit gets fewer (and TBB warns).
    std::optional<tbb::global_control> thread_limit;
    if (o.threads > 0 || o.jobs > 0)
        thread_limit.emplace(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(std::max(o.threads, o.jobs)));

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
        if (kind == cbi::FileOptions::Message::warning) say("warning: ", text);
        else if (!g_ranks || g_ranks->rank() == 0) say("notice: ", text);
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
    std::unique_ptr<cbi_app::MpiRanks> ranks;  // under an MPI launcher: this rank (after the signal thread: MPI's threads inherit its mask)
    try {
        ranks = cbi_app::MpiRanks::join_if_launched(&argc, &argv);
    } catch (const std::exception& e) {
        return fail(kExitRuntime, "MPI", e.what());
    }
    g_ranks = ranks.get();
    CLI::App app{"cbi-filter: image filters with selectable thread schedules (CPU or CUDA)", kProgram};
    Options o;
    app.add_option("IN", o.inputs, "input image(s) (PNG, JPEG, TIFF, BMP, ...: 8/16-bit or float, 1/3/4 channels)");
    app.add_option("-o,--output", o.output,
                   "output image (default: IN's name with .cbi before the extension); with several inputs, the output folder");
    auto filter_flag = [&](const std::string& name, std::vector<std::string>& values, const std::string& help,
                           const std::string& type) {
        app.add_option(name, values, help)->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
            ->type_name(type);
    };
    for (const auto& kind : cbi::filter_kinds()) {
        const std::string name(kind.name);
        // The flag's value is the stage's text after "NAME:": its form without
        // "NAME:" (or "NAME[:" and the closing bracket).
        std::string args(kind.form.substr(name.size()));
        if (args.starts_with("[:") && args.ends_with("]")) args = args.substr(2, args.size() - 3);
        else if (args.starts_with(":")) args = args.substr(1);
        filter_flag(("--" + name).c_str(), o.filter_flags[name], (std::string(kind.help) + " (" + std::string(kind.opencv) + ")").c_str(),
                    args.empty() ? "ARGS" : args);
    }
    app.add_option("--border", o.border, "reflect101 (default), reflect, replicate, constant[:V] or wrap");
    app.add_option("--schedule", o.schedule,
                   "thread schedule: default (the default table's fastest per node; the default), a registered one "
                   "e.g. column:32, sep:128x32+column:4 (--list-schedules), or auto: the fastest of the table's "
                   "candidates, timed once per device/filter/size class and cached");
    app.add_option("--tuning-cache", o.tuning_cache, "where auto keeps its choices (default $XDG_CACHE_HOME/cbi/tuning.json)")
        ->type_name("PATH");
    app.add_option("--device", o.device,
                   "auto (default: the CPU where the filters' expected time is within CUDA's start, for one image "
                   "or a whole batch; else CUDA), cpu, cuda or cuda:N; in batch mode also several GPUs: cuda:all or "
                   "cuda:0,2");
    app.add_option("--codec", o.codec,
                   "where JPEG files are decoded and encoded: auto (default: in batch mode on a CUDA device with "
                   "nvJPEG, OpenCV and the GPU at once, so bytes may differ from run to run; one image, and other "
                   "devices: OpenCV), cpu, or gpu (reproducible; an error where nvJPEG or CUDA is missing); other "
                   "formats always use the CPU")
        ->check(CLI::IsMember({"auto", "cpu", "gpu"}));
    app.add_option("--block", o.block, "CUDA threads per block")->check(CLI::Range(1, 1024));
    app.add_option("--threads", o.threads, "CPU worker threads (default: all cores)")->check(CLI::Range(1, 4096));
    app.add_option("--max-pixels", o.max_pixels, "refuse images with more pixels, checked before decoding (default 2^" +
                                                   std::to_string(std::bit_width(cbi::default_max_pixels) - 1) + ")")
        ->check(CLI::Range(std::uint64_t{1}, cbi::max_schedulable_pixels));
    app.add_option("--max-memory", o.max_memory,
                   "refuse images whose decoded pixels need more memory, checked before decoding (e.g. 512MiB, 8GiB; "
                   "default 4GiB); a batch holds at most --in-flight such images")
        ->transform(CLI::AsSizeValue(true))
        ->check(CLI::Range(std::uint64_t{1}, std::numeric_limits<std::uint64_t>::max()))
        ->type_name("BYTES");
    app.add_flag("--list-schedules", o.list_schedules, "print every registered schedule and exit");
    app.add_flag("--list-filters", o.list_filters, "print every filter kind (its form, help and OpenCV equivalent) and exit");
    app.add_option("--pipeline", o.pipeline, "a chain: \"color:gray | gaussian:5:1.2@column:32 | sobel:mag@tile:32x8\"")
        ->type_name("TEXT");
    app.add_option("--pipeline-file", o.pipeline_file, "a DAG in JSON: named nodes, edges, outputs (README: Pipelines)")
        ->type_name("FILE.json");
    app.add_flag("--no-fuse", o.no_fuse,
                 "run every node on its own, its output stored (no colour node or stencil fused into the stencil that reads it)");
    app.add_flag("--fuse-stencils", o.fuse_stencils,
                 "fuse every stencil pair a kernel takes, and on the CPU colour nodes too (through line buffers; by default "
                 "only what was measured faster fused: on the GPU 8-bit pairs on stream that end in a 3x3 Sobel, read a "
                 "gray conversion of a 3-channel image, or are a Gaussian before a Gaussian or a Sobel; on the CPU nothing)")
        ->excludes("--no-fuse");
    app.add_flag("--print-pipeline", o.print_pipeline,
                 "print the resolved graph (nodes, schedules, borders, buffer reuse for IN's size) and exit");
    app.add_flag("--stats", o.stats,
                 "print where the time went on stdout: per step for one image, per stage (busy time, wall time, "
                 "images/s), JPEG decodes and per device in batch mode (under mpirun: every rank's, printed by rank 0)");
    auto* batch = app.add_option_group("Batch mode", "a folder (--input-dir) or several inputs");
    batch->add_option("--input-dir", o.input_dir, "process the images in this folder");
    batch->add_option("--output-dir", o.output_dir, "write the outputs here, sub-folders mirrored (not the input folder)");
    batch->add_flag("--recursive", o.recursive, "descend into sub-folders");
    batch->add_option("--pattern", o.pattern, "file-name glob, e.g. '*.png' (default: every image extension)");
    batch->add_option("--format", o.format, "output format: same (default), png, jpg or tiff")
        ->check(CLI::IsMember({"same", "png", "jpg", "tiff"}));
    batch->add_option("--jobs", o.jobs, "worker threads (default: --threads, else all cores)")->check(CLI::Range(1, 4096));
    batch->add_option("--in-flight", o.in_flight, "images in flight at once (default: 2 x jobs)")->check(CLI::Range(1, 4096));
    batch->add_option("--shard", o.shard,
                      "K/N: process the K-th of N parts of the inputs (by a hash of each file's path relative to "
                      "--input-dir: stable as files come and go); default: a Slurm array task's or step's part")
        ->type_name("K/N");
    batch->add_flag("--skip-existing", o.skip_existing, "keep outputs that already exist (resumes a killed run)");
    batch->add_flag("--in-place", o.in_place, "allow the output folder to be the input folder (outputs NAME.cbi.EXT)");
    batch->add_flag("--no-overlap", o.no_overlap, "run the stages one image at a time (for comparison)");
    batch->add_flag("--quiet", o.quiet, "no progress and no summary; errors only");
    auto* output = app.add_option_group("Output", "encoding and metadata of every output (single image and batch)");
    output->add_option("--quality", o.quality, "JPEG and WebP quality 1..100 (default: JPEG 95, WebP lossless)")
        ->type_name("Q");
    output->add_option("--png-compression", o.png_compression,
                       "PNG zlib level 0 (none) .. 9 (smallest, slowest); pixels are the same at every level (default: "
                       "OpenCV's fast level 1, large images in bands on all cores; a level given: OpenCV's encoder on one core)")
        ->type_name("L");
    output->add_flag("--strip", o.strip,
                     cbi::metadata_supported()
                         ? "write no metadata; by default the input's EXIF (Orientation set to 1 where the pixels were "
                           "turned), ICC profile and XMP are kept in JPEG, PNG, TIFF and WebP outputs (exiv2)"
                         : "write no metadata (this build has no exiv2: outputs never carry the input's EXIF, ICC "
                           "profile or XMP)");
    app.set_version_flag("--version", std::string("cbi-filter ") + CBI_VERSION +
                                          (cbi::built_with_cuda() ? " (CUDA backend)" : " (CPU backend only)"));

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
        // that CUDA is not torn down under it. Every output is written and
        // renamed by now; MPI is finalised, the streams flushed, and _exit
        // skips the teardown.
        if (cbi::gpu_codec_starting()) {
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
