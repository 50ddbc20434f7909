// cbi-bench: times cbi's CUDA kernels per filter x schedule x block size x
// image format with CUDA events (median of >= 20 runs after warm-up), next
// to the memory-bandwidth floor measured in the same run. Every
// configuration is validated against the CPU backend before it is timed;
// inputs are random; input buffers rotate so repeated runs do not measure
// the L2 cache.
//   cbi-bench --size 4096x4096 --image 32f:1 --image 8u:3 --csv out.csv --json out.json
#include <CLI/CLI.hpp>
#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "filters/cpu_backend.hpp"
#include "filters/cuda_backend.hpp"
#include "pipeline/cuda_runtime.hpp"
#include "pipeline/error.hpp"
#include "pipeline/opencv.hpp"

namespace {

using namespace cbi;

struct Options {
    std::vector<std::string> sizes{"4096x4096"};
    std::vector<std::string> images{"32f:1", "8u:3"};
    std::vector<std::string> filters{"blur:9", "gaussian:9", "sobel:mag:3", "color:sepia"};
    std::vector<std::string> schedules{"naive", "column:32", "zigzag:32", "tile:32x8"};
    std::vector<int> blocks{256};
    std::string border = "reflect101";
    int runs = 25;
    int warmup = 3;
    int device = 0;
    std::string csv, json;
};

struct Timing {
    double median_ms, min_ms, max_ms;
};

Timing summarize(std::vector<float> ms) {
    std::sort(ms.begin(), ms.end());
    const std::size_t n = ms.size();
    const double median = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
    return {median, ms.front(), ms.back()};
}

class Events {
public:
    Events() {
        CBI_CUDA_CHECK(cudaEventCreate(&start_), "cudaEventCreate");
        CBI_CUDA_CHECK(cudaEventCreate(&stop_), "cudaEventCreate");
    }
    ~Events() {
        cudaEventDestroy(start_);
        cudaEventDestroy(stop_);
    }
    // Times `work` enqueued on `stream`, in milliseconds.
    template <class F>
    float time(cudaStream_t stream, F&& work) {
        CBI_CUDA_CHECK(cudaEventRecord(start_, stream), "cudaEventRecord");
        work();
        CBI_CUDA_CHECK(cudaEventRecord(stop_, stream), "cudaEventRecord");
        CBI_CUDA_CHECK(cudaEventSynchronize(stop_), "cudaEventSynchronize");
        float ms = 0;
        CBI_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
        return ms;
    }

private:
    cudaEvent_t start_{}, stop_{};
};

// Device-to-device copy bandwidth (bytes read + bytes written per second).
double copy_bandwidth(const Stream& stream, Events& events) {
    const std::size_t bytes = std::size_t{1} << 30;
    DeviceBuffer a(bytes), b(bytes);
    CBI_CUDA_CHECK(cudaMemsetAsync(a.data(), 1, bytes, stream.get()), "cudaMemset");
    std::vector<float> ms;
    for (int i = 0; i < 23; ++i) {
        const float t = events.time(stream.get(), [&] {
            CBI_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, stream.get()), "copy");
        });
        if (i >= 3) ms.push_back(t);
    }
    return 2.0 * bytes / (summarize(ms).median_ms * 1e-3);
}

cv::Mat random_input(int w, int h, int channels, Depth depth, unsigned seed) {
    cv::Mat m(h, w, cv_type(depth, channels));
    cv::RNG rng(seed);
    if (depth == Depth::f32) rng.fill(m, cv::RNG::UNIFORM, 0.0, 1.0);
    else rng.fill(m, cv::RNG::UNIFORM, 0, depth == Depth::u8 ? 256 : 65536);
    return m;
}

// Integer outputs bit-exact, float within 1e-5 of the result's scale.
bool matches(const cv::Mat& gpu, const cv::Mat& cpu) {
    if (gpu.depth() != CV_32F) return std::memcmp(gpu.data, cpu.data, gpu.total() * gpu.elemSize()) == 0;
    const double scale = std::max(1.0, cv::norm(cpu, cv::NORM_INF));
    return cv::norm(gpu, cpu, cv::NORM_INF) <= 1e-5 * scale;
}

std::string now_utc() {
    const std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
}

int run(const Options& o) {
    use_device(o.device);
    cudaDeviceProp prop{};
    CBI_CUDA_CHECK(cudaGetDeviceProperties(&prop, o.device), "cudaGetDeviceProperties");
    int driver = 0, runtime = 0, sm_clock = 0, mem_clock = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    cudaDeviceGetAttribute(&sm_clock, cudaDevAttrClockRate, o.device);
    cudaDeviceGetAttribute(&mem_clock, cudaDevAttrMemoryClockRate, o.device);

    const Stream stream;
    Events events;
    const double bandwidth = copy_bandwidth(stream, events);
    nlohmann::json doc = {{"device", prop.name},
                          {"sm_count", prop.multiProcessorCount},
                          {"l2_bytes", prop.l2CacheSize},
                          {"sm_clock_khz", sm_clock},
                          {"memory_clock_khz", mem_clock},
                          {"driver_version", driver},
                          {"runtime_version", runtime},
                          {"date", now_utc()},
                          {"copy_bandwidth_GBps", bandwidth / 1e9},
                          {"runs", o.runs},
                          {"results", nlohmann::json::array()}};
    std::cout << prop.name << ", " << prop.multiProcessorCount << " SMs, L2 " << prop.l2CacheSize / (1 << 20)
              << " MiB, driver " << driver << ", runtime " << runtime << "\n"
              << "device-to-device copy: " << std::fixed << std::setprecision(0) << bandwidth / 1e9
              << " GB/s (read + write)\n\n";
    std::ostringstream csv;
    csv << "filter,schedule,block,width,height,depth,channels,median_ms,min_ms,max_ms,runs,bytes,GBps,floor_ms,x_floor\n";
    std::cout << std::left << std::setw(14) << "filter" << std::setw(12) << "schedule" << std::setw(6) << "block"
              << std::setw(16) << "image" << std::right << std::setw(10) << "median ms" << std::setw(10) << "min ms"
              << std::setw(10) << "GB/s" << std::setw(10) << "x floor" << "\n";

    int failures = 0;
    const Border border = parse_border(o.border);
    for (const std::string& size_text : o.sizes) {
        int w = 0, h = 0;
        if (std::sscanf(size_text.c_str(), "%dx%d", &w, &h) != 2 || w <= 0 || h <= 0)
            throw std::invalid_argument("--size '" + size_text + "' must be WxH");
        for (const std::string& image_text : o.images) {
            const auto colon = image_text.find(':');
            const std::string depth_text = image_text.substr(0, colon);
            const int channels = colon == std::string::npos ? 1 : std::atoi(image_text.c_str() + colon + 1);
            const Depth depth = depth_text == "8u" ? Depth::u8 : depth_text == "16u" ? Depth::u16 : Depth::f32;
            if ((depth_text != "8u" && depth_text != "16u" && depth_text != "32f") ||
                (channels != 1 && channels != 3 && channels != 4))
                throw std::invalid_argument("--image '" + image_text + "' must be DEPTH:CHANNELS, e.g. 32f:1, 8u:3");
            const cv::Mat input = random_input(w, h, channels, depth, 12345);
            const std::size_t in_bytes = input.total() * input.elemSize();
            // Enough rotating inputs that consecutive runs cannot hit in L2.
            const int rotations = std::max<int>(1, static_cast<int>((2 * static_cast<std::size_t>(prop.l2CacheSize)) / in_bytes) + 1);
            std::vector<DeviceImage> inputs;
            for (int r = 0; r < rotations; ++r) {
                inputs.emplace_back(w, h, channels, depth);
                upload(view_of(input), inputs.back().view, stream.get());
            }
            for (const std::string& filter_text : o.filters) {
                const Filter filter = parse_filter(filter_text);
                int out_channels = 0;
                try {
                    out_channels = output_channels(filter, channels);
                } catch (const Error& e) {
                    std::cout << std::left << std::setw(14) << filter_text << "skipped on " << image_text << ": " << e.what() << "\n";
                    continue;
                }
                cv::Mat cpu(h, w, cv_type(depth, out_channels));
                run_node_cpu(Node{filter, border, ScheduleSpec{}}, view_of(input), view_of(cpu));
                DeviceImage output(w, h, out_channels, depth);
                const std::size_t out_bytes = cpu.total() * cpu.elemSize();
                const double floor_ms = (in_bytes + out_bytes) / bandwidth * 1e3;
                for (const std::string& schedule_text : o.schedules)
                    for (const int block : o.blocks) {
                        const Node node{filter, border, parse_schedule(schedule_text)};
                        // Validate this configuration before timing it.
                        CBI_CUDA_CHECK(cudaMemsetAsync(output.view.data, 0xA5, out_bytes, stream.get()), "poison");
                        run_node_cuda(node, inputs[0].view, output.view, stream.get(), block);
                        cv::Mat gpu(h, w, cpu.type());
                        download(output.view, view_of(gpu), stream.get());
                        stream.synchronize("validation");
                        if (!matches(gpu, cpu)) {
                            std::cout << filter_text << " " << schedule_text << " block " << block
                                      << ": OUTPUT DIFFERS FROM THE CPU BACKEND, not timed\n";
                            ++failures;
                            continue;
                        }
                        std::vector<float> ms;
                        for (int i = 0; i < o.warmup + o.runs; ++i) {
                            const auto& src = inputs[i % rotations];
                            const float t = events.time(stream.get(), [&] {
                                run_node_cuda(node, src.view, output.view, stream.get(), block);
                            });
                            if (i >= o.warmup) ms.push_back(t);
                        }
                        const Timing t = summarize(ms);
                        const double gbps = (in_bytes + out_bytes) / (t.median_ms * 1e-3) / 1e9;
                        const std::string image = size_text + " " + image_text;
                        std::cout << std::left << std::setw(14) << filter_text << std::setw(12) << schedule_text
                                  << std::setw(6) << block << std::setw(16) << image << std::right << std::fixed
                                  << std::setprecision(4) << std::setw(10) << t.median_ms << std::setw(10) << t.min_ms
                                  << std::setprecision(0) << std::setw(10) << gbps << std::setprecision(1)
                                  << std::setw(10) << t.median_ms / floor_ms << "\n";
                        csv << filter_text << "," << schedule_text << "," << block << "," << w << "," << h << ","
                            << depth_text << "," << channels << "," << t.median_ms << "," << t.min_ms << "," << t.max_ms
                            << "," << ms.size() << "," << in_bytes + out_bytes << "," << gbps << "," << floor_ms
                            << "," << t.median_ms / floor_ms << "\n";
                        doc["results"].push_back({{"filter", filter_text}, {"schedule", schedule_text},
                                                  {"block", block}, {"width", w}, {"height", h},
                                                  {"depth", depth_text}, {"channels", channels},
                                                  {"median_ms", t.median_ms}, {"min_ms", t.min_ms},
                                                  {"max_ms", t.max_ms}, {"runs", ms.size()},
                                                  {"bytes", in_bytes + out_bytes}, {"GBps", gbps},
                                                  {"floor_ms", floor_ms}, {"x_floor", t.median_ms / floor_ms}});
                    }
            }
        }
    }
    if (!o.csv.empty()) std::ofstream(o.csv) << csv.str();
    if (!o.json.empty()) std::ofstream(o.json) << doc.dump(2) << "\n";
    if (failures) std::cerr << "cbi-bench: error: " << failures << " configurations differ from the CPU backend\n";
    return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"cbi-bench: CUDA kernel timings per filter x schedule x block, against the bandwidth floor",
                 "cbi-bench"};
    Options o;
    app.add_option("--size", o.sizes, "image sizes WxH")->capture_default_str();
    app.add_option("--image", o.images, "formats DEPTH:CHANNELS (8u, 16u, 32f)")->capture_default_str();
    app.add_option("--filter", o.filters, "filters, as blur:9 gaussian:9 sobel:mag:3 color:sepia")->capture_default_str();
    app.add_option("--schedule", o.schedules, "schedules (see cbi-filter --list-schedules)")->capture_default_str();
    app.add_option("--block", o.blocks, "CUDA threads per block")->check(CLI::Range(1, 1024))->capture_default_str();
    app.add_option("--border", o.border, "border mode")->capture_default_str();
    app.add_option("--runs", o.runs, "timed runs per configuration (>= 20)")->check(CLI::Range(20, 100000))->capture_default_str();
    app.add_option("--warmup", o.warmup, "untimed runs first")->check(CLI::Range(1, 1000))->capture_default_str();
    app.add_option("--device", o.device, "CUDA device ordinal")->check(CLI::NonNegativeNumber);
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
