// Embedding cbi: build an unsharp-mask DAG in C++, run it on a cv::Mat and
// on a caller-owned raw buffer, on the CPU and (when present) on CUDA.
//   cbi-embed photo.jpg
#include <cbi/pipeline/error.hpp>
#include <cbi/pipeline/executor.hpp>
#include <cbi/pipeline/image_io.hpp>
#include <cbi/pipeline/opencv.hpp>

#include <cstdint>
#include <iostream>
#include <vector>

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: cbi-embed IMAGE\n";
        return 2;
    }
    try {
        // sharp = 1.5 * input - 0.5 * gaussian(input)
        cbi::Graph graph;
        const cbi::NodeId blurred = graph.add_filter("blurred", cbi::parse_filter("gaussian:9:2"), cbi::Graph::input(),
                                                     {cbi::parse_schedule("column:32"), std::nullopt});
        graph.add_output(graph.add_blend("sharp", cbi::BlendFilter{1.5, -0.5, 0}, cbi::Graph::input(), blurred));

        // 1. A cv::Mat from a file.
        const cv::Mat photo = cbi::read_image(argv[1]);
        cbi::GraphExecutor cpu(graph, cbi::RunOptions{});
        const cv::Mat on_cpu = cbi::as_mat(cpu.run(cbi::view_of(photo)).front()).clone();

        // 2. A raw buffer the caller owns: 64x48 gray, rows padded to 80 bytes.
        std::vector<std::uint8_t> pixels(80 * 48);
        for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i * 7 % 251);
        const cbi::ImageView raw{reinterpret_cast<std::byte*>(pixels.data()), 64, 48, 1, cbi::Depth::u8, 80};
        const cbi::ImageView raw_out = cpu.run(raw).front();
        long sum = 0;
        for (int y = 0; y < raw_out.height; ++y)
            for (int x = 0; x < raw_out.width; ++x) sum += raw_out.row<std::uint8_t>(y)[x];
        std::cout << "cpu: photo " << on_cpu.cols << "x" << on_cpu.rows << " mean " << cv::mean(on_cpu)[0]
                  << ", raw buffer sum " << sum << "\n";

        // 3. The same graph on CUDA, when this build and machine have it.
        cbi::ResolvedDevice device = cbi::resolve_device(cbi::parse_device("auto"));
        if (!device.cuda) {
            std::cout << "cuda: skipped (" << device.notice << ")\n";
            return 0;
        }
        cbi::GraphExecutor gpu(graph, cbi::RunOptions{device, 256});
        const cv::Mat on_gpu = cbi::as_mat(gpu.run(cbi::view_of(photo)).front()).clone();
        const double diff = cv::norm(on_cpu, on_gpu, cv::NORM_INF);
        std::cout << "cuda: photo max |cpu - cuda| = " << diff << "\n";
        return diff == 0 ? 0 : 1;
    } catch (const std::exception& e) {
        std::cerr << "cbi-embed: error: " << e.what() << "\n";
        return 1;
    }
}
