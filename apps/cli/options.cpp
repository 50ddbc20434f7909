// cbi-filter's options (options.hpp).
#include "options.hpp"

#include <algorithm>
#include <bit>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <variant>

#include "filters/filter.hpp"
#include "filters/kinds/args.hpp"
#include "pipeline/error.hpp"
#include "pipeline/tuning.hpp"
#include "schedules/registry.hpp"

namespace cbi_app {

namespace fs = std::filesystem;

namespace {

// A flag's value read from a file (--filter2d @kernel.txt), for kernels too
// long for a command line (Linux takes 128 KiB an argument: about 100x100
// taps): each line that is not blank or a '#' comment is a row (';'), its
// numbers separated by spaces, tabs or commas (',') — what numpy.savetxt,
// a CSV or MATLAB's writematrix write. cbi::Error (exit 1) naming the file
// where it cannot be read.
std::string value_from_file(const std::string& flag, const std::string& value) {
    const std::string path = value.substr(1);
    std::ifstream in(path, std::ios::binary);
    if (!in) throw cbi::Error(path, "cannot open the file of " + flag + " " + value);
    std::error_code ec;
    if (fs::file_size(path, ec) > (16u << 20) && !ec)  // a 255x255 kernel written with 25 digits is 1.6 MB
        throw cbi::Error(path, "over 16 MiB: not the text of a kernel (" + flag + " " + value + ")");
    std::string rows, line;
    while (std::getline(in, line)) {
        std::string row;
        for (std::size_t i = 0; i < line.size();) {
            const std::size_t start = line.find_first_not_of(" \t\r,", i);
            if (start == std::string::npos || line[start] == '#') break;
            const std::size_t end = std::min(line.find_first_of(" \t\r,", start), line.size());
            row += (row.empty() ? "" : ",") + line.substr(start, end - start);
            i = end;
        }
        if (!row.empty()) rows += (rows.empty() ? "" : ";") + row;
    }
    if (in.bad()) throw cbi::Error(path, "cannot read the file of " + flag + " " + value);
    return rows;
}

// The filter flags as a chain in command-line order; the nodes take the
// graph's default schedule and border.
cbi::Graph chain_from_flags(const CLI::App& app, const Options& o) {
    std::map<const CLI::Option*, std::size_t> seen;
    cbi::Graph graph;
    cbi::NodeId last = cbi::Graph::input();
    for (const CLI::Option* opt : app.parse_order()) {
        const std::string name = opt->get_name();
        const auto values =
            name.size() > 2 ? o.filter_flags.find(std::string_view(name).substr(2)) : o.filter_flags.end();
        if (values == o.filter_flags.end()) continue;
        if (o.bare_filter_flags.contains(values->first)) {  // a kind without arguments (--hsv)
            last = graph.add_filter("n" + std::to_string(graph.nodes().size()), cbi::parse_filter(values->first), last);
            continue;
        }
        const std::string& given = values->second[seen[opt]++];
        if (given.empty()) throw UsageError{name, "needs a value (see --help)"};
        const std::string value = given.starts_with('@') ? value_from_file(name, given) : given;
        try {
            // --NAME ARGS is the pipeline stage NAME:ARGS.
            const cbi::Filter filter = cbi::parse_filter(values->first + ":" + value);
            last = graph.add_filter("n" + std::to_string(graph.nodes().size()), filter, last);
        } catch (const std::invalid_argument& e) {
            throw UsageError{name + " " + cbi::args::excerpt(given), e.what()};
        }
    }
    graph.add_output(last);
    return graph;
}

}  // namespace

void add_options(CLI::App& app, Options& o) {
    app.add_option("IN", o.inputs, "input image(s) (PNG, JPEG, TIFF, BMP, ...: 8/16-bit or float, 1/3/4 channels)");
    app.add_option(
        "-o,--output", o.output,
        "output image (default: IN's name with .cbi before the extension); with several inputs, the output folder");
    auto filter_flag = [&](const std::string& name, std::vector<std::string>& values, const std::string& help,
                           const std::string& type) {
        app.add_option(name, values, help)
            ->expected(1)
            ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
            ->type_name(type);
    };
    for (const auto& kind : cbi::filter_kinds()) {
        const std::string name(kind.name);
        // The flag's value is the stage's text after "NAME:": its form without
        // "NAME:" (or "NAME[:" and the closing bracket).
        std::string args(kind.form.substr(name.size()));
        if (args.starts_with("[:") && args.ends_with("]"))
            args = args.substr(2, args.size() - 3);
        else if (args.starts_with(":"))
            args = args.substr(1);
        if (args.empty()) {  // no arguments: a flag that takes no value
            o.filter_flags[name];
            o.bare_filter_flags.insert(name);
            app.add_flag("--" + name)->description(std::string(kind.help) + " (" + std::string(kind.opencv) + ")");
            continue;
        }
        filter_flag(("--" + name).c_str(), o.filter_flags[name],
                    (std::string(kind.help) + " (" + std::string(kind.opencv) + ")").c_str(),
                    args.empty() ? "ARGS" : args);
    }
    app.add_option("--border", o.border,
                   "reflect101, reflect, replicate, constant[:V|:max] or wrap (default: each filter's OpenCV default: "
                   "reflect101; morphology constant:max; median replicate)");
    app.add_option("--schedule", o.schedule,
                   "thread schedule: default (the default table's fastest per node; the default), a registered one "
                   "e.g. column:32, sep:128x32+column:4 (--list-schedules), or auto: the fastest of the table's "
                   "candidates, timed once per device/filter/size class and cached");
    app.add_option("--tuning-cache", o.tuning_cache,
                   "where auto keeps its choices (default $XDG_CACHE_HOME/cbi/tuning.json)")
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
    app.add_option("--max-pixels", o.max_pixels,
                   "refuse images with more pixels, checked before decoding (default 2^" +
                       std::to_string(std::bit_width(cbi::default_max_pixels) - 1) + ")")
        ->check(CLI::Range(std::uint64_t{1}, cbi::max_schedulable_pixels));
    app.add_option("--max-memory", o.max_memory,
                   "refuse images whose decoded pixels need more memory, checked before decoding (e.g. 512MiB, 8GiB; "
                   "default 4GiB); a batch holds at most --in-flight such images")
        ->transform(CLI::AsSizeValue(true))
        ->check(CLI::Range(std::uint64_t{1}, std::numeric_limits<std::uint64_t>::max()))
        ->type_name("BYTES");
    app.add_flag("--list-schedules", o.list_schedules, "print every registered schedule and exit");
    app.add_flag("--list-filters", o.list_filters,
                 "print every filter kind (its form, help and OpenCV equivalent) and exit");
    app.add_option("--pipeline", o.pipeline, "a chain: \"color:gray | gaussian:5:1.2@column:32 | sobel:mag@tile:32x8\"")
        ->type_name("TEXT");
    app.add_option("--pipeline-file", o.pipeline_file, "a DAG in JSON: named nodes, edges, outputs (README: Pipelines)")
        ->type_name("FILE.json");
    app.add_flag("--no-fuse", o.no_fuse,
                 "run every node on its own, its output stored (no colour node or stencil fused into the stencil that "
                 "reads it, no threshold, scale or gamma applied by the kernel before it)");
    app.add_flag(
           "--fuse-stencils", o.fuse_stencils,
           "fuse every stencil pair a kernel takes, and on the CPU colour nodes too (through line buffers; by default "
           "only what was measured faster fused: on the GPU 8-bit pairs on stream that end in a 3x3 Sobel, read a "
           "gray conversion of a 3-channel image, or are a Gaussian before a Gaussian or a Sobel; on the CPU no pair)")
        ->excludes("--no-fuse");
    app.add_flag("--print-pipeline", o.print_pipeline,
                 "print the resolved graph (nodes, schedules, borders, buffer reuse for IN's size) and exit");
    app.add_flag(
        "--stats", o.stats,
        "print where the time went on stdout: per step for one image, per stage (busy time, wall time, "
        "images/s), JPEG decodes and per device in batch mode (under mpirun: every rank's, printed by rank 0)");
    auto* batch = app.add_option_group("Batch mode", "a folder (--input-dir) or several inputs");
    batch->add_option("--input-dir", o.input_dir, "process the images in this folder");
    batch->add_option("--output-dir", o.output_dir,
                      "write the outputs here, sub-folders mirrored (not the input folder)");
    batch->add_flag("--recursive", o.recursive, "descend into sub-folders");
    batch->add_option("--pattern", o.pattern, "file-name glob, e.g. '*.png' (default: every image extension)");
    batch->add_option("--format", o.format, "output format: same (default), png, jpg or tiff")
        ->check(CLI::IsMember({"same", "png", "jpg", "tiff"}));
    batch->add_option("--jobs", o.jobs, "worker threads (default: --threads, else all cores)")
        ->check(CLI::Range(1, 4096));
    batch->add_option("--in-flight", o.in_flight, "images in flight at once (default: 2 x jobs)")
        ->check(CLI::Range(1, 4096));
    batch
        ->add_option("--shard", o.shard,
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
    output
        ->add_option(
            "--png-compression", o.png_compression,
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
    std::cout
        << "auto        the fastest of the default table's candidates for the node, timed on its first run (on the "
           "CPU on a band of rows) and kept in the tuning cache\n"
           "+ORDER      smem, sep and stream walk their tiles or strips in an order: naive (row-major, the "
           "default), column:W, zigzag:W or tile:WxH over tiles, e.g. sep:128x32+column:4\n";
}

// The pipeline from --pipeline, --pipeline-file or the filter flags. The
// global --schedule/--border are the defaults of nodes without their own;
// given explicitly, they also replace a pipeline file's defaults.
cbi::Graph build_graph(const CLI::App& app, const Options& o) {
    std::size_t flag_count = 0;
    std::string flag_names;
    for (const auto& kind : cbi::filter_kinds()) {
        flag_count += o.filter_flags.find(kind.name)->second.size();
        if (o.bare_filter_flags.contains(kind.name)) flag_count += app.count("--" + std::string(kind.name));
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
    if (app.count("--border") > 0) {
        try {
            graph.set_default_border(cbi::parse_border(o.border));
        } catch (const std::invalid_argument& e) {
            throw UsageError{"--border", e.what()};
        }
    }
    // A given --schedule runs the nodes that can run it (the others take the
    // default table, --print-pipeline says so); one that runs none of them
    // is a mistake, refused with the reason.
    if (const auto* fixed = std::get_if<cbi::ScheduleSpec>(&graph.default_schedule());
        fixed && app.count("--schedule")) {
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

void check_encoding_flags(const CLI::App& app, const std::vector<fs::path>& outputs) {
    if (outputs.empty()) return;
    auto refuse = [&](const char* flag, const char* takes, auto uses) {
        if (!app.count(flag)) return;
        for (const fs::path& out : outputs)
            if (uses(cbi::output_format(out))) return;
        const std::string_view format = cbi::output_format(outputs.front());
        throw UsageError{flag, std::string("applies to ") + takes + " outputs only; " +
                                   (outputs.size() == 1 ? outputs.front().string() + " is " +
                                                              (format.empty() ? std::string("of an unknown format")
                                                                              : std::string(format))
                                                        : std::string("no output of this batch is one"))};
    };
    refuse("--quality", "JPEG and WebP", [](std::string_view f) { return f == "JPEG" || f == "WebP"; });
    refuse("--png-compression", "PNG", [](std::string_view f) { return f == "PNG"; });
}

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

}  // namespace cbi_app
