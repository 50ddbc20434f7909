// nvJPEG decoding and encoding (GpuJpegCodec) against OpenCV's libjpeg on
// real photos and generated images: odd sizes, 4:2:0 / 4:2:2 / 4:4:4,
// grayscale, progressive, EXIF orientation, broken streams. Built where
// nvJPEG exists; skips without a device.
#include "pipeline/jpeg_gpu.hpp"

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "gpu.hpp"
#include "jpeg_bytes.hpp"
#include "pipeline/batch.hpp"
#include "pipeline/cuda_runtime.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/image_io.hpp"
#include "pipeline/opencv.hpp"
#include "reference.hpp"

namespace fs = std::filesystem;

namespace cbi {
namespace {

// Differences between nvJPEG and libjpeg-turbo (OpenCV's decoder) come from
// the inverse DCT's rounding and the chroma upsampling. Measured (this
// test's "max/mean |gpu - cpu|" lines, H100, nvJPEG 13.0): at most 3 levels
// and a mean under 0.1 wherever the chroma planes are at least 2 samples
// on each side; a subsampled image narrower or shorter than 16 pixels
// (3x5, 1x777) differs by up to 15 levels (mean 5.3): libjpeg's upsampling
// and nvJPEG's treat a one-sample chroma edge differently.
struct Tolerance {
    double max, mean;
};
Tolerance tolerance(const cv::Mat& img) {
    if (img.channels() == 1 || std::min(img.cols, img.rows) >= 16) return {3, 0.1};
    return {16, 6};
}

std::vector<std::uint8_t> encode_cpu(const cv::Mat& img, std::vector<int> params) {
    std::vector<std::uint8_t> out;
    EXPECT_TRUE(cv::imencode(".jpg", img, out, params));
    return out;
}

cv::Mat noisy_gradient(int w, int h, int channels, int seed) {
    cv::Mat img(h, w, CV_8UC(channels));
    cv::RNG rng(seed);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            for (int c = 0; c < channels; ++c)
                img.ptr<std::uint8_t>(y)[x * channels + c] = cv::saturate_cast<std::uint8_t>(
                    (x * 255 / std::max(w, 2)) * (c + 1) / 3 + (y * 255 / std::max(h, 2)) / 2 + rng.gaussian(10));
    return img;
}

// Decodes on the GPU; an empty Mat when the codec passes the stream to the CPU.
cv::Mat decode_gpu(GpuJpegCodec& codec, const std::vector<std::uint8_t>& jpeg, std::string* decoder = nullptr) {
    const auto info = codec.parse(jpeg);
    if (!info) return {};
    if (decoder) *decoder = info->decoder;
    DeviceImage dev(info->width, info->height, info->channels, Depth::u8);
    Stream stream;
    if (!codec.decode(jpeg, dev.view, stream.get())) return {};
    cv::Mat host(info->height, info->width, CV_8UC(info->channels));
    download(dev.view, view_of(host), stream.get());
    stream.synchronize("decode_gpu");
    return host;
}

// GPU decode against cbi's CPU decode (OpenCV, EXIF orientation applied).
void expect_close_to_cpu(GpuJpegCodec& codec, const std::vector<std::uint8_t>& jpeg, const std::string& what) {
    SCOPED_TRACE(what);
    const cv::Mat cpu = decode_image(jpeg, what);
    std::string decoder;
    const cv::Mat gpu = decode_gpu(codec, jpeg, &decoder);
    ASSERT_FALSE(gpu.empty()) << "nvJPEG did not decode " << what;
    ASSERT_EQ(gpu.size(), cpu.size());
    ASSERT_EQ(gpu.type(), cpu.type());
    cv::Mat diff;
    cv::absdiff(gpu, cpu, diff);
    double max = 0;
    cv::minMaxLoc(diff.reshape(1), nullptr, &max);
    const double mean = cv::mean(diff.reshape(1))[0];
    std::printf("  %-44s %-8s max/mean |gpu - cpu| = %3.0f / %.3f\n", what.c_str(), decoder.c_str(), max, mean);
    const Tolerance t = tolerance(cpu);
    EXPECT_LE(max, t.max);
    EXPECT_LE(mean, t.mean);
}

TEST(JpegGpu, RealPhotosDecodeCloseToOpenCV) {
    REQUIRE_GPU();
    GpuJpegCodec codec(0);
    std::printf("  hardware decoder: %s\n", codec.hardware_decoder() ? "yes" : "no");
    for (const char* name : {"butterfly.jpg", "HappyFish.jpg"})
        expect_close_to_cpu(codec, read_file(test::samples_dir() + "/" + name), name);
}

// One image skips the hardware decoder (and its start): nvJPEG's CUDA
// decoder takes the same streams, as close to OpenCV.
TEST(JpegGpu, WithoutTheHardwareDecoderTheCudaDecoderTakesIt) {
    REQUIRE_GPU();
    GpuJpegCodec codec(0);
    for (const char* name : {"butterfly.jpg", "HappyFish.jpg"}) {
        SCOPED_TRACE(name);
        const auto jpeg = read_file(test::samples_dir() + "/" + name);
        const auto info = codec.parse(jpeg, true, false);
        ASSERT_TRUE(info);
        EXPECT_STRNE(info->decoder, "hardware");
        DeviceImage dev(info->width, info->height, info->channels, Depth::u8);
        Stream stream;
        ASSERT_TRUE(codec.decode(jpeg, dev.view, stream.get()));
        cv::Mat host(info->height, info->width, CV_8UC(info->channels));
        download(dev.view, view_of(host), stream.get());
        stream.synchronize("decode");
        const cv::Mat cpu = decode_image(jpeg, name);
        EXPECT_LE(cv::norm(host, cpu, cv::NORM_INF), tolerance(cpu).max);
    }
}

// The encoder for the test streams: OpenCV 4.6 writes colour as 4:2:0 only
// (baseline or progressive); nvJPEG's encoder writes 4:2:2 and 4:4:4.
std::vector<std::uint8_t> encode_gpu(GpuJpegCodec& codec, const cv::Mat& img, GpuJpegCodec::Chroma chroma) {
    Stream stream;
    DeviceImage dev(img.cols, img.rows, img.channels(), Depth::u8);
    upload(view_of(img), dev.view, stream.get());
    return codec.encode(dev.view, 90, stream.get(), chroma);
}

TEST(JpegGpu, SamplingsSizesGrayAndProgressiveDecodeCloseToOpenCV) {
    REQUIRE_GPU();
    GpuJpegCodec codec(0);
    const cv::Size sizes[] = {{1, 1}, {3, 5}, {17, 13}, {641, 479}, {1023, 1}, {1, 777}};
    for (const cv::Size size : sizes) {
        const std::string dims = std::to_string(size.width) + "x" + std::to_string(size.height);
        const cv::Mat colour = noisy_gradient(size.width, size.height, 3, size.area());
        const cv::Mat gray = noisy_gradient(size.width, size.height, 1, size.area());
        for (int progressive : {0, 1}) {
            const std::string p = progressive ? " progressive" : "";
            const std::vector<int> params = {cv::IMWRITE_JPEG_QUALITY, 90, cv::IMWRITE_JPEG_PROGRESSIVE, progressive};
            expect_close_to_cpu(codec, encode_cpu(colour, params), dims + " 4:2:0 (libjpeg)" + p);
            expect_close_to_cpu(codec, encode_cpu(gray, params), dims + " gray (libjpeg)" + p);
        }
        expect_close_to_cpu(codec, encode_gpu(codec, colour, GpuJpegCodec::Chroma::s422), dims + " 4:2:2 (nvJPEG)");
        expect_close_to_cpu(codec, encode_gpu(codec, colour, GpuJpegCodec::Chroma::s444), dims + " 4:4:4 (nvJPEG)");
    }
}

TEST(JpegGpu, ExifOrientationIsAppliedAsOnTheCpu) {
    REQUIRE_GPU();
    GpuJpegCodec codec(0);
    const cv::Mat img = noisy_gradient(64, 40, 3, 7);
    const auto jpg = encode_cpu(img, {cv::IMWRITE_JPEG_QUALITY, 95});
    for (std::uint16_t orientation = 1; orientation <= 8; ++orientation)
        expect_close_to_cpu(codec, test::with_exif(jpg, orientation), "orientation " + std::to_string(orientation));
}

TEST(JpegGpu, EncodedJpegsDecodeWithOpenCV) {
    REQUIRE_GPU();
    GpuJpegCodec codec(0);
    Stream stream;
    const cv::Mat photo = cv::imread(test::samples_dir() + "/butterfly.jpg", cv::IMREAD_COLOR);
    cv::Mat gray;
    cv::extractChannel(photo, gray, 1);
    for (const cv::Mat& img : {photo, gray, noisy_gradient(1, 1, 3, 1), noisy_gradient(17, 13, 1, 2)}) {
        SCOPED_TRACE(std::to_string(img.cols) + "x" + std::to_string(img.rows) + "x" + std::to_string(img.channels()));
        DeviceImage dev(img.cols, img.rows, img.channels(), Depth::u8);
        upload(view_of(img), dev.view, stream.get());
        const std::vector<std::uint8_t> jpeg = codec.encode(dev.view, 95, stream.get());
        const cv::Mat back = cv::imdecode(jpeg, cv::IMREAD_UNCHANGED);
        ASSERT_FALSE(back.empty());
        ASSERT_EQ(back.size(), img.size());
        ASSERT_EQ(back.channels(), img.channels());
        const double psnr = cv::PSNR(back, img);
        std::printf("  GPU-encoded %dx%dx%d, q95: %zu bytes, PSNR %.1f dB\n", img.cols, img.rows, img.channels(),
                    jpeg.size(), psnr);
        if (img.total() > 64) {
            EXPECT_GE(psnr, 30.0);
        }
    }
}

TEST(JpegGpu, BrokenStreamsAreLeftToTheCpuDecoder) {
    REQUIRE_GPU();
    GpuJpegCodec codec(0);
    const auto good = read_file(test::samples_dir() + "/butterfly.jpg");
    std::vector<std::vector<std::uint8_t>> broken;
    broken.emplace_back(good.begin(), good.begin() + 2);                // SOI only
    broken.emplace_back(good.begin(), good.begin() + good.size() / 2);  // cut in the scan
    broken.emplace_back(good.begin(), good.begin() + 200);              // cut in the headers
    auto garbage = good;
    for (std::size_t i = good.size() / 3; i < good.size() - 2; i += 97) garbage[i] = 0xFF;  // markers in the scan
    broken.push_back(garbage);
    broken.push_back({0xFF, 0xD8, 0xFF, 0xC0, 0, 0});  // an empty SOF
    for (std::size_t i = 0; i < broken.size(); ++i) {
        SCOPED_TRACE("case " + std::to_string(i));
        // Either nvJPEG refuses it (the CPU path then reports the file) or it
        // decodes something; it never throws for the data or crashes.
        EXPECT_NO_THROW({
            const cv::Mat m = decode_gpu(codec, broken[i]);
            std::printf("  broken case %zu: %s\n", i, m.empty() ? "left to the CPU" : "decoded by nvJPEG");
        });
    }
    // The codec still works afterwards.
    expect_close_to_cpu(codec, good, "butterfly.jpg after the broken ones");
}

// Threads that decode at the same time share the hardware decoder's
// batches: every image comes out as it does when decoded alone, whatever
// its size, channels or neighbours in the batch; a stream the hardware
// decoder fails on fails alone, and the others in its batch still decode.
TEST(JpegGpu, ConcurrentDecodesBatchedAsDecodedAlone) {
    REQUIRE_GPU();
    std::vector<std::vector<std::uint8_t>> jpegs;
    for (int i = 0; i < 12; ++i)
        jpegs.push_back(encode_cpu(noisy_gradient(300 + 37 * i, 200 + 53 * (i % 5), i % 4 == 3 ? 1 : 3, 100 + i),
                                   {cv::IMWRITE_JPEG_QUALITY, 85 + i}));
    auto garbage = jpegs[5];  // headers intact, markers in the scan
    for (std::size_t i = garbage.size() / 3; i < garbage.size() - 2; i += 61) garbage[i] = 0xFF;
    jpegs.push_back(garbage);
    std::vector<cv::Mat> alone;
    {
        GpuJpegCodec codec(0);
        for (const auto& j : jpegs) alone.push_back(decode_gpu(codec, j));
    }
    for (std::size_t i = 0; i + 1 < jpegs.size(); ++i) ASSERT_FALSE(alone[i].empty()) << "image " << i;
    for (int round = 0; round < 4; ++round) {
        std::vector<cv::Mat> together(jpegs.size());
        std::atomic<int> arrived{0};
        std::vector<std::thread> threads;
        for (std::size_t i = 0; i < jpegs.size(); ++i)
            threads.emplace_back([&, i] {
                GpuJpegCodec codec(0);
                const auto info = codec.parse(jpegs[i]);
                std::optional<DeviceImage> dev;
                if (info) dev.emplace(info->width, info->height, info->channels, Depth::u8);
                Stream stream;
                ++arrived;  // every thread, so that none waits for one that left
                while (arrived < static_cast<int>(jpegs.size())) std::this_thread::yield();
                if (!info || !codec.decode(jpegs[i], dev->view, stream.get())) return;
                cv::Mat host(info->height, info->width, CV_8UC(info->channels));
                download(dev->view, view_of(host), stream.get());
                stream.synchronize("decode");
                together[i] = host;
            });
        for (std::thread& t : threads) t.join();
        for (std::size_t i = 0; i < jpegs.size(); ++i) {
            SCOPED_TRACE("round " + std::to_string(round) + ", image " + std::to_string(i));
            ASSERT_EQ(together[i].empty(), alone[i].empty());
            if (alone[i].empty()) continue;
            ASSERT_EQ(together[i].size(), alone[i].size());
            ASSERT_EQ(together[i].type(), alone[i].type());
            EXPECT_EQ(cv::norm(together[i], alone[i], cv::NORM_INF), 0);
        }
    }
}

// A batch with the GPU codec on as many workers as a 16-core host has:
// every worker may wait for one of the two hardware decoder states at once
// (a decode that suspended its task while holding a state deadlocked this),
// and auto mixes the CPU's codecs in. Every image comes out, close to what
// the CPU codecs give.
TEST(JpegGpu, BatchesWithTheGpuCodecOnSixteenWorkersFinish) {
    REQUIRE_GPU();
    std::string templ = (fs::temp_directory_path() / "cbi-jpeg-batch-XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    const fs::path dir = templ;
    struct Remove {
        fs::path p;
        ~Remove() { fs::remove_all(p); }
    } remove{dir};
    fs::create_directories(dir / "in");
    for (int i = 0; i < 48; ++i)
        ASSERT_TRUE(cv::imwrite((dir / "in" / ("p" + std::to_string(i) + ".jpg")).string(),
                                noisy_gradient(640 + i, 480, 3, i), {cv::IMWRITE_JPEG_QUALITY, 90}));
    RunOptions run;
    run.device = resolve_device(parse_device("cuda:0"));
    for (const auto codec :
         {BatchOptions::JpegCodec::device, BatchOptions::JpegCodec::automatic, BatchOptions::JpegCodec::cpu}) {
        const std::string out = "out" + std::to_string(static_cast<int>(codec));
        SCOPED_TRACE(out);
        FolderOptions folder;
        folder.input_dir = dir / "in";
        folder.output_dir = dir / out;
        BatchOptions options;
        options.jobs = 16;
        options.in_flight = 32;
        options.jpeg = codec;
        const BatchSummary s =
            run_batch(plan_folder(folder), graph_processor_factory(parse_pipeline("blur:3"), run), options);
        EXPECT_EQ(s.processed, 48u);
        EXPECT_EQ(s.failed, 0u);
    }
    for (int i = 0; i < 48; ++i) {
        const std::string name = "p" + std::to_string(i) + ".jpg";
        const cv::Mat cpu = cv::imread((dir / "out2" / name).string());
        for (const char* out : {"out0", "out1"}) {
            const cv::Mat gpu = cv::imread((dir / out / name).string());
            ASSERT_EQ(gpu.size(), cpu.size()) << out << "/" << name;
            EXPECT_GT(cv::PSNR(gpu, cpu), 38) << out << "/" << name;  // two lossy encoders of the same pixels
        }
    }
}

}  // namespace
}  // namespace cbi
