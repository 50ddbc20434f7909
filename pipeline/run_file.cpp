// One image file through the pipeline (pipeline/run_file.hpp).
#include "pipeline/run_file.hpp"

#include <chrono>
#include <exception>
#include <future>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>

#include <opencv2/core.hpp>

#include "pipeline/error.hpp"
#include "pipeline/opencv.hpp"

namespace cbi {

namespace fs = std::filesystem;

fs::path output_path(const fs::path& first, const Graph& graph, std::size_t index) {
    if (index == 0) return first;
    const std::string& node = graph.nodes()[graph.outputs()[index]].name;
    return first.parent_path() / (first.stem().string() + "." + node + first.extension().string());
}

ImageMetadata input_metadata(std::span<const std::uint8_t> bytes, const std::string& subject, const WriteOptions& write,
                             std::string& warning) {
    if (write.strip) return {};
    try {
        return read_metadata(bytes, subject);
    } catch (const Error& e) {
        warning = e.what();  // the pixels go on without it
        return {};
    }
}

std::string write_output(const fs::path& out, Processor::FileResult result, const WriteOptions& write,
                         const ImageMetadata& metadata) {
    if (!result.encoded.empty())
        return write_encoded_atomic(out, std::move(result.encoded), result.channels, write, metadata);
    return write_image_atomic(out, as_mat(result.image.view()), write, metadata);
}

FileReport run_file(const fs::path& input, const fs::path& output, const Graph& graph, const FileOptions& options) {
    using Clock = std::chrono::steady_clock;
    FileReport report;
    Clock::time_point last = Clock::now();
    const auto step = [&](const char* name) {
        const Clock::time_point now = Clock::now();
        report.steps.push_back({name, std::chrono::duration<double>(now - last).count()});
        last = now;
    };
    const auto say = [&](FileOptions::Message kind, const std::string& text) {
        if (!text.empty() && options.on_message) options.on_message(kind, text);
    };
    const std::string subject = input.string();
    if (same_file(input, output))
        throw std::invalid_argument(output.string() + ": is the input file; cbi never overwrites its input");

    const std::vector<std::uint8_t> bytes = read_file(input);
    const ImageHeader header = check_image(bytes, subject, options.max_pixels, options.max_bytes);
    step("read+check");
    // The device is found and started (on a GPU host the driver's start and
    // the context take ~0.4 s) while the file is decoded; its errors come
    // back from get(), a failed start's when the run uses the device.
    const DeviceSpec spec = choose_device(options.device, graph, header, options.codec);
    std::future<ResolvedDevice> device = std::async(std::launch::async, [spec, rank = options.host_rank] {
        ResolvedDevice d = resolve_device(spec, rank);
        try {
            warm_up(d);
        } catch (const std::exception&) {}
        return d;
    });
    // The device's notice, unless Codec::gpu fails on it (its error says more).
    const auto notice = [&](const ResolvedDevice& d) {
        if (!(options.codec == Codec::gpu && !d.cuda)) say(FileOptions::Message::notice, d.notice);
    };
    try {
        // Codec::gpu needs the device now; else it is waited for after the decode.
        std::optional<GraphExecutor> executor;
        const auto device_ready = [&] {
            RunOptions run = options.run;
            run.device = device.get();
            report.device = run.device;
            notice(run.device);
            require_codec(options.codec, run.device);
            executor.emplace(graph, std::move(run));
        };
        if (options.codec == Codec::gpu) device_ready();
        // Read once the pixels are: a file that fails gets its one error only.
        const auto read_metadata = [&] {
            std::string warning;
            ImageMetadata metadata = input_metadata(bytes, subject, options.write, warning);
            say(FileOptions::Message::warning, warning);
            return metadata;
        };
        // Plans for the input's format (allocating nothing yet), then refuses
        // outputs that would overwrite the input or that their format cannot
        // hold, before any work.
        const auto check_outputs = [&](int width, int height, int channels, Depth depth, int cv_depth) {
            try {
                executor->plan(width, height, channels, depth);
            } catch (const Error& e) {
                throw Error(subject, e.what());  // name the file the pipeline cannot take
            }
            for (std::size_t i = 0; i < graph.outputs().size(); ++i) {
                const fs::path out = output_path(output, graph, i);
                if (i > 0 && same_file(input, out))
                    throw std::invalid_argument(out.string() + ": is the input file; cbi never overwrites its input");
                check_output_format(out, CV_MAKETYPE(cv_depth, executor->channels_of(graph.outputs()[i])));
            }
        };
        // A killed earlier run's temporaries (none that a live write holds).
        const auto clear_temporaries = [&] {
            remove_stale_temporaries(output.has_parent_path() ? output.parent_path() : fs::path("."),
                                     std::span(&input, 1));
        };

        // Codec::gpu: a JPEG decoded (and a JPEG output encoded) on the GPU;
        // what its decoder refuses is decoded with OpenCV below. Not `auto`
        // for one image: starting nvJPEG costs more than libjpeg-turbo takes
        // (docs/performance.md#codec-start).
        if (options.codec == Codec::gpu && std::string_view(header.format) == "JPEG" && graph.outputs().size() == 1 &&
            executor->decodes_jpeg()) {
            check_outputs(static_cast<int>(header.width), static_cast<int>(header.height), header.channels == 1 ? 1 : 3,
                          Depth::u8, CV_8U);
            const int quality = output_format(output) == "JPEG" ? jpeg_quality(options.write) : 0;
            // Not the hardware decoder: its start costs more than nvJPEG's
            // CUDA decoder takes for one image (docs/performance.md#codec-start).
            if (auto r = executor->process_jpeg(bytes, quality, true, false)) {
                step("GPU codec+run");
                const ImageMetadata metadata = read_metadata();
                clear_temporaries();
                say(FileOptions::Message::warning, write_output(output, std::move(*r), options.write, metadata));
                report.outputs.push_back(output);
                step("write");
                return report;
            }
        }
        const cv::Mat image = decode_image(bytes, subject, options.max_pixels, options.max_bytes);
        step("decode");
        if (!executor) device_ready();
        step("device wait");
        const ImageView in = view_of(image);
        check_outputs(in.width, in.height, in.channels, in.depth, image.depth());
        const auto results = executor->run(in);
        step("run");
        const ImageMetadata metadata = read_metadata();
        clear_temporaries();
        for (std::size_t i = 0; i < results.size(); ++i) {
            const fs::path out = output_path(output, graph, i);
            say(FileOptions::Message::warning, write_image_atomic(out, as_mat(results[i]), options.write, metadata));
            report.outputs.push_back(out);
        }
        step("encode+write");
        return report;
    } catch (...) {
        // Failed before the device was waited for: its notice still comes
        // first (the error is the last line).
        if (device.valid()) {
            try {
                notice(device.get());
            } catch (...) {}
        }
        throw;
    }
}

}  // namespace cbi
