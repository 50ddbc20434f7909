// cbi-bench: times cbi's kernels and the thesis' workloads with CUDA events
// (median of >= 20 runs after warm-up), next to the memory-bandwidth floor
// measured in the same run. Every configuration is validated before it is
// timed; inputs are random; inputs rotate when the working set fits in L2.
// Suites (--suite, repeatable):
//   filters         cbi filters x schedules x blocks x images (cbi's own kernels)
//   thesis-stencil  thesis Fig. 5.1a / 5.2: 9x9 box, 4096^2 and 4037^2 float,
//                   column widths 4..2048 and naive, blocks 32..1024
//   thesis-sizes    thesis Fig. 5.3: time relative to naive, N = 2^8..2^13
//   matmul          thesis Fig. 5.1b / 5.4 (naive, column:W over C) plus shared-
//                   memory, register-tiled and Volkov-style kernels and cuBLAS
//   cpu             OpenCV vs cbi's CPU backend, same thread count (no GPU needed)
//   cbi-bench --suite filters --size 4096x4096 --image 32f:1 --csv out.csv --json out.json
#include <cuda_runtime_api.h>
#include <tbb/global_control.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "apps/bench/matmul.hpp"
#include "apps/bench/stencil.hpp"
#include "apps/reference/opencv_reference.hpp"
#include "filters/cpu/backend.hpp"
#include "filters/cuda/backend.hpp"
#include "pipeline/cuda_runtime.hpp"
#include "pipeline/defaults.hpp"
#include "pipeline/error.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/opencv.hpp"

namespace {

using namespace cbi;

struct Options {
    std::vector<std::string> suites{"filters"};
    std::vector<std::string> sizes{"4096x4096"};
    std::vector<std::string> images{"32f:1", "8u:3"};
    std::vector<std::string> filters{"blur:9", "gaussian:9", "sobel:mag:3", "color:sepia"};
    std::vector<std::string> pipelines;  // filters suite: whole pipelines, fused and unfused
    std::vector<std::string> schedules{"naive", "column:32", "zigzag:32", "tile:32x8"};
    std::vector<int> blocks{256};
    std::string border = "reflect101";
    int runs = 25;
    int warmup = 3;
    int device = 0;
    bool quick = false;  // smaller sweeps, for a smoke test
    std::string dump_dir;
    int cpu_threads = 0;
    std::string cpu_size = "2048x2048";
    int cpu_runs = 7;
    std::vector<std::string> cpu_schedules{"naive"};  // cpu suite: cbi's schedules (the first is labelled cbi-cpu)
    std::string csv, json;
};

struct Timing {
    double median_ms = 0, min_ms = 0, max_ms = 0;
    std::size_t runs = 0;
};

Timing summarize(std::vector<float> ms) {
    std::sort(ms.begin(), ms.end());
    const std::size_t n = ms.size();
    const double median = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
    return {median, ms.front(), ms.back(), n};
}

// The GPU context shared by the suites: device facts, stream, events, floor.
struct Gpu {
    cudaDeviceProp prop{};
    Stream stream;
    EventTimer events;
    double bandwidth = 0;  // device-to-device copy, bytes read + written per second
    int warmup = 3, runs = 25;

    // Times `work` enqueued on the stream, in milliseconds.
    template <class F>
    float time_once(F&& work) {
        events.start(stream.get());
        work();
        return events.stop_ms(stream.get());
    }
    // Median etc. of `runs` timed calls after `warmup` untimed ones; launch(i)
    // gets the run index so the caller can rotate inputs.
    Timing time(const std::function<void(int)>& launch) {
        std::vector<float> ms;
        for (int i = 0; i < warmup + runs; ++i) {
            const float t = time_once([&] { launch(i); });
            if (i >= warmup) ms.push_back(t);
        }
        return summarize(ms);
    }
    // Input sets needed so consecutive runs cannot be served from L2.
    int rotations(std::size_t bytes_per_set) const {
        const std::size_t l2 = static_cast<std::size_t>(prop.l2CacheSize);
        return static_cast<int>(std::min<std::size_t>(256, 2 * l2 / std::max<std::size_t>(bytes_per_set, 1) + 1));
    }
};

// Device-to-device copy bandwidth (bytes read + bytes written per second).
double copy_bandwidth(Gpu& gpu) {
    const std::size_t bytes = std::size_t{1} << 30;
    DeviceBuffer a(bytes), b(bytes);
    CBI_CUDA_CHECK(cudaMemsetAsync(a.data(), 1, bytes, gpu.stream.get()), "cudaMemset");
    std::vector<float> ms;
    for (int i = 0; i < 23; ++i) {
        const float t = gpu.time_once([&] {
            CBI_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, gpu.stream.get()),
                           "copy");
        });
        if (i >= 3) ms.push_back(t);
    }
    return 2.0 * bytes / (summarize(ms).median_ms * 1e-3);
}

// One row of results, the same columns for every suite (and for the peers'
// scripts, which write this CSV header too).
struct Row {
    std::string suite, workload, variant;
    int block = 0, width = 0, height = 0;
    std::string depth;
    int channels = 1;
    Timing t;
    double bytes = 0, flops = 0, floor_ms = 0;
};

class Report {
public:
    static constexpr const char* header =
        "suite,workload,variant,block,width,height,depth,channels,median_ms,min_ms,max_ms,runs,bytes,flops,GBps,"
        "GFLOPs,floor_ms,x_floor";

    explicit Report(nlohmann::json facts) : doc_(std::move(facts)) {
        doc_["results"] = nlohmann::json::array();
        csv_ << header << "\n";
    }
    nlohmann::json& doc() { return doc_; }

    void add(const Row& r) {
        const double s = r.t.median_ms * 1e-3;
        const double gbps = r.bytes > 0 ? r.bytes / s / 1e9 : 0;
        const double gflops = r.flops > 0 ? r.flops / s / 1e9 : 0;
        const double x_floor = r.floor_ms > 0 ? r.t.median_ms / r.floor_ms : 0;
        std::cout << std::left << std::setw(15) << r.suite << std::setw(14) << r.workload << std::setw(16) << r.variant
                  << std::setw(6) << r.block << std::setw(18)
                  << (std::to_string(r.width) + "x" + std::to_string(r.height) + " " + r.depth + ":" +
                      std::to_string(r.channels))
                  << std::right << std::fixed << std::setprecision(4) << std::setw(10) << r.t.median_ms << std::setw(10)
                  << r.t.min_ms << std::setprecision(0) << std::setw(8) << gbps;
        if (r.flops > 0) std::cout << std::setw(8) << gflops << " GFLOP/s";
        if (x_floor > 0) std::cout << std::setprecision(2) << std::setw(8) << x_floor << "x floor";
        std::cout << "\n";
        // A workload with commas (filter2d's taps) is quoted, as RFC 4180.
        const bool quote = r.workload.find(',') != std::string::npos;
        csv_ << r.suite << "," << (quote ? "\"" + r.workload + "\"" : r.workload) << "," << r.variant << "," << r.block
             << "," << r.width << "," << r.height << "," << r.depth << "," << r.channels << "," << std::setprecision(6)
             << std::defaultfloat << r.t.median_ms << "," << r.t.min_ms << "," << r.t.max_ms << "," << r.t.runs << ","
             << r.bytes << "," << r.flops << "," << gbps << "," << gflops << "," << r.floor_ms << "," << x_floor
             << "\n";
        doc_["results"].push_back({{"suite", r.suite},
                                   {"workload", r.workload},
                                   {"variant", r.variant},
                                   {"block", r.block},
                                   {"width", r.width},
                                   {"height", r.height},
                                   {"depth", r.depth},
                                   {"channels", r.channels},
                                   {"median_ms", r.t.median_ms},
                                   {"min_ms", r.t.min_ms},
                                   {"max_ms", r.t.max_ms},
                                   {"runs", r.t.runs},
                                   {"bytes", r.bytes},
                                   {"flops", r.flops},
                                   {"GBps", gbps},
                                   {"GFLOPs", gflops},
                                   {"floor_ms", r.floor_ms},
                                   {"x_floor", x_floor}});
    }
    void fail(const std::string& what) {
        std::cout << what << ": OUTPUT DIFFERS FROM THE REFERENCE, not timed\n";
        doc_["failures"].push_back(what);
        ++failures_;
    }
    int failures() const { return failures_; }
    void write(const std::string& csv, const std::string& json) const {
        if (!csv.empty()) std::ofstream(csv) << csv_.str();
        if (!json.empty()) std::ofstream(json) << doc_.dump(2) << "\n";
    }

private:
    nlohmann::json doc_;
    std::ostringstream csv_;
    int failures_ = 0;
};

// Integer outputs within `int_tol` (0: bit-exact), float within rel_tol of
// the result's scale (at least 1).
bool matches(const cv::Mat& got, const cv::Mat& ref, double rel_tol = 1e-5, double int_tol = 0) {
    return reference::compare(got, ref, int_tol, rel_tol, 1.0).ok;
}

std::string now_utc() {
    const std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
}

void parse_size(const std::string& text, int& w, int& h) {
    if (std::sscanf(text.c_str(), "%dx%d", &w, &h) != 2 || w <= 0 || h <= 0)
        throw std::invalid_argument("size '" + text + "' must be WxH");
}

struct ImageFormat {
    Depth depth;
    int channels;
    std::string depth_text;  // "8u", "16u", "32f"
};

ImageFormat parse_image(const std::string& text) {
    const auto colon = text.find(':');
    ImageFormat f;
    f.depth_text = text.substr(0, colon);
    f.channels = colon == std::string::npos ? 1 : std::atoi(text.c_str() + colon + 1);
    f.depth = f.depth_text == "8u" ? Depth::u8 : f.depth_text == "16u" ? Depth::u16 : Depth::f32;
    if ((f.depth_text != "8u" && f.depth_text != "16u" && f.depth_text != "32f") ||
        (f.channels != 1 && f.channels != 3 && f.channels != 4))
        throw std::invalid_argument("--image '" + text + "' must be DEPTH:CHANNELS, e.g. 32f:1, 8u:3");
    return f;
}

// Output channels of `filter` on such an input, or 0 when it is not
// benchmarked: a colour matrix on a 1-channel image (cbi reads it as
// R = G = B; the OpenCV functions compared with take 3 or 4 channels).
int applicable_channels(const Filter& filter, int channels) {
    if (channels == 1 && std::holds_alternative<ColorFilter>(filter)) return 0;
    try {
        return output_channels(filter, channels);
    } catch (const Error&) {
        return 0;
    }
}

// A file name for a filter's text: a filter2d's taps can run past a file
// name's 255 bytes, so long texts are cut and keep a hash of the whole
// (meta.txt names each file).
std::string file_tag(std::string s) {
    constexpr std::size_t kMax = 64;
    if (s.size() > kMax) {
        std::ostringstream hash;
        hash << std::hex << std::hash<std::string>{}(s);
        s = s.substr(0, kMax) + "-" + hash.str();
    }
    std::replace_if(
        s.begin(), s.end(), [](char c) { return c == ':' || c == '/' || c == ';'; }, '-');
    return s;
}

void write_raw(const std::filesystem::path& path, const cv::Mat& m) {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(m.data), static_cast<std::streamsize>(m.total() * m.elemSize()));
    if (!f) throw Error(path.string(), "cannot write");
}

// ---------------------------------------------------------------- filters
// cbi's own CUDA kernels, validated against its CPU backend. With a dump
// directory, the inputs and references of the first size are written for
// the NPP and CuPy peers (raw, row-major, interleaved), with meta.txt.

// A graph of one filter node reading the input, its output the graph's.
Graph one_node_graph(const Filter& filter, const std::optional<Border>& border,
                     const ScheduleChoice& schedule = DefaultSchedule{}, NodeOptions options = {}) {
    Graph graph;
    graph.set_default_border(border);
    graph.set_default_schedule(schedule);
    graph.add_output(graph.add_filter("node", filter, Graph::input(), std::move(options)));
    return graph;
}

// The executor's kernels between CUDA events, warm-ups dropped, the L2
// flushed (through `flush`) before each run.
std::vector<float> time_executor(Gpu& gpu, GraphExecutor& ex, DeviceBuffer& flush) {
    std::vector<float> ms;
    for (int i = 0; i < gpu.warmup + gpu.runs; ++i) {
        CBI_CUDA_CHECK(cudaMemset(flush.data(), i & 0xff, flush.size()), "L2 flush");
        CBI_CUDA_CHECK(cudaDeviceSynchronize(), "L2 flush");
        const float t = ex.time_kernels_ms();
        if (i >= gpu.warmup) ms.push_back(t);
    }
    return ms;
}

// The schedule `--schedule auto` runs with for this filter and input on the
// GPU: a one-node graph @auto through the executor's tuner.
ScheduleSpec tuned_schedule(const Filter& filter, const Border& border, const cv::Mat& input, int block) {
    const Graph graph = one_node_graph(filter, border, DefaultSchedule{}, NodeOptions{AutoSchedule{}, std::nullopt});
    RunOptions options;
    options.device = resolve_device(parse_device("cuda"));
    options.block = block;
    options.tuning = std::make_shared<TuningCache>();
    GraphExecutor executor(graph, options);
    executor.run(view_of(input));
    return executor.schedule_of(1);
}

// --pipeline: the pipeline language, or a JSON pipeline file (a DAG, with its own border).
Graph bench_graph(const std::string& text, const Border& border) {
    if (text.ends_with(".json")) return load_pipeline_file(text);
    return parse_pipeline(text, DefaultSchedule{}, border);
}

// A whole pipeline (--pipeline), fused and with --no-fuse: the kernels of
// one run between CUDA events (GraphExecutor::time_kernels_ms), the L2
// flushed before each run (the graph's buffers stay the same, so they
// cannot rotate). Validated first: fused == unfused exactly, and against the
// CPU executor, every output. The floor is the pipeline's own input and outputs.
void time_pipeline(Gpu& gpu, Report& report, const std::string& text, const Border& border, const cv::Mat& input,
                   const std::string& depth_text, int block) {
    const Graph graph = bench_graph(text, border);
    try {
        node_channels(graph, input.channels());
    } catch (const Error&) {
        return;  // e.g. a colour matrix on a 1-channel image: not this image's pipeline
    }
    RunOptions cuda;
    cuda.device = resolve_device(parse_device("cuda"));
    cuda.block = block;
    const auto outputs = [](GraphExecutor& ex, const cv::Mat& in) {
        std::vector<cv::Mat> out;
        for (const ImageView& v : ex.run(view_of(in))) out.push_back(as_mat(v).clone());
        return out;
    };
    GraphExecutor cpu(graph, RunOptions{});
    const std::vector<cv::Mat> want = outputs(cpu, input);
    DeviceBuffer flush(2 * static_cast<std::size_t>(gpu.prop.l2CacheSize));
    std::vector<cv::Mat> first;
    // "fused": every stencil pair too (--fuse-stencils); "default": what
    // cbi-filter does without flags (colour nodes into smem/sep stencils,
    // the stencil pairs fuses_pair_by_default names, blends with their
    // stencils); "no-pairs": the default without stencil pairs; "unfused":
    // --no-fuse.
    using Pairs = RunOptions::StencilPairs;
    struct Variant {
        const char* name;
        bool fuse;
        Pairs pairs;
    };
    constexpr Variant variants[] = {{"fused", true, Pairs::all},
                                    {"default", true, Pairs::measured},
                                    {"no-pairs", true, Pairs::none},
                                    {"unfused", false, Pairs::none}};
    for (const auto& [variant, fuse, pairs] : variants) {
        cuda.fuse = fuse;
        cuda.stencil_pairs = pairs;
        GraphExecutor ex(graph, cuda);
        const std::vector<cv::Mat> got = outputs(ex, input);
        if (pairs == Pairs::all) first = got;
        bool same = true;
        double out_bytes = 0;
        for (std::size_t i = 0; i < got.size(); ++i) {
            same = same && matches(got[i], want[i]) && cv::norm(got[i], first[i], cv::NORM_INF) == 0;
            out_bytes += static_cast<double>(got[i].total() * got[i].elemSize());
        }
        if (!same) {
            report.fail("pipeline '" + text + "' " + variant + " " + depth_text);
            continue;
        }
        const std::vector<float> ms = time_executor(gpu, ex, flush);
        const double bytes = static_cast<double>(input.total() * input.elemSize()) + out_bytes;
        report.add({"pipeline", text, variant, block, input.cols, input.rows, depth_text, input.channels(),
                    summarize(ms), bytes, 0, bytes / gpu.bandwidth * 1e3});
    }
}

// A window kind (--filter erode:61): the nodes a user's run takes (compound
// kinds expand to several) through the executor, its kernels between CUDA
// events with the L2 flushed, validated against the CPU executor's result
// `want`. `schedule` is the graph's default schedule (steps that cannot run
// it take the default table's).
void time_window(Gpu& gpu, Report& report, const std::string& filter_text, const Border& border,
                 const ScheduleChoice& schedule, const std::string& schedule_text, const cv::Mat& input,
                 const cv::Mat& want, const std::string& depth_text, int block, double floor_ms) {
    const Graph graph = one_node_graph(parse_filter(filter_text), border, schedule);
    RunOptions cuda;
    cuda.device = resolve_device(parse_device("cuda"));
    cuda.block = block;
    GraphExecutor ex(graph, cuda);
    const cv::Mat got = as_mat(ex.run(view_of(input))[0]).clone();
    if (!matches(got, want)) {
        report.fail(filter_text + " " + schedule_text + " block " + std::to_string(block) + " " + depth_text);
        return;
    }
    DeviceBuffer flush(2 * static_cast<std::size_t>(gpu.prop.l2CacheSize));
    const std::vector<float> ms = time_executor(gpu, ex, flush);
    report.add({"filters", filter_text, schedule_text, block, input.cols, input.rows, depth_text, input.channels(),
                summarize(ms), static_cast<double>(input.total() * input.elemSize() + want.total() * want.elemSize()),
                0, floor_ms});
}

void suite_filters(const Options& o, Gpu& gpu, Report& report) {
    const Border border = parse_border(o.border);
    std::ofstream meta;
    if (!o.dump_dir.empty()) {
        std::filesystem::create_directories(o.dump_dir);
        meta.open(std::filesystem::path(o.dump_dir) / "meta.txt");
        meta << "bandwidth_GBps " << gpu.bandwidth / 1e9 << "\nborder " << o.border << "\n";
        const auto g = gaussian_weights(9, 0);
        meta << "gaussian9";
        for (int i = 0; i < g.size; ++i) meta << " " << std::setprecision(17) << g.w[i];
        meta << "\n";
        for (Depth d : {Depth::u8, Depth::f32}) {
            const StorageMatrix s = storage_matrix(FilterKind<ColorFilter>::parse("sepia"), d);
            meta << "sepia_" << depth_name(d);
            for (auto& row : s.m)
                for (float v : row) meta << " " << std::setprecision(9) << v;
            meta << "\n";
        }
    }
    bool dumped_size = false;
    for (const std::string& size_text : o.sizes) {
        int w = 0, h = 0;
        parse_size(size_text, w, h);
        const bool dump = meta.is_open() && !dumped_size;
        dumped_size = true;
        for (const std::string& image_text : o.images) {
            const auto [depth, channels, depth_text] = parse_image(image_text);
            const cv::Mat input = reference::random_image(w, h, channels, depth, 12345);
            const std::size_t in_bytes = input.total() * input.elemSize();
            const int rotations = gpu.rotations(in_bytes);
            std::vector<DeviceImage> inputs;
            for (int r = 0; r < rotations; ++r) {
                inputs.emplace_back(w, h, channels, depth);
                upload(view_of(input), inputs.back().view, gpu.stream.get());
            }
            const std::string tag = depth_text + "_c" + std::to_string(channels);
            if (dump) write_raw(std::filesystem::path(o.dump_dir) / ("in_" + tag + ".raw"), input);
            for (const std::string& filter_text : o.filters) {
                const Filter filter = parse_filter(filter_text);
                const int out_channels = applicable_channels(filter, channels);
                if (out_channels == 0) continue;
                cv::Mat cpu(h, w, cv_type(depth, out_channels));
                const bool window = category_of(filter) == Category::window;
                if (window) {  // through the executor: compound kinds run as their steps
                    GraphExecutor ex(one_node_graph(filter, border), RunOptions{});
                    as_mat(ex.run(view_of(input))[0]).copyTo(cpu);
                } else {
                    run_node_cpu(FilterRun{filter, border, ScheduleSpec{}}, view_of(input), view_of(cpu));
                }
                if (dump) {
                    const std::string ref = "ref_" + file_tag(filter_text) + "_" + tag + ".raw";
                    write_raw(std::filesystem::path(o.dump_dir) / ref, cpu);
                    meta << "case " << filter_text << " " << depth_text << " " << channels << " " << out_channels << " "
                         << w << " " << h << " in_" << tag << ".raw " << ref << "\n";
                }
                DeviceImage output(w, h, out_channels, depth);
                const std::size_t out_bytes = cpu.total() * cpu.elemSize();
                const double floor_ms = (in_bytes + out_bytes) / gpu.bandwidth * 1e3;
                for (const std::string& schedule_arg : o.schedules)
                    for (const int block : o.blocks) {
                        if (window) {
                            if (schedule_arg == "auto") continue;
                            const ScheduleChoice choice = schedule_arg == "default"
                                                              ? ScheduleChoice{DefaultSchedule{}}
                                                              : ScheduleChoice{parse_schedule(schedule_arg)};
                            if (const auto* fixed = std::get_if<ScheduleSpec>(&choice);
                                fixed && !supports(*fixed, filter))
                                continue;
                            time_window(gpu, report, filter_text, border, choice,
                                        schedule_arg == "default" ? "default" : schedule_arg, input, cpu, depth_text,
                                        block, floor_ms);
                            continue;
                        }
                        // auto: what the executor's tuner picks (timed afresh, in-memory cache);
                        // default: the default table's choice (what a node without a schedule
                        // runs); then timed here like every fixed schedule, labelled auto=CHOICE
                        // or default=CHOICE.
                        const ScheduleSpec spec = schedule_arg == "auto" ? tuned_schedule(filter, border, input, block)
                                                  : schedule_arg == "default"
                                                      ? default_schedule(filter, border, {depth, channels, true})
                                                      : parse_schedule(schedule_arg);
                        if (!supports(spec, filter)) continue;  // e.g. vec:N on a stencil, stream:WxH on blur:31
                        const std::string schedule_text = schedule_arg == "auto" || schedule_arg == "default"
                                                              ? schedule_arg + "=" + spec.to_string()
                                                              : schedule_arg;
                        const FilterRun node{filter, border, spec};
                        CBI_CUDA_CHECK(cudaMemsetAsync(output.view.data, 0xA5, out_bytes, gpu.stream.get()), "poison");
                        try {
                            run_node_cuda(node, inputs[0].view, output.view, gpu.stream.get(), block);
                        } catch (const cbi::Unsupported& e) {  // e.g. a tile whose halo does not fit shared memory
                            std::cout << "# skipped " << filter_text << " " << schedule_text << " " << image_text
                                      << ": " << e.what() << "\n";
                            continue;
                        }
                        cv::Mat got(h, w, cpu.type());
                        download(output.view, view_of(got), gpu.stream.get());
                        gpu.stream.synchronize("validation");
                        if (!matches(got, cpu)) {
                            report.fail(filter_text + " " + schedule_text + " block " + std::to_string(block) + " " +
                                        image_text);
                            continue;
                        }
                        const Timing t = gpu.time([&](int i) {
                            run_node_cuda(node, inputs[i % rotations].view, output.view, gpu.stream.get(), block);
                        });
                        report.add({"filters", filter_text, schedule_text, block, w, h, depth_text, channels, t,
                                    static_cast<double>(in_bytes + out_bytes), 0, floor_ms});
                    }
            }
            for (const std::string& text : o.pipelines)
                for (const int block : o.blocks) time_pipeline(gpu, report, text, border, input, depth_text, block);
        }
    }
}

// ---------------------------------------------------------------- thesis stencil
// The thesis' 9x9 float box kernel and cbi's own blur:9 (replicate border, as
// the thesis' clamped kernel), both through the registry's schedules.
void stencil_sweep(Gpu& gpu, Report& report, const std::string& suite, const std::vector<int>& sizes,
                   const std::vector<std::string>& schedules, const std::vector<int>& blocks) {
    const Border border = parse_border("replicate");
    const Filter box = parse_filter("blur:9");
    for (const int n : sizes) {
        const cv::Mat input = reference::random_image(n, n, 1, Depth::f32, 777 + n);
        cv::Mat ref(n, n, CV_32F);
        run_node_cpu(FilterRun{box, border, ScheduleSpec{}}, view_of(input), view_of(ref));
        const std::size_t bytes = input.total() * sizeof(float);
        const int rotations = gpu.rotations(bytes);
        std::vector<DeviceImage> inputs;
        for (int r = 0; r < rotations; ++r) {
            inputs.emplace_back(n, n, 1, Depth::f32);
            upload(view_of(input), inputs.back().view, gpu.stream.get());
        }
        DeviceImage output(n, n, 1, Depth::f32);
        const double floor_ms = 2.0 * bytes / gpu.bandwidth * 1e3;
        for (const std::string& kernel : std::vector<std::string>{"thesis-box9", "cbi-blur9"}) {
            for (const std::string& schedule_text : schedules)
                for (const int block : blocks) {
                    const ScheduleSpec spec = parse_schedule(schedule_text);
                    const FilterRun node{box, border, spec};
                    auto launch = [&](const DeviceImage& in) {
                        if (kernel == "thesis-box9")
                            bench::run_thesis_box9(spec, reinterpret_cast<const float*>(in.view.data),
                                                   reinterpret_cast<float*>(output.view.data), n, n, block,
                                                   gpu.stream.get());
                        else
                            run_node_cuda(node, in.view, output.view, gpu.stream.get(), block);
                    };
                    CBI_CUDA_CHECK(cudaMemsetAsync(output.view.data, 0xFF, bytes, gpu.stream.get()), "poison");
                    launch(inputs[0]);
                    cv::Mat got(n, n, CV_32F);
                    download(output.view, view_of(got), gpu.stream.get());
                    gpu.stream.synchronize("validation");
                    // The thesis kernel sums 81 floats in float: within 2e-5 of the double sum.
                    if (!matches(got, ref, kernel == "thesis-box9" ? 2e-5 : 1e-5)) {
                        report.fail(suite + " " + kernel + " " + schedule_text + " block " + std::to_string(block) +
                                    " " + std::to_string(n));
                        continue;
                    }
                    const Timing t = gpu.time([&](int i) { launch(inputs[i % rotations]); });
                    report.add(
                        {suite, kernel, schedule_text, block, n, n, "32f", 1, t, 2.0 * bytes, 81.0 * n * n, floor_ms});
                }
        }
    }
}

const std::vector<int> thesis_widths{4, 8, 16, 30, 31, 32, 33, 34, 48, 64, 96, 128, 256, 512, 1024, 2048};

std::vector<std::string> thesis_schedules(const std::vector<int>& widths) {
    std::vector<std::string> s{"naive"};
    for (int w : widths) s.push_back("column:" + std::to_string(w));
    return s;
}

void suite_thesis_stencil(const Options& o, Gpu& gpu, Report& report) {
    if (o.quick)
        stencil_sweep(gpu, report, "thesis-stencil", {1024, 1009}, thesis_schedules({4, 32, 33}), {128, 256});
    else
        stencil_sweep(gpu, report, "thesis-stencil", {4096, 4037}, thesis_schedules(thesis_widths),
                      {32, 64, 128, 256, 512, 1024});
}

void suite_thesis_sizes(const Options& o, Gpu& gpu, Report& report) {
    if (o.quick)
        stencil_sweep(gpu, report, "thesis-sizes", {256, 512}, thesis_schedules({32, 64}), {256});
    else
        stencil_sweep(gpu, report, "thesis-sizes", {256, 512, 1024, 2048, 4096, 8192},
                      thesis_schedules({16, 32, 64, 128, 256, 1024}), {256});
}

// ---------------------------------------------------------------- matmul
// Every variant is validated on a random sample of entries of C against a
// double-precision CPU dot product, tolerance relative to sum |a_ik b_kj|.
struct MatmulCase {
    int n;
    std::vector<float> a, b;
    std::vector<DeviceBuffer> da, db;
    DeviceBuffer dc;
};

bool validate_matmul(const MatmulCase& mc, const std::vector<float>& c, std::mt19937& rng) {
    const int n = mc.n;
    std::uniform_int_distribution<int> pick(0, n - 1);
    for (int s = 0; s < 512; ++s) {
        const int i = s < 4 ? (s & 1) * (n - 1) : pick(rng);  // the corners, then random entries
        const int j = s < 4 ? (s >> 1) * (n - 1) : pick(rng);
        double ref = 0, mag = 0;
        for (int t = 0; t < n; ++t) {
            const double p = static_cast<double>(mc.a[static_cast<std::size_t>(i) * n + t]) *
                             mc.b[static_cast<std::size_t>(t) * n + j];
            ref += p;
            mag += std::fabs(p);
        }
        const double err = std::fabs(c[static_cast<std::size_t>(i) * n + j] - ref);
        if (!(err <= 1e-5 * mag)) return false;  // NaN (an unwritten entry) fails too
    }
    return true;
}

void matmul_sweep(Gpu& gpu, Report& report, bench::Cublas& cublas, const std::string& suite, int n,
                  const std::vector<std::string>& variants, const std::vector<int>& blocks) {
    MatmulCase mc;
    mc.n = n;
    const std::size_t elems = static_cast<std::size_t>(n) * n, bytes = elems * sizeof(float);
    std::mt19937 rng(4242 + n);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    mc.a.resize(elems);
    mc.b.resize(elems);
    for (auto& v : mc.a) v = u(rng);
    for (auto& v : mc.b) v = u(rng);
    const int rotations = gpu.rotations(2 * bytes);
    for (int r = 0; r < rotations; ++r) {
        mc.da.emplace_back(bytes);
        mc.db.emplace_back(bytes);
        CBI_CUDA_CHECK(
            cudaMemcpyAsync(mc.da.back().data(), mc.a.data(), bytes, cudaMemcpyHostToDevice, gpu.stream.get()),
            "upload A");
        CBI_CUDA_CHECK(
            cudaMemcpyAsync(mc.db.back().data(), mc.b.data(), bytes, cudaMemcpyHostToDevice, gpu.stream.get()),
            "upload B");
    }
    mc.dc = DeviceBuffer(bytes);
    auto* c = reinterpret_cast<float*>(mc.dc.data());
    std::vector<float> host_c(elems);
    const double flops = 2.0 * n * static_cast<double>(n) * n;
    for (const std::string& text : variants) {
        const bench::MatmulVariant v = bench::parse_matmul_variant(text);
        const bool uses_block = v.kind == bench::MatmulKind::remap;
        for (const int block : uses_block ? blocks : std::vector<int>{0}) {
            auto launch = [&](int r) {
                bench::run_matmul(v, reinterpret_cast<const float*>(mc.da[r].data()),
                                  reinterpret_cast<const float*>(mc.db[r].data()), c, n, n, n, block, gpu.stream.get(),
                                  cublas);
            };
            CBI_CUDA_CHECK(cudaMemsetAsync(c, 0xFF, bytes, gpu.stream.get()), "poison");  // NaN
            launch(0);
            CBI_CUDA_CHECK(cudaMemcpyAsync(host_c.data(), c, bytes, cudaMemcpyDeviceToHost, gpu.stream.get()),
                           "download C");
            gpu.stream.synchronize("validation");
            if (!validate_matmul(mc, host_c, rng)) {
                report.fail(suite + " " + text + " block " + std::to_string(block) + " n " + std::to_string(n));
                continue;
            }
            const Timing t = gpu.time([&](int i) { launch(i % rotations); });
            report.add({suite, "matmul", v.name(), v.threads(block), n, n, "32f", 1, t, 3.0 * bytes, flops, 0});
        }
    }
}

void suite_matmul(const Options& o, Gpu& gpu, Report& report) {
    bench::Cublas cublas;
    const std::vector<std::string> tiled{"smem:16",      "smem:32",       "regtile:16x4", "regtile:16x8",
                                         "volkov:64x16", "volkov:128x32", "cublas"};
    if (o.quick) {
        matmul_sweep(gpu, report, cublas, "thesis-matmul", 256, thesis_schedules({4, 32}), {128, 256});
        std::vector<std::string> v{"naive", "column:32"};
        v.insert(v.end(), tiled.begin(), tiled.end());
        matmul_sweep(gpu, report, cublas, "matmul-sizes", 200, v, {256});
        return;
    }
    // Fig. 5.1b: 1024^2, every width and block size.
    matmul_sweep(gpu, report, cublas, "thesis-matmul", 1024, thesis_schedules(thesis_widths),
                 {32, 64, 128, 256, 512, 1024});
    // Fig. 5.4: sizes 2^7..2^12, the widths that matter, plus the tiled kernels and cuBLAS.
    std::vector<std::string> v = thesis_schedules({16, 32, 64, 128});
    v.insert(v.end(), tiled.begin(), tiled.end());
    for (int n : {128, 256, 512, 1024, 2048, 4096}) matmul_sweep(gpu, report, cublas, "matmul-sizes", n, v, {256});
}

// ---------------------------------------------------------------- cpu
// OpenCV's own functions against cbi's CPU backend, the same thread count
// for both (cv::setNumThreads, tbb::global_control). std::chrono medians.
// OpenCV's filters take these borders themselves (constant and wrap would
// time cv::copyMakeBorder too).
int opencv_filter_border(BorderMode m) {
    if (m != BorderMode::replicate && m != BorderMode::reflect && m != BorderMode::reflect101)
        throw std::invalid_argument("--suite cpu: OpenCV's filters take reflect101, reflect or replicate");
    return cbi::opencv_border(m);
}

void suite_cpu(const Options& o, Report& report) {
    const int threads = o.cpu_threads > 0 ? o.cpu_threads : static_cast<int>(std::thread::hardware_concurrency());
    cv::setNumThreads(threads);
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
    const Border border = parse_border(o.border);
    opencv_filter_border(border.mode);
    int w = 0, h = 0;
    parse_size(o.quick ? "512x512" : o.cpu_size, w, h);
    auto time_cpu = [&](const std::function<void()>& f) {
        f();  // warm-up: allocations, thread pools
        std::vector<float> ms;
        for (int i = 0; i < o.cpu_runs; ++i) {
            const auto t0 = std::chrono::steady_clock::now();
            f();
            ms.push_back(std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        return summarize(ms);
    };
    for (const std::string& image_text : o.images) {
        const auto [depth, channels, depth_text] = parse_image(image_text);
        const cv::Mat input = reference::random_image(w, h, channels, depth, 999);
        for (const std::string& filter_text : o.filters) {
            const Filter filter = parse_filter(filter_text);
            const int out_channels = applicable_channels(filter, channels);
            if (out_channels == 0) continue;
            cv::Mat ours(h, w, cv_type(depth, out_channels)), theirs;
            const std::function<void()> opencv = [&] { reference::opencv_reference(filter, border, input, theirs); };
            opencv();
            const double bytes = static_cast<double>(input.total() * input.elemSize() + ours.total() * ours.elemSize());
            report.add(
                {"cpu", filter_text, "opencv", threads, w, h, depth_text, channels, time_cpu(opencv), bytes, 0, 0});
            for (const std::string& schedule_text : o.cpu_schedules) {
                const ScheduleSpec schedule = parse_schedule(schedule_text);
                if (!supports(schedule, filter)) continue;
                const FilterRun node{filter, border, schedule};
                // Window kinds through the executor: compound kinds run as their steps.
                std::unique_ptr<GraphExecutor> executor;
                if (category_of(filter) == Category::window) {
                    executor = std::make_unique<GraphExecutor>(one_node_graph(filter, border, schedule), RunOptions{});
                }
                auto cbi_cpu = [&] {
                    if (!executor) return run_node_cpu(node, view_of(input), view_of(ours));
                    const ImageView outs[] = {view_of(ours)};
                    executor->run_into(view_of(input), outs);
                };
                cbi_cpu();
                // 8-bit within 1 of OpenCV, float within 1e-4 of the scale.
                if (!matches(ours, theirs, 1e-4, 1)) {
                    report.fail("cpu " + filter_text + " " + image_text + " " + schedule_text + " cbi vs OpenCV");
                    continue;
                }
                // The first schedule keeps the label "cbi-cpu" that plot.py reads.
                const std::string label =
                    schedule_text == o.cpu_schedules.front() ? "cbi-cpu" : "cbi-cpu " + schedule_text;
                report.add(
                    {"cpu", filter_text, label, threads, w, h, depth_text, channels, time_cpu(cbi_cpu), bytes, 0, 0});
            }
        }
        // Whole pipelines: cbi's CPU executor against the OpenCV calls in sequence.
        for (const std::string& text : o.pipelines) {
            if (text.ends_with(".json")) continue;  // the OpenCV calls in sequence are for chains
            const Graph graph = parse_pipeline(text, DefaultSchedule{}, border);
            if (graph.outputs().size() != 1) continue;
            std::vector<int> node_ch;
            try {
                node_ch = node_channels(graph, channels);
            } catch (const Error&) {
                continue;  // not a pipeline for this image
            }
            GraphExecutor executor(graph, RunOptions{});
            cv::Mat ours = as_mat(executor.run(view_of(input)).front());
            std::vector<cv::Mat> stages(graph.nodes().size());
            const auto opencv = [&] {
                const cv::Mat* in = &input;
                for (std::size_t id = 1; id < graph.nodes().size(); ++id) {
                    reference::opencv_reference(std::get<Filter>(graph.nodes()[id].op), border, *in, stages[id]);
                    in = &stages[id];
                }
            };
            opencv();
            // Each stage of either within 1 of the other compounds through the chain: report the difference.
            const double diff = cv::norm(ours, stages.back(), cv::NORM_INF);
            std::cout << "# cpu pipeline '" << text << "' " << image_text << ": max |cbi - OpenCV| = " << diff << "\n";
            const double bytes = static_cast<double>(input.total() * input.elemSize() + ours.total() * ours.elemSize());
            report.add(
                {"cpu-pipeline", text, "opencv", threads, w, h, depth_text, channels, time_cpu(opencv), bytes, 0, 0});
            report.add({"cpu-pipeline", text, "cbi-cpu", threads, w, h, depth_text, channels,
                        time_cpu([&] { executor.run(view_of(input)); }), bytes, 0, 0});
        }
    }
}

// ---------------------------------------------------------------- main
bool needs_gpu(const Options& o) {
    return std::any_of(o.suites.begin(), o.suites.end(), [](const std::string& s) { return s != "cpu"; });
}

int run(const Options& o) {
    for (const std::string& s : o.suites)
        if (s != "filters" && s != "thesis-stencil" && s != "thesis-sizes" && s != "matmul" && s != "cpu")
            throw std::invalid_argument("--suite '" + s + "': filters, thesis-stencil, thesis-sizes, matmul or cpu");
    nlohmann::json facts = {
        {"date", now_utc()},
        {"runs", o.runs},
        {"warmup", o.warmup},
        {"suites", o.suites},
        {"border", o.border},
        {"cpu_threads", o.cpu_threads > 0 ? o.cpu_threads : static_cast<int>(std::thread::hardware_concurrency())},
        {"opencv", CV_VERSION}};
    std::unique_ptr<Gpu> gpu;
    if (needs_gpu(o)) {
        use_device(o.device);
        gpu = std::make_unique<Gpu>();
        gpu->warmup = o.warmup;
        gpu->runs = o.runs;
        CBI_CUDA_CHECK(cudaGetDeviceProperties(&gpu->prop, o.device), "cudaGetDeviceProperties");
        int driver = 0, runtime = 0, sm_clock = 0, mem_clock = 0;
        cudaDriverGetVersion(&driver);
        cudaRuntimeGetVersion(&runtime);
        cudaDeviceGetAttribute(&sm_clock, cudaDevAttrClockRate, o.device);
        cudaDeviceGetAttribute(&mem_clock, cudaDevAttrMemoryClockRate, o.device);
        gpu->bandwidth = copy_bandwidth(*gpu);
        facts.update({{"device", gpu->prop.name},
                      {"sm_count", gpu->prop.multiProcessorCount},
                      {"l2_bytes", gpu->prop.l2CacheSize},
                      {"sm_clock_khz", sm_clock},
                      {"memory_clock_khz", mem_clock},
                      {"driver_version", driver},
                      {"runtime_version", runtime},
                      {"copy_bandwidth_GBps", gpu->bandwidth / 1e9}});
        std::cout << gpu->prop.name << ", " << gpu->prop.multiProcessorCount << " SMs, L2 "
                  << gpu->prop.l2CacheSize / (1 << 20) << " MiB, driver " << driver << ", runtime " << runtime << "\n"
                  << "device-to-device copy: " << std::fixed << std::setprecision(0) << gpu->bandwidth / 1e9
                  << " GB/s (read + write)\n\n";
    }
    Report report(facts);
    for (const std::string& s : o.suites) {
        const auto t0 = std::chrono::steady_clock::now();
        if (s == "filters")
            suite_filters(o, *gpu, report);
        else if (s == "thesis-stencil")
            suite_thesis_stencil(o, *gpu, report);
        else if (s == "thesis-sizes")
            suite_thesis_sizes(o, *gpu, report);
        else if (s == "matmul")
            suite_matmul(o, *gpu, report);
        else
            suite_cpu(o, report);
        std::cout << "# suite " << s << ": " << std::fixed << std::setprecision(1)
                  << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
        report.write(o.csv, o.json);  // after each suite: a later failure keeps what was measured
    }
    if (report.failures())
        std::cerr << "cbi-bench: error: " << report.failures() << " configurations differ from their reference\n";
    return report.failures() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"cbi-bench: kernel timings per workload x schedule x block x size, against the bandwidth floor",
                 "cbi-bench"};
    Options o;
    app.add_option("--suite", o.suites, "filters, thesis-stencil, thesis-sizes, matmul, cpu")->capture_default_str();
    app.add_option("--size", o.sizes, "filters suite: image sizes WxH")->capture_default_str();
    app.add_option("--image", o.images, "formats DEPTH:CHANNELS (8u, 16u, 32f)")->capture_default_str();
    app.add_option("--filter", o.filters, "filters, as blur:9 gaussian:9 sobel:mag:3 color:sepia")
        ->capture_default_str();
    app.add_option("--cpu-schedule", o.cpu_schedules,
                   "cpu suite: cbi schedules to time against OpenCV, e.g. sep:256x256")
        ->capture_default_str();
    app.add_option("--pipeline", o.pipelines,
                   "filters suite: also time this pipeline fused and unfused on the GPU; cpu suite: against the OpenCV "
                   "calls in sequence; e.g. \"color:gray | gaussian:5@sep:64x32 | sobel:mag@sep:64x32\", or a JSON "
                   "pipeline file (a DAG, filters suite only), e.g. apps/bench/pipelines/unsharp.json");
    app.add_option("--schedule", o.schedules,
                   "filters suite: schedules (see cbi-filter --list-schedules), default: the default table's choice, "
                   "labelled default=CHOICE, or auto: the tuner's choice, labelled auto=CHOICE")
        ->capture_default_str();
    app.add_option("--block", o.blocks, "filters suite: CUDA threads per block")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    app.add_option("--border", o.border, "border mode (filters and cpu suites)")->capture_default_str();
    app.add_option("--runs", o.runs, "timed runs per GPU configuration (>= 20)")
        ->check(CLI::Range(20, 100000))
        ->capture_default_str();
    app.add_option("--warmup", o.warmup, "untimed runs first")->check(CLI::Range(1, 1000))->capture_default_str();
    app.add_option("--device", o.device, "CUDA device ordinal")->check(CLI::NonNegativeNumber);
    app.add_flag("--quick", o.quick, "small sweeps (a smoke test, not results)");
    app.add_option("--dump-dir", o.dump_dir, "filters suite: write inputs and references for the NPP/CuPy peers here");
    app.add_option("--cpu-threads", o.cpu_threads, "cpu suite: threads for OpenCV and cbi (0: all)");
    app.add_option("--cpu-size", o.cpu_size, "cpu suite: image size WxH")->capture_default_str();
    app.add_option("--cpu-runs", o.cpu_runs, "cpu suite: timed runs")
        ->check(CLI::Range(3, 1000))
        ->capture_default_str();
    app.add_option("--csv", o.csv, "write results as CSV");
    app.add_option("--json", o.json, "write results and device facts as JSON");
    CLI11_PARSE(app, argc, argv);
    try {
        return run(o);
    } catch (const std::invalid_argument& e) {
        std::cerr << "cbi-bench: error: " << e.what() << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "cbi-bench: error: " << e.what() << "\n";
        return 1;
    }
}
