// cbi-chain-bench: a linear chain of filters on the CPU, cbi's executor
// against OpenCV's calls for the same nodes (apps/reference: the calls cbi's
// semantics are defined by), in one process, on a real photo resized to
// SIZE x SIZE; each the median of RUNS timed runs after 3 warm-ups, then
// the largest difference between the two outputs.
//   cbi-chain-bench PHOTO [--chain "color:gray | gaussian:5 | sobel:mag"] [--size 2048] [--threads 2] [--runs 15]
#include <tbb/global_control.h>
#include <CLI/CLI.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "apps/reference/opencv_reference.hpp"
#include "pipeline/error.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/opencv.hpp"

namespace {

template <class F>
double median_ms(int runs, F&& f) {
    std::vector<double> ms;
    for (int i = 0; i < runs + 3; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        const auto t1 = std::chrono::steady_clock::now();
        if (i >= 3) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"cbi-chain-bench: a chain of filters on the CPU, cbi against OpenCV's calls"};
    std::string photo, chain = "color:gray | gaussian:5 | sobel:mag";
    int size = 2048, threads = 2, runs = 15;
    app.add_option("photo", photo, "a photo (resized to SIZE x SIZE, 8-bit)")->required();
    app.add_option("--chain", chain, "a linear chain in the pipeline language");
    app.add_option("--size", size, "image side")->check(CLI::Range(16, 16384));
    app.add_option("--threads", threads, "threads of both")->check(CLI::Range(1, 4096));
    app.add_option("--runs", runs, "timed runs")->check(CLI::Range(1, 1000));
    CLI11_PARSE(app, argc, argv);
    try {
        const tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, threads);
        cv::setNumThreads(threads);
        const cv::Mat read = cv::imread(photo, cv::IMREAD_COLOR);
        if (read.empty()) throw cbi::Error(photo, "cannot read the photo");
        cv::Mat img;
        cv::resize(read, img, {size, size}, 0, 0, cv::INTER_CUBIC);

        const cbi::Graph graph = cbi::parse_pipeline(chain);
        cbi::RunOptions options;
        options.device = cbi::resolve_device(cbi::parse_device("cpu"));
        cbi::GraphExecutor executor(graph, options);
        cv::Mat ours;
        const double cbi_ms = median_ms(runs, [&] { ours = cbi::as_mat(executor.run(cbi::view_of(img)).front()); });
        // The same chain with every fusion the CPU takes (--fuse-stencils) and with none (--no-fuse).
        const auto time_with = [&](cbi::RunOptions with) {
            cbi::GraphExecutor other(graph, with);
            cv::Mat out;
            const double ms = median_ms(runs, [&] { out = cbi::as_mat(other.run(cbi::view_of(img)).front()); });
            if (cv::norm(ours, out, cv::NORM_INF) != 0) throw std::runtime_error("fused and unfused outputs differ");
            return ms;
        };
        cbi::RunOptions all = options, none = options;
        all.stencil_pairs = cbi::RunOptions::StencilPairs::all;
        none.fuse = false;
        const double fused_ms = time_with(all), unfused_ms = time_with(none);

        std::vector<std::pair<cbi::Filter, cbi::Border>> nodes;  // the chain in order (node 0 is the input)
        for (cbi::NodeId id = 1; id < static_cast<cbi::NodeId>(graph.nodes().size()); ++id) {
            const auto* filter = std::get_if<cbi::Filter>(&graph.nodes()[id].op);
            if (!filter) throw std::invalid_argument("--chain: only filters (no blends)");
            nodes.emplace_back(*filter, graph.border_of(id));
        }
        cv::Mat theirs;
        const double opencv_ms = median_ms(runs, [&] {
            cv::Mat in = img;
            for (const auto& [filter, border] : nodes) {
                cv::Mat out;
                cbi::reference::opencv_reference(filter, border, in, out);
                in = out;
            }
            theirs = in;
        });
        std::printf(
            "%s, %dx%d 8u:3, %d threads (%u cores), median of %d: cbi %.3f ms (--fuse-stencils %.3f, --no-fuse "
            "%.3f), OpenCV %.3f ms, OpenCV/cbi %.2f, max |cbi - OpenCV| %g\n",
            chain.c_str(), size, size, threads, std::thread::hardware_concurrency(), runs, cbi_ms, fused_ms, unfused_ms,
            opencv_ms, opencv_ms / cbi_ms, cv::norm(ours, theirs, cv::NORM_INF));
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cbi-chain-bench: error: %s\n", e.what());
        return 1;
    }
}
