// Several devices in one batch (run_batch over BatchDevice, --device
// cuda:all / cuda:0,2): every image on exactly one device, the work spread,
// a device that is lost taken out with its images run again elsewhere.
// The devices here are CPU executors (this machine has no GPU); a lost
// device is a processor that throws cbi::DeviceLost, as a CUDA executor does
// after an error that poisons its context.
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>

#include "cli.hpp"
#include "pipeline/batch.hpp"
#include "pipeline/error.hpp"
#include "pipeline/executor.hpp"
#include "reference.hpp"

namespace fs = std::filesystem;
using namespace cbi;
using cbi::test::TempDir;

namespace {

RunOptions cpu() {
    RunOptions o;
    o.device = resolve_device(parse_device("cpu"));
    return o;
}

ProcessorFactory blur_factory() {
    return graph_processor_factory(parse_pipeline("blur:5 | gaussian:3"), cpu());
}

// A real executor that, once `healthy` images have gone through it, throws
// DeviceLost as a poisoned CUDA device does (for this processor and after).
class Failing : public Processor {
public:
    Failing(std::unique_ptr<Processor> inner, std::shared_ptr<std::atomic<int>> budget)
        : inner_(std::move(inner)), budget_(std::move(budget)) {}
    Image process(const ImageView& input) override {
        if (budget_->fetch_sub(1) <= 0) throw DeviceLost("CUDA device 1", "cudaErrorIllegalAddress (test)");
        return inner_->process(input);
    }

private:
    std::unique_ptr<Processor> inner_;
    std::shared_ptr<std::atomic<int>> budget_;
};

ProcessorFactory failing_factory(int healthy_images) {
    auto budget = std::make_shared<std::atomic<int>>(healthy_images);
    return [budget] { return std::make_unique<Failing>(blur_factory()(), budget); };
}

struct Folder {
    TempDir dir;
    int count;
    explicit Folder(int n) : count(n) {
        fs::create_directories(dir / "in");
        for (int i = 0; i < n; ++i)
            cv::imwrite((dir / "in" / ("p" + std::to_string(i) + ".png")).string(),
                        cbi::test::random_image(31 + i, 17 + 2 * i, 3, Depth::u8, 100 + i));
    }
    BatchPlan plan(const std::string& out) const {
        FolderOptions o;
        o.input_dir = dir / "in";
        o.output_dir = dir / out;
        return plan_folder(o);
    }
    std::map<std::string, std::string> outputs(const std::string& out) const {
        std::map<std::string, std::string> files;
        for (const auto& e : fs::directory_iterator(dir / out))
            files[e.path().filename().string()] = cbi::test::slurp(e.path());
        return files;
    }
};

BatchOptions two_jobs() {
    BatchOptions o;
    o.jobs = 2;
    o.in_flight = 4;
    return o;
}

}  // namespace

TEST(Devices, EveryImageOnOneDeviceAndTheWorkSpread) {
    Folder folder(12);
    const BatchSummary one = run_batch(folder.plan("one"), blur_factory(), two_jobs());
    ASSERT_EQ(one.processed, 12u);
    const BatchSummary two = run_batch(folder.plan("two"), {{"a", blur_factory()}, {"b", blur_factory()}}, two_jobs());
    EXPECT_EQ(two.processed, 12u);
    EXPECT_EQ(two.failed, 0u);
    ASSERT_EQ(two.devices.size(), 2u);
    EXPECT_EQ(two.devices[0].name, "a");
    EXPECT_EQ(two.devices[0].images + two.devices[1].images, 12u);
    // Ties go in turn: even one image at a time alternates the devices.
    EXPECT_GT(two.devices[0].images, 0u);
    EXPECT_GT(two.devices[1].images, 0u);
    EXPECT_TRUE(two.devices[0].lost.empty());
    EXPECT_EQ(folder.outputs("two"), folder.outputs("one"));
}

TEST(Devices, OneImageAtATimeAlternates) {
    Folder folder(6);
    BatchOptions serial;
    serial.overlap = false;
    const BatchSummary s =
        run_batch(folder.plan("out"), {{"a", blur_factory()}, {"b", blur_factory()}, {"c", blur_factory()}}, serial);
    ASSERT_EQ(s.devices.size(), 3u);
    for (const auto& d : s.devices) EXPECT_EQ(d.images, 2u) << d.name;
}

TEST(Devices, ALostDeviceIsTakenOutAndItsImagesRunElsewhere) {
    Folder folder(14);
    const BatchSummary one = run_batch(folder.plan("one"), blur_factory(), two_jobs());
    const BatchSummary s =
        run_batch(folder.plan("two"), {{"cuda:0", blur_factory()}, {"cuda:1", failing_factory(2)}}, two_jobs());
    EXPECT_EQ(s.processed, 14u);
    EXPECT_EQ(s.failed, 0u);
    ASSERT_EQ(s.devices.size(), 2u);
    EXPECT_TRUE(s.devices[0].lost.empty());
    EXPECT_NE(s.devices[1].lost.find("cudaErrorIllegalAddress"), std::string::npos) << s.devices[1].lost;
    EXPECT_EQ(s.devices[1].images, 2u);
    EXPECT_EQ(s.devices[0].images, 12u);
    EXPECT_EQ(folder.outputs("two"), folder.outputs("one"));
}

TEST(Devices, WhenEveryDeviceIsLostTheRestFailAndTheRunEnds) {
    Folder folder(6);
    const BatchSummary s =
        run_batch(folder.plan("out"), {{"cuda:0", failing_factory(1)}, {"cuda:1", failing_factory(1)}}, two_jobs());
    EXPECT_EQ(s.processed, 2u);
    EXPECT_EQ(s.failed, 4u);
    for (const BatchItem& item : s.items)
        if (item.status == ItemStatus::failed) {
            EXPECT_NE(item.error.find("every device of this batch is unusable"), std::string::npos) << item.error;
        }
}

// A processor that counts its kind alive and at work, around a real executor.
class Counted : public Processor {
public:
    struct Counts {
        std::atomic<int> made{0}, busy{0}, most_busy{0};
    };
    Counted(std::unique_ptr<Processor> inner, std::shared_ptr<Counts> counts)
        : inner_(std::move(inner)), counts_(std::move(counts)) {
        ++counts_->made;
    }
    Image process(const ImageView& input) override {
        const int now = ++counts_->busy;
        for (int most = counts_->most_busy; now > most && !counts_->most_busy.compare_exchange_weak(most, now);) {}
        Image out = inner_->process(input);
        --counts_->busy;
        return out;
    }

private:
    std::unique_ptr<Processor> inner_;
    std::shared_ptr<Counts> counts_;
};

// A device with fewer processors than images in flight (a GPU's,
// kGpuBatchProcessors): images wait for one, never use more at once, and
// every image is processed as with one processor per image in flight;
// beside an uncapped device, each takes images in proportion to its free
// share. A capped device that is lost still ends the run.
TEST(Devices, ACappedDeviceMakesNoMoreProcessorsAndImagesWaitForThem) {
    Folder folder(16);
    BatchOptions wide;
    wide.jobs = 4;
    wide.in_flight = 12;
    const BatchSummary one = run_batch(folder.plan("one"), blur_factory(), wide);
    ASSERT_EQ(one.processed, 16u);
    auto counts = std::make_shared<Counted::Counts>();
    const ProcessorFactory counted = [counts] { return std::make_unique<Counted>(blur_factory()(), counts); };
    const BatchSummary capped = run_batch(folder.plan("capped"), {{"cuda:0", counted, 1}}, wide);
    EXPECT_EQ(capped.processed, 16u);
    EXPECT_EQ(capped.failed, 0u);
    EXPECT_EQ(counts->made, 1);
    EXPECT_EQ(counts->most_busy, 1);
    EXPECT_EQ(folder.outputs("capped"), folder.outputs("one"));
    const BatchSummary mixed =
        run_batch(folder.plan("mixed"), {{"cuda:0", blur_factory(), 2}, {"cpu", blur_factory()}}, wide);
    EXPECT_EQ(mixed.processed, 16u);
    EXPECT_GT(mixed.devices[0].images, 0u);
    EXPECT_GT(mixed.devices[1].images, 0u);
    EXPECT_EQ(folder.outputs("mixed"), folder.outputs("one"));
    const BatchSummary lost = run_batch(folder.plan("lost"), {{"cuda:0", failing_factory(3), 2}}, wide);
    EXPECT_EQ(lost.processed, 3u);
    EXPECT_EQ(lost.failed, 13u);
}

TEST(Devices, ListsParse) {
    EXPECT_EQ(parse_devices("cpu").size(), 1u);
    EXPECT_EQ(parse_devices("cuda:1").front().index, 1);
    const auto list = parse_devices("cuda:0,2,0");
    ASSERT_EQ(list.size(), 3u);
    EXPECT_EQ(list[1].index, 2);
    EXPECT_EQ(list[2].index, 0);
    EXPECT_EQ(parse_devices("cuda:all").front().index, kAllDevices);
    for (const char* bad : {"cuda:0,", "cuda:,1", "cuda:0,x", "cuda:0,cuda:1", "cpu,cpu", "cuda:0,-1", "cuda:al"})
        EXPECT_THROW(parse_devices(bad), std::invalid_argument) << bad;
}

TEST(DevicesCli, ListsAreForBatchesAndNeedCuda) {
    TempDir dir;
    cv::imwrite((dir / "a.png").string(), cbi::test::random_image(20, 10, 3, Depth::u8, 1));
    // A malformed list is a usage error, a list for one image too.
    auto r = cbi::test::run_cli({(dir / "a.png").string(), "--blur", "3", "--device", "cuda:0,x"}, dir.path());
    EXPECT_EQ(r.code, 2) << r.err;
    r = cbi::test::run_cli({(dir / "a.png").string(), "--blur", "3", "--device", "cuda:all"}, dir.path());
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("batch mode"), std::string::npos) << r.err;
    // Well formed, on a machine or build without CUDA: one line, exit 1 (with a GPU it runs).
    r = cbi::test::run_cli({"--input-dir", dir.path().string(), "--output-dir", (dir / "out").string(), "--blur", "3",
                            "--device", "cuda:0,0"},
                           dir.path());
    if (r.code != 0) {
        EXPECT_EQ(r.code, 1) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_NE(r.err.find("--device cuda"), std::string::npos) << r.err;
    }
}

// --codec gpu where JPEG cannot be decoded on a GPU (no device, or a build
// without nvJPEG): one error line, exit 1, no notice before it and no output.
// With a GPU and nvJPEG it runs.
TEST(DevicesCli, TheGpuCodecWithoutItsDeviceIsOneErrorLine) {
    TempDir dir;
    cv::imwrite((dir / "a.jpg").string(), cbi::test::random_image(20, 10, 3, Depth::u8, 1));
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{(dir / "a.jpg").string(), "--blur", "3", "--codec", "gpu", "-o",
                                   (dir / "b.jpg").string()},
          std::vector<std::string>{(dir / "a.jpg").string(), (dir / "a.jpg").string(), "--blur", "3", "--codec", "gpu",
                                   "--output-dir", (dir / "out").string()}}) {
        const auto r = cbi::test::run_cli(args, dir.path());
        if (r.code == 0) continue;
        EXPECT_EQ(r.code, 1) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_TRUE(r.err.starts_with("cbi-filter: error: --codec gpu: ")) << r.err;
        EXPECT_FALSE(fs::exists(dir / "b.jpg"));
    }
}

// A small batch under --device auto runs on the CPU (its runs end before a
// CUDA device would have started); --device cuda keeps the GPU where there
// is one.
TEST(DevicesCli, ASmallBatchRunsOnTheCpuUnlessADeviceIsNamed) {
    TempDir dir;
    fs::create_directories(dir / "in");
    for (const char* name : {"a.png", "b.png", "c.png"})
        cv::imwrite((dir / "in" / name).string(), cbi::test::random_image(64, 48, 3, Depth::u8, 5));
    const bool gpu = resolve_device(parse_device("auto")).cuda;
    int runs = 0;
    const auto device_lines = [&](std::vector<std::string> args) {
        const fs::path out = dir / ("out" + std::to_string(++runs));
        args.insert(args.begin(),
                    {"--input-dir", (dir / "in").string(), "--output-dir", out.string(), "--blur", "3", "--stats"});
        const auto r = cbi::test::run_cli(args, dir.path());
        EXPECT_EQ(r.code, 0) << r.err;
        std::string lines;  // the --stats lines "device NAME: N images, busy ...", up to the comma
        std::istringstream stats(r.out);
        for (std::string line; std::getline(stats, line);)
            if (line.rfind("device ", 0) == 0) lines += line.substr(0, line.find(',')) + ";";
        return lines;
    };
    EXPECT_EQ(device_lines({}), "device cpu: 3 images;");
    if (gpu) {
        EXPECT_EQ(device_lines({"--device", "cuda"}), "device cuda:0: 3 images;");
    }
}

// One image under --device auto runs on the CPU where that is done before a
// CUDA device would have started; a named device or schedule keeps the GPU
// where there is one.
TEST(DevicesCli, OneSmallImageRunsOnTheCpuUnlessADeviceOrScheduleIsNamed) {
    TempDir dir;
    const std::string in = (dir / "a.png").string();
    cv::imwrite(in, cbi::test::random_image(64, 48, 3, Depth::u8, 3));
    const bool gpu = resolve_device(parse_device("auto")).cuda;
    const auto device_line = [&](std::vector<std::string> args) {
        args.insert(args.begin(), {in, "--blur", "3", "--stats", "-o", (dir / "out.png").string()});
        const auto r = cbi::test::run_cli(args, dir.path());
        EXPECT_EQ(r.code, 0) << r.err;
        return r.out.substr(0, r.out.find('\n'));
    };
    EXPECT_EQ(device_line({}), "device cpu");
    EXPECT_EQ(device_line({"--schedule", "column:32"}), gpu ? "device cuda:0" : "device cpu");
    if (gpu) {
        EXPECT_EQ(device_line({"--device", "cuda"}), "device cuda:0");
    }
    const auto plan = cbi::test::run_cli({in, "--blur", "3", "--print-pipeline"}, dir.path());
    EXPECT_EQ(plan.code, 0) << plan.err;
    EXPECT_EQ(plan.out.rfind("pipeline on cpu", 0), 0u) << plan.out;
}
