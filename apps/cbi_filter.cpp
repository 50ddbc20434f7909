// cbi-filter: run a chain of filters on one image.
//   cbi-filter in.png --blur 9 --schedule column:32 -o out.png
// Filter flags apply in command-line order. Exit codes: 0 success, 1 runtime
// or data error, 2 usage error (DESIGN.md section 4).
#include <CLI/CLI.hpp>
#include <tbb/global_control.h>

#include <cstdint>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "filters/filter.hpp"
#include "pipeline/error.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/image_io.hpp"
#include "pipeline/opencv.hpp"
#include "schedules/registry.hpp"

namespace fs = std::filesystem;

namespace {

constexpr const char* kProgram = "cbi-filter";
constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

struct Options {
    std::string input;
    std::string output;
    std::string border = "reflect101";
    std::string schedule = "naive";
    std::string device = "auto";
    int block = 256;
    int threads = 0;
    std::uint64_t max_pixels = std::uint64_t{1} << 28;
    bool list_schedules = false;
    // One vector per filter flag; their order on the command line is
    // recovered from CLI11's parse order.
    std::vector<std::string> blur, gaussian, sobel, color;
};

// A usage error tied to one option: exit 2.
struct UsageError {
    std::string subject, reason;
};

int fail(int code, const std::string& subject, const std::string& reason) {
    std::cerr << kProgram << ": error: " << (subject.empty() ? "" : subject + ": ") << reason << "\n";
    return code;
}

void list_schedules() {
    for (const auto& e : cbi::schedule_registry())
        std::cout << e.form << std::string(e.form.size() < 12 ? 12 - e.form.size() : 1, ' ') << e.description << "\n";
}

// The filter chain in command-line order.
std::vector<cbi::Node> build_chain(const CLI::App& app, const Options& o, const cbi::Border& border,
                                   const cbi::ScheduleSpec& schedule) {
    std::map<const CLI::Option*, std::size_t> seen;
    std::vector<cbi::Node> nodes;
    for (const CLI::Option* opt : app.parse_order()) {
        const std::string name = opt->get_name();
        const std::vector<std::string>* values = name == "--blur"       ? &o.blur
                                                 : name == "--gaussian" ? &o.gaussian
                                                 : name == "--sobel"    ? &o.sobel
                                                 : name == "--color"    ? &o.color
                                                                        : nullptr;
        if (!values) continue;
        const std::string& value = (*values)[seen[opt]++];
        try {
            cbi::Filter filter = name == "--blur"       ? cbi::Filter(cbi::parse_box(value))
                                 : name == "--gaussian" ? cbi::Filter(cbi::parse_gaussian(value))
                                 : name == "--sobel"    ? cbi::Filter(cbi::parse_sobel(value))
                                                        : cbi::Filter(cbi::parse_color(value));
            nodes.push_back({filter, border, schedule});
        } catch (const std::invalid_argument& e) {
            throw UsageError{name + " " + value, e.what()};
        }
    }
    return nodes;
}

fs::path default_output(const fs::path& input) {
    return input.parent_path() / (input.stem().string() + ".cbi" + input.extension().string());
}

int run(const CLI::App& app, const Options& o) {
    if (o.list_schedules) {
        list_schedules();
        return 0;
    }
    if (o.input.empty()) throw UsageError{"IN", "an input image is required (see --help)"};

    cbi::Border border;
    cbi::ScheduleSpec schedule;
    cbi::DeviceSpec device_spec;
    try {
        border = cbi::parse_border(o.border);
    } catch (const std::invalid_argument& e) {
        throw UsageError{"--border", e.what()};
    }
    try {
        schedule = cbi::parse_schedule(o.schedule);
    } catch (const std::invalid_argument& e) {
        throw UsageError{"--schedule", e.what()};
    }
    try {
        device_spec = cbi::parse_device(o.device);
    } catch (const std::invalid_argument& e) {
        throw UsageError{"--device", e.what()};
    }
    const auto nodes = build_chain(app, o, border, schedule);

    const fs::path input = o.input;
    const fs::path output = o.output.empty() ? default_output(input) : fs::path(o.output);
    if (cbi::same_file(input, output))
        throw UsageError{"-o " + output.string(), "is the input file; cbi never overwrites its input"};

    std::optional<tbb::global_control> thread_limit;
    if (o.threads > 0) thread_limit.emplace(tbb::global_control::max_allowed_parallelism, o.threads);

    cbi::RunOptions run_options;
    run_options.device = cbi::resolve_device(device_spec);
    run_options.block = o.block;
    if (!run_options.device.notice.empty()) std::cerr << kProgram << ": notice: " << run_options.device.notice << "\n";

    const cv::Mat image = cbi::read_image(input, o.max_pixels);
    int out_channels = 0;
    try {
        out_channels = cbi::check_chain(nodes, cbi::view_of(image));
    } catch (const cbi::Error& e) {
        throw cbi::Error(input.string(), e.what());  // name the file the chain cannot take
    }
    // Refuse an output format that cannot hold the result before the work.
    cbi::check_output_format(output, CV_MAKETYPE(image.depth(), out_channels));
    const cbi::Image result = cbi::run_chain(nodes, cbi::view_of(image), run_options);
    cbi::write_image_atomic(output, cbi::as_mat(result.view()));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"cbi-filter: image filters with selectable thread schedules (CPU or CUDA)", kProgram};
    Options o;
    app.add_option("IN", o.input, "input image (PNG, JPEG, TIFF, BMP, ...: 8/16-bit or float, 1/3/4 channels)");
    app.add_option("-o,--output", o.output, "output image (default: IN's name with .cbi before the extension)");
    auto filter_flag = [&](const char* name, std::vector<std::string>& values, const char* help) {
        app.add_option(name, values, help)->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
            ->type_name("ARG");
    };
    filter_flag("--blur", o.blur, "box blur K x K (cv::blur); K odd, 1..255");
    filter_flag("--gaussian", o.gaussian, "Gaussian K[:SIGMA] (cv::GaussianBlur); SIGMA 0 or absent: from K");
    filter_flag("--sobel", o.sobel, "Sobel x|y|mag[:KSIZE], KSIZE 1/3/5/7 (default mag:3)");
    filter_flag("--color", o.color, "colour matrix gray|sepia|ycrcb or 9/12 numbers m00,m01,... on (R,G,B[,1])");
    app.add_option("--border", o.border, "reflect101 (default), reflect, replicate, constant[:V] or wrap");
    app.add_option("--schedule", o.schedule, "thread schedule, e.g. naive, column:32, zigzag:32, tile:32x8 (--list-schedules)");
    app.add_option("--device", o.device, "auto (default), cpu, cuda or cuda:N");
    app.add_option("--block", o.block, "CUDA threads per block")->check(CLI::Range(1, 1024));
    app.add_option("--threads", o.threads, "CPU worker threads (default: all cores)")->check(CLI::Range(1, 4096));
    app.add_option("--max-pixels", o.max_pixels, "refuse images with more pixels, checked before decoding (default 2^28)")
        ->check(CLI::Range(std::uint64_t{1}, cbi::max_schedulable_pixels));
    app.add_flag("--list-schedules", o.list_schedules, "print every registered schedule and exit");
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
        return run(app, o);
    } catch (const UsageError& e) {
        return fail(kExitUsage, e.subject, e.reason);
    } catch (const cbi::Error& e) {
        return fail(kExitRuntime, "", e.what());
    } catch (const cv::Exception& e) {
        return fail(kExitRuntime, o.input, "OpenCV: " + e.msg);
    } catch (const std::bad_alloc&) {
        return fail(kExitRuntime, o.input, "out of memory");
    } catch (const std::exception& e) {
        return fail(kExitRuntime, o.input, e.what());
    }
}
