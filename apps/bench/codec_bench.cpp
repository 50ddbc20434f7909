// cbi-codec-bench: what the JPEG codecs alone can do on this machine, in one
// process, so that a batch's images/s can be read against them: OpenCV's
// (libjpeg-turbo) decode and encode on THREADS threads, and nvJPEG's through
// cbi's GpuJpegCodec (hardware decoder where the GPU has one) on THREADS
// threads, each with its own codec and stream. Every JPEG of DIR is read
// into memory first; each pass decodes (or encodes) all of them ROUNDS
// times; encodes at quality 95 as cbi-filter does. Also the start-up costs
// a single image pays: the CUDA context and nvJPEG's handles.
//   cbi-codec-bench DIR [--threads 16] [--rounds 2] [--device 0]
//   cbi-codec-bench . --start serial|parallel    nvJPEG's start-up, call by call
//   cbi-codec-bench . --copies BYTES             allocations and copies of one large image
//   cbi-codec-bench DIR --batches                 the hardware decoder alone by batch size
// Builds with nvJPEG only (CBI_WITH_NVJPEG).
#include <CLI/CLI.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/cuda_runtime.hpp"
#include "pipeline/error.hpp"
#include "pipeline/image_io.hpp"
#include "pipeline/jpeg_gpu.hpp"

#include <nvjpeg.h>

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs work(thread, image) over `count` images on `threads` threads (each
// takes the next image); returns the wall seconds.
double run_threads(int threads, std::size_t count, const std::function<void(int, std::size_t)>& work) {
    std::atomic<std::size_t> next{0};
    const Clock::time_point t0 = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            for (std::size_t i; (i = next++) < count;) work(t, i);
        });
    for (std::thread& th : pool) th.join();
    return since(t0);
}

void report(const char* what, std::size_t images, double seconds) {
    std::printf("%-44s %6zu images %7.3f s %8.1f images/s\n", what, images, seconds, images / seconds);
}

void nv(nvjpegStatus_t s, const char* what) {
    if (s != NVJPEG_STATUS_SUCCESS)
        throw cbi::Error("", std::string(what) + " failed: nvJPEG status " + std::to_string(s));
}

// nvJPEG's start-up, call by call, in a fresh process (the first call pays
// the library's own start): parallel makes the two handles on two threads.
void nvjpeg_start_parts(int device, bool parallel) {
    cbi::use_device(device);
    CBI_CUDA_CHECK(cudaFree(nullptr), "cudaFree");
    nvjpegHandle_t def = nullptr, hw = nullptr;
    Clock::time_point t0 = Clock::now();
    double t_def = 0, t_hw = 0;
    const auto make_default = [&] {
        const Clock::time_point t = Clock::now();
        nv(nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, 0, &def), "nvjpegCreateEx default");
        t_def = since(t);
    };
    const auto make_hw = [&] {
        const Clock::time_point t = Clock::now();
        nv(nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, 0, &hw), "nvjpegCreateEx hardware");
        t_hw = since(t);
    };
    if (parallel) {
        std::thread a(make_default), b(make_hw);
        a.join();
        b.join();
    } else {
        make_default();
        make_hw();
    }
    std::printf("nvJPEG start (%s): handles %.3f s (default %.3f, hardware %.3f)\n", parallel ? "parallel" : "serial",
                since(t0), t_def, t_hw);
    t0 = Clock::now();
    nvjpegJpegState_t state = nullptr;
    nv(nvjpegJpegStateCreate(hw, &state), "nvjpegJpegStateCreate");
    const double t_state = since(t0);
    t0 = Clock::now();
    nv(nvjpegDecodeBatchedInitialize(hw, state, 1, 1, NVJPEG_OUTPUT_BGRI), "nvjpegDecodeBatchedInitialize");
    const double t_init = since(t0);
    t0 = Clock::now();
    nvjpegJpegState_t state2 = nullptr;
    nv(nvjpegJpegStateCreate(hw, &state2), "nvjpegJpegStateCreate");
    nv(nvjpegDecodeBatchedInitialize(hw, state2, 8, 1, NVJPEG_OUTPUT_BGRI), "nvjpegDecodeBatchedInitialize");
    const double t_state2 = since(t0);
    t0 = Clock::now();
    nvjpegEncoderState_t enc = nullptr;
    nv(nvjpegEncoderStateCreate(def, &enc, nullptr), "nvjpegEncoderStateCreate");
    std::printf(
        "nvJPEG start: hardware state %.3f s, batched init %.3f s, a second state (batch 8) %.3f s, encoder state %.3f "
        "s\n",
        t_state, t_init, t_state2, since(t0));
    // Whether the hardware handle also encodes (one handle would then do).
    nvjpegEncoderState_t hw_enc = nullptr;
    nvjpegEncoderParams_t hw_params = nullptr;
    cbi::DeviceImage img(64, 48, 3, cbi::Depth::u8);
    CBI_CUDA_CHECK(cudaMemset(img.view.data, 90, img.view.stride * 48), "cudaMemset");
    nvjpegImage_t in{};
    in.channel[0] = reinterpret_cast<unsigned char*>(img.view.data);
    in.pitch[0] = img.view.stride;
    std::size_t length = 0;
    nvjpegStatus_t st = nvjpegEncoderStateCreate(hw, &hw_enc, nullptr);
    if (st == NVJPEG_STATUS_SUCCESS) st = nvjpegEncoderParamsCreate(hw, &hw_params, nullptr);
    if (st == NVJPEG_STATUS_SUCCESS)
        st = nvjpegEncodeImage(hw, hw_enc, hw_params, &in, NVJPEG_INPUT_BGRI, 64, 48, nullptr);
    if (st == NVJPEG_STATUS_SUCCESS) st = nvjpegEncodeRetrieveBitstream(hw, hw_enc, nullptr, &length, nullptr);
    std::printf("nvJPEG start: the hardware handle encodes: status %d, %zu bytes\n", static_cast<int>(st), length);
}

// What one large image's copies and allocations cost (a single image's run
// pays them once): `bytes` each.
void copies(int device, std::size_t bytes) {
    cbi::use_device(device);
    CBI_CUDA_CHECK(cudaFree(nullptr), "cudaFree");
    cbi::Stream stream;
    Clock::time_point t0 = Clock::now();
    cbi::DeviceBuffer dev(bytes);
    const double t_malloc = since(t0);
    t0 = Clock::now();
    cbi::PinnedBuffer pinned(bytes);
    const double t_pinned = since(t0);
    t0 = Clock::now();
    std::vector<std::byte> pageable(bytes, std::byte{1});
    const double t_pageable = since(t0);
    t0 = Clock::now();
    std::memcpy(pinned.data(), pageable.data(), bytes);
    const double t_memcpy = since(t0);
    for (int round = 0; round < 2; ++round) {
        t0 = Clock::now();
        CBI_CUDA_CHECK(cudaMemcpyAsync(dev.data(), pinned.data(), bytes, cudaMemcpyHostToDevice, stream.get()), "h2d");
        stream.synchronize("h2d");
        const double t_h2d_pinned = since(t0);
        t0 = Clock::now();
        CBI_CUDA_CHECK(cudaMemcpyAsync(dev.data(), pageable.data(), bytes, cudaMemcpyHostToDevice, stream.get()),
                       "h2d");
        stream.synchronize("h2d");
        const double t_h2d_pageable = since(t0);
        t0 = Clock::now();
        CBI_CUDA_CHECK(cudaMemcpyAsync(pageable.data(), dev.data(), bytes, cudaMemcpyDeviceToHost, stream.get()),
                       "d2h");
        stream.synchronize("d2h");
        const double t_d2h_pageable = since(t0);
        std::printf(
            "%zu MB: cudaMalloc %.3f s, pinned alloc %.3f s, pageable alloc+fill %.3f s, memcpy into pinned %.3f s, "
            "H2D pinned %.3f s, H2D pageable %.3f s, D2H pageable %.3f s\n",
            bytes >> 20, t_malloc, t_pinned, t_pageable, t_memcpy, t_h2d_pinned, t_h2d_pageable, t_d2h_pageable);
    }
}

// The hardware decoder alone, one state on one thread, by batch size: its
// engines decode a batch's images in parallel
// (docs/performance.md#hardware-jpeg-batches). Every file must be a
// colour JPEG the hardware decoder takes.
void hardware_batches(int device, const std::vector<std::vector<std::uint8_t>>& files, std::size_t n) {
    cbi::use_device(device);
    CBI_CUDA_CHECK(cudaFree(nullptr), "cudaFree");
    nvjpegHandle_t hw = nullptr;
    nv(nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION, &hw),
       "nvjpegCreateEx hardware");
    unsigned engines = 0, cores = 0;
    if (nvjpegGetHardwareDecoderInfo(hw, &engines, &cores) == NVJPEG_STATUS_SUCCESS)
        std::printf("hardware decoder: %u engines, %u cores each\n", engines, cores);
    nvjpegJpegStream_t parsed = nullptr;
    nv(nvjpegJpegStreamCreate(hw, &parsed), "nvjpegJpegStreamCreate");
    unsigned w = 0, h = 0;
    for (const auto& f : files) {
        nv(nvjpegJpegStreamParseHeader(hw, f.data(), f.size(), parsed), "nvjpegJpegStreamParseHeader");
        unsigned fw = 0, fh = 0;
        nv(nvjpegJpegStreamGetFrameDimensions(parsed, &fw, &fh), "nvjpegJpegStreamGetFrameDimensions");
        w = std::max(w, fw);
        h = std::max(h, fh);
    }
    cbi::Stream stream;
    for (const int batch : {1, 2, 4, 8, 16, 32, 64}) {
        nvjpegJpegState_t state = nullptr;
        nv(nvjpegJpegStateCreate(hw, &state), "nvjpegJpegStateCreate");
        nv(nvjpegDecodeBatchedInitialize(hw, state, batch, 1, NVJPEG_OUTPUT_BGRI), "nvjpegDecodeBatchedInitialize");
        nv(nvjpegDecodeBatchedPreAllocate(hw, state, batch, static_cast<int>(w), static_cast<int>(h), NVJPEG_CSS_444,
                                          NVJPEG_OUTPUT_BGRI),
           "nvjpegDecodeBatchedPreAllocate");
        std::vector<cbi::DeviceImage> out;
        std::vector<nvjpegImage_t> images(batch);
        for (int i = 0; i < batch; ++i) {
            out.emplace_back(static_cast<int>(w), static_cast<int>(h), 3, cbi::Depth::u8);
            images[i].channel[0] = reinterpret_cast<unsigned char*>(out.back().view.data);
            images[i].pitch[0] = out.back().view.stride;
        }
        std::vector<const unsigned char*> data(batch);
        std::vector<std::size_t> lengths(batch);
        const auto decode = [&](std::size_t count) {
            for (std::size_t first = 0; first < count; first += batch) {
                for (int i = 0; i < batch; ++i) {
                    const auto& f = files[(first + i) % files.size()];
                    data[i] = f.data();
                    lengths[i] = f.size();
                }
                nv(nvjpegDecodeBatched(hw, state, data.data(), lengths.data(), images.data(), stream.get()),
                   "nvjpegDecodeBatched");
                stream.synchronize("nvjpegDecodeBatched");
            }
        };
        decode(static_cast<std::size_t>(batch));  // warm
        const std::size_t count = (n + batch - 1) / batch * batch;
        const Clock::time_point t0 = Clock::now();
        decode(count);
        const std::string what = "hardware decoder, batches of " + std::to_string(batch);
        report(what.c_str(), count, since(t0));
        nvjpegJpegStateDestroy(state);
    }
    nvjpegJpegStreamDestroy(parsed);
    nvjpegDestroy(hw);
}
}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"cbi-codec-bench: JPEG decode and encode alone, OpenCV on the CPU and nvJPEG on the GPU"};
    std::string dir;
    int threads = static_cast<int>(std::thread::hardware_concurrency()), rounds = 2, device = 0;
    std::string start;
    std::size_t copy_bytes = 0;
    bool batches = false;
    app.add_option("dir", dir, "a folder of JPEGs")->required();
    app.add_option("--threads", threads, "threads of each codec")->check(CLI::Range(1, 4096));
    app.add_option("--rounds", rounds, "passes over the folder")->check(CLI::Range(1, 1000));
    app.add_option("--device", device, "CUDA device")->check(CLI::Range(0, 64));
    app.add_option("--start", start,
                   "only time nvJPEG's start-up call by call: serial or parallel (two handles on two threads)")
        ->check(CLI::IsMember({"serial", "parallel"}));
    app.add_option("--copies", copy_bytes, "only time allocations and copies of this many bytes");
    app.add_flag("--batches", batches, "only time the hardware decoder alone by batch size (1 to 64 images a call)");
    CLI11_PARSE(app, argc, argv);
    try {
        if (copy_bytes > 0) {
            copies(device, copy_bytes);
            return 0;
        }
        if (!start.empty()) {
            nvjpeg_start_parts(device, start == "parallel");
            return 0;
        }
        cv::setNumThreads(1);
        std::vector<std::vector<std::uint8_t>> files;
        for (const auto& e : fs::directory_iterator(dir))
            if (e.path().extension() == ".jpg" || e.path().extension() == ".jpeg")
                files.push_back(cbi::read_file(e.path()));
        if (files.empty()) throw cbi::Error(dir, "holds no .jpg files");
        const std::size_t n = files.size() * static_cast<std::size_t>(rounds);
        std::printf("%zu JPEGs x %d rounds, %d threads\n", files.size(), rounds, threads);
        if (batches) {
            hardware_batches(device, files, n);
            return 0;
        }

        // Start-up, as one image meets it.
        Clock::time_point t0 = Clock::now();
        cbi::use_device(device);
        CBI_CUDA_CHECK(cudaFree(nullptr), "cudaFree");
        std::printf("start: CUDA context %.3f s\n", since(t0));
        t0 = Clock::now();
        auto first = std::make_unique<cbi::GpuJpegCodec>(device);
        std::printf("start: nvJPEG handles and the first codec %.3f s (hardware decoder: %s)\n", since(t0),
                    first->hardware_decoder() ? "yes" : "no");
        t0 = Clock::now();
        first.reset();
        { cbi::GpuJpegCodec second(device); }
        std::printf("start: one more codec %.3f s\n", since(t0));

        // CPU: decode all, then encode the decoded images.
        std::vector<cv::Mat> decoded(files.size());
        double s = run_threads(threads, n, [&](int, std::size_t i) {
            decoded[i % files.size()] = cv::imdecode(files[i % files.size()], cv::IMREAD_COLOR);
        });
        report("OpenCV decode", n, s);
        s = run_threads(threads, n, [&](int, std::size_t i) {
            std::vector<std::uint8_t> out;
            cv::imencode(".jpg", decoded[i % files.size()], out, {cv::IMWRITE_JPEG_QUALITY, 95});
        });
        report("OpenCV encode q95", n, s);
        s = run_threads(threads, n, [&](int, std::size_t i) {
            const cv::Mat m = cv::imdecode(files[i % files.size()], cv::IMREAD_COLOR);
            std::vector<std::uint8_t> out;
            cv::imencode(".jpg", m, out, {cv::IMWRITE_JPEG_QUALITY, 95});
        });
        report("OpenCV decode+encode q95", n, s);

        // GPU: one codec, stream and image buffer per thread.
        struct Lane {
            std::unique_ptr<cbi::GpuJpegCodec> codec;
            cbi::Stream stream;
            cbi::DeviceImage image;
        };
        std::vector<std::unique_ptr<Lane>> lanes;
        t0 = Clock::now();
        for (int t = 0; t < threads; ++t) {
            lanes.push_back(std::make_unique<Lane>());
            lanes.back()->codec = std::make_unique<cbi::GpuJpegCodec>(device);
        }
        std::printf("start: %d more codecs %.3f s\n", threads, since(t0));
        const auto gpu_decode = [&](Lane& lane, const std::vector<std::uint8_t>& jpeg) {
            const auto info = lane.codec->parse(jpeg);
            if (!info) throw cbi::Error("", "nvJPEG takes no decoder for an input");
            if (lane.image.view.width != info->width || lane.image.view.height != info->height ||
                lane.image.view.channels != info->channels)
                lane.image = cbi::DeviceImage(info->width, info->height, info->channels, cbi::Depth::u8);
            if (!lane.codec->decode(jpeg, lane.image.view, lane.stream.get()))
                throw cbi::Error("", "nvJPEG failed to decode an input");
            lane.stream.synchronize("decode");
        };
        // Warm each lane (buffers sized, hardware states made) before timing.
        run_threads(threads, static_cast<std::size_t>(threads),
                    [&](int t, std::size_t i) { gpu_decode(*lanes[t], files[i % files.size()]); });
        s = run_threads(threads, n, [&](int t, std::size_t i) { gpu_decode(*lanes[t], files[i % files.size()]); });
        report("nvJPEG decode (into device memory)", n, s);
        s = run_threads(threads, n, [&](int t, std::size_t) {
            Lane& lane = *lanes[t];
            lane.codec->encode(lane.image.view, 95, lane.stream.get());
        });
        report("nvJPEG encode q95 (from device memory)", n, s);
        s = run_threads(threads, n, [&](int t, std::size_t i) {
            Lane& lane = *lanes[t];
            gpu_decode(lane, files[i % files.size()]);
            lane.codec->encode(lane.image.view, 95, lane.stream.get());
        });
        report("nvJPEG decode+encode q95", n, s);
        s = run_threads(threads, n, [&](int t, std::size_t i) {
            Lane& lane = *lanes[t];
            gpu_decode(lane, files[i % files.size()]);
            cv::Mat host(lane.image.view.height, lane.image.view.width, CV_8UC3);
            cbi::download(lane.image.view,
                          cbi::ImageView{reinterpret_cast<std::byte*>(host.data), host.cols, host.rows, 3,
                                         cbi::Depth::u8, host.step},
                          lane.stream.get());
            lane.stream.synchronize("download");
            std::vector<std::uint8_t> out;
            cv::imencode(".jpg", host, out, {cv::IMWRITE_JPEG_QUALITY, 95});
        });
        report("nvJPEG decode + download + OpenCV encode", n, s);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cbi-codec-bench: error: %s\n", e.what());
        return 1;
    }
}
