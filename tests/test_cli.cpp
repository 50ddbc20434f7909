// The pipeline options of the real cbi-filter binary: --pipeline,
// --pipeline-file and the filter flags give identical files equal to the
// OpenCV composition; --print-pipeline plans without running; errors name
// the option, stage or file and exit with the policy's codes.
#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/image_io.hpp"
#include "pipeline/opencv.hpp"
#include "reference.hpp"
#include "schedules/registry.hpp"

namespace fs = std::filesystem;
using cbi::test::run_cli;
using cbi::test::TempDir;

namespace {

const std::string kPhoto = cbi::test::samples_dir() + "/butterfly.jpg";
const std::string kPipelines = cbi::test::samples_dir() + "/pipelines";

cv::Mat decoded(const fs::path& p) {
    return cv::imread(p.string(), cv::IMREAD_UNCHANGED);
}

TEST(Cli, ChainTextJsonFileAndFlagsGiveIdenticalOutputsEqualToOpenCV) {
    TempDir dir;
    const auto text = run_cli({kPhoto, "--device", "cpu", "--pipeline", "color:gray | gaussian:5 | sobel:mag", "-o",
                               (dir / "text.png").string()},
                              dir.path());
    ASSERT_EQ(text.code, 0) << text.err;
    const auto json = run_cli(
        {kPhoto, "--device", "cpu", "--pipeline-file", kPipelines + "/edges.json", "-o", (dir / "json.png").string()},
        dir.path());
    ASSERT_EQ(json.code, 0) << json.err;
    const auto flags = run_cli({kPhoto, "--device", "cpu", "--color", "gray", "--gaussian", "5", "--sobel", "mag", "-o",
                                (dir / "flags.png").string()},
                               dir.path());
    ASSERT_EQ(flags.code, 0) << flags.err;
    const cv::Mat a = decoded(dir / "text.png"), b = decoded(dir / "json.png"), c = decoded(dir / "flags.png");
    ASSERT_EQ(a.type(), CV_8UC1);
    EXPECT_EQ(cv::norm(a, b, cv::NORM_INF), 0.0);
    EXPECT_EQ(cv::norm(a, c, cv::NORM_INF), 0.0);
    EXPECT_GT(cv::norm(a, cv::NORM_INF), 0.0);

    // OpenCV composed node by node, each OpenCV call on cbi's previous node
    // (end to end, cbi's +-1 from OpenCV's fixed-point 8-bit Gaussian grows
    // through Sobel's weights: up to 4 on this photo).
    const cv::Mat photo = cbi::read_image(kPhoto);
    const cbi::FilterRun gray{cbi::parse_filter("color:gray"), {}, {}}, smooth{cbi::parse_filter("gaussian:5"), {}, {}},
        edges{cbi::parse_filter("sobel:mag"), {}, {}};
    const auto run = [](const cbi::FilterRun& node, const cv::Mat& src) {
        const cbi::FilterRun chain[] = {node};
        return cbi::as_mat(cbi::run_sequence(chain, cbi::view_of(src), {}).view()).clone();
    };
    const cv::Mat cbi_gray = run(gray, photo), cbi_smooth = run(smooth, cbi_gray);
    EXPECT_LE(cv::norm(cbi_gray, cbi::test::opencv_reference(gray, photo), cv::NORM_INF), 1.0);
    EXPECT_LE(cv::norm(cbi_smooth, cbi::test::opencv_reference(smooth, cbi_gray), cv::NORM_INF), 1.0);
    EXPECT_LE(cv::norm(a, cbi::test::opencv_reference(edges, cbi_smooth), cv::NORM_INF), 1.0);

    cv::Mat cv_gray, cv_smooth, dx, dy, mag;
    cv::cvtColor(photo, cv_gray, cv::COLOR_BGR2GRAY);
    cv::GaussianBlur(cv_gray, cv_smooth, {5, 5}, 0, 0, cv::BORDER_REFLECT_101);
    cv::Sobel(cv_smooth, dx, CV_32F, 1, 0, 3, 1, 0, cv::BORDER_REFLECT_101);
    cv::Sobel(cv_smooth, dy, CV_32F, 0, 1, 3, 1, 0, cv::BORDER_REFLECT_101);
    cv::magnitude(dx, dy, mag);
    mag.convertTo(mag, CV_8U);
    std::cout << "end to end vs OpenCV: gray max diff " << cv::norm(cbi_gray, cv_gray, cv::NORM_INF)
              << ", gaussian max diff " << cv::norm(cbi_smooth, cv_smooth, cv::NORM_INF) << " ("
              << cv::countNonZero(cbi_smooth != cv_smooth) << " px), edges max diff " << cv::norm(a, mag, cv::NORM_INF)
              << " (" << cv::countNonZero(a != mag) << " of " << a.total() << " px)\n";
}

// Every kind is a flag, and --NAME ARGS is the stage NAME:ARGS: for each
// example of each kind (filters/kinds/), the flag and the pipeline text print
// the same plan (the same parsed node, schedule and border), and for each
// kind's first example they write the same file; --list-filters names every
// kind with its form.
TEST(Cli, EveryKindsFlagIsItsPipelineStage) {
    TempDir dir;
    const auto list = run_cli({"--list-filters"}, dir.path());
    ASSERT_EQ(list.code, 0) << list.err;
    int runs = 0;
    cbi::for_each_kind([&]<class F>(std::type_identity<F>) {
        using K = cbi::FilterKind<F>;
        EXPECT_NE(list.out.find(std::string(K::form)), std::string::npos) << K::name;
        bool written = false;
        for (std::string_view args : K::examples) {
            // A kind without arguments (hsv) is a flag without a value, followed here by -o.
            const std::string stage = std::string(K::name) + (args.empty() ? "" : ":" + std::string(args));
            SCOPED_TRACE(stage);
            // The photo is 8-bit BGR: kinds that refuse it (adaptive) are tested on gray images elsewhere.
            if (!cbi::refuses_input(cbi::parse_filter(stage), cbi::Depth::u8, 3).empty()) continue;
            const fs::path flag_out = dir / "flag.png", text_out = dir / "text.png";
            // Plans are compared for every example (cheap); files for the first one the photo takes.
            const std::vector<std::string> tail =
                written ? std::vector<std::string>{"--print-pipeline"} : std::vector<std::string>{};
            std::vector<std::string> flag_args{kPhoto, "--device", "cpu", "--" + std::string(K::name)};
            if (!args.empty()) flag_args.emplace_back(args);
            flag_args.insert(flag_args.end(), {"-o", flag_out.string()});
            flag_args.insert(flag_args.end(), tail.begin(), tail.end());
            std::vector<std::string> text_args{kPhoto, "--device", "cpu", "--pipeline", stage, "-o", text_out.string()};
            text_args.insert(text_args.end(), tail.begin(), tail.end());
            const auto flag = run_cli(flag_args, dir.path());
            ASSERT_EQ(flag.code, 0) << flag.err;
            const auto text = run_cli(text_args, dir.path());
            ASSERT_EQ(text.code, 0) << text.err;
            if (written) {
                EXPECT_NE(flag.out.find("pipeline on cpu"), std::string::npos) << flag.out;
                EXPECT_EQ(flag.out, text.out);
            } else {
                const cv::Mat a = decoded(flag_out), b = decoded(text_out);
                ASSERT_EQ(a.size(), b.size());
                ASSERT_EQ(a.type(), b.type());
                EXPECT_EQ(cv::norm(a, b, cv::NORM_INF), 0.0);
                written = true;
            }
            ++runs;
        }
    });
    EXPECT_GE(runs, static_cast<int>(cbi::filter_kinds().size()));
}

// threshold TYPE otsu: the flag, the pipeline text and a JSON node write
// OpenCV's THRESH_OTSU result on a gray image; a colour image is refused,
// exit 1 in one line, nothing written.
TEST(Cli, OtsuThresholdFlagTextAndJsonEqualOpenCVAndRefuseColour) {
    TempDir dir;
    cv::Mat gray;
    cv::cvtColor(cv::imread(kPhoto, cv::IMREAD_COLOR), gray, cv::COLOR_BGR2GRAY);
    const std::string in = (dir / "gray.png").string();
    ASSERT_TRUE(cv::imwrite(in, gray));
    cv::Mat want, want_inv;
    cv::threshold(gray, want, 0, 255, cv::THRESH_BINARY | cv::THRESH_OTSU);
    cv::threshold(gray, want_inv, 0, 200, cv::THRESH_BINARY_INV | cv::THRESH_OTSU);
    std::ofstream(dir / "otsu.json") << R"({"nodes": [{"name": "t", "filter": "threshold:0:200:otsu_inv", )"
                                     << R"("input": "input"}], "outputs": ["t"]})";
    const struct {
        std::vector<std::string> args;
        const cv::Mat* want;
    } runs[] = {{{"--threshold", "0:255:otsu"}, &want},
                {{"--pipeline", "threshold:0:255:otsu"}, &want},
                {{"--pipeline", "threshold:0:255:otsu@tile:32x8"}, &want},
                {{"--pipeline-file", (dir / "otsu.json").string()}, &want_inv}};
    for (const auto& r : runs) {
        SCOPED_TRACE(r.args.back());
        const fs::path out = dir / "out.png";
        std::vector<std::string> args{in, "--device", "cpu", "-o", out.string()};
        args.insert(args.end(), r.args.begin(), r.args.end());
        const auto result = run_cli(args, dir.path());
        ASSERT_EQ(result.code, 0) << result.err;
        const cv::Mat got = decoded(out);
        ASSERT_EQ(got.type(), CV_8UC1);
        EXPECT_EQ(cv::countNonZero(got != *r.want), 0);
        fs::remove(out);
    }
    const fs::path out = dir / "colour.png";
    const auto refused =
        run_cli({kPhoto, "--device", "cpu", "--threshold", "0:255:otsu", "-o", out.string()}, dir.path());
    EXPECT_EQ(refused.code, 1) << refused.err;
    EXPECT_NE(refused.err.find("needs an 8-bit 1-channel image"), std::string::npos) << refused.err;
    EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
    EXPECT_FALSE(fs::exists(out));
    // After color:gray it runs on the photo.
    const auto chained = run_cli(
        {kPhoto, "--device", "cpu", "--pipeline", "color:gray | threshold:0:255:otsu", "-o", out.string()}, dir.path());
    EXPECT_EQ(chained.code, 0) << chained.err;
}

// --NAME @FILE reads the value from a file: rows a line each (numpy.savetxt's
// spaces, a CSV's commas, '#' comments), for kernels longer than a command
// line takes. A 101x101 kernel of full rank equals cv::filter2D; a missing
// file is exit 1 naming it, a ragged one exit 2 naming the flag; no output.
TEST(Cli, FlagValuesFromAFileGiveKernelsOfAnySize) {
    TempDir dir;
    cv::Mat kernel(101, 101, CV_32F);
    cv::RNG rng(7);
    rng.fill(kernel, cv::RNG::UNIFORM, -1.0, 1.0);
    kernel /= cv::sum(kernel)[0];
    {
        std::ofstream txt(dir / "k.txt");
        txt << "# a 101x101 kernel, as numpy.savetxt writes one\n";
        for (int r = 0; r < kernel.rows; ++r) {
            for (int c = 0; c < kernel.cols; ++c) txt << (c ? (c % 2 ? " " : ", ") : "") << kernel.at<float>(r, c);
            txt << "\n\n";
        }
    }
    const cv::Mat photo = cv::imread(kPhoto, cv::IMREAD_COLOR);
    cv::Mat want;
    const fs::path out = dir / "out.png";
    const auto run = run_cli(
        {kPhoto, "--device", "cpu", "--filter2d", "@" + (dir / "k.txt").string(), "-o", out.string()}, dir.path());
    ASSERT_EQ(run.code, 0) << run.err;
    // The text form of the taps as the file wrote them (6 digits), as the CLI read them.
    std::ifstream back(dir / "k.txt");
    std::string line;
    std::getline(back, line);
    for (int r = 0; r < kernel.rows; ++r)
        for (int c = 0; c < kernel.cols; ++c) back >> kernel.at<float>(r, c), back.ignore(1, ',');
    cv::filter2D(photo, want, -1, kernel, {-1, -1}, 0, cv::BORDER_REFLECT_101);
    EXPECT_EQ(cv::norm(decoded(out), want, cv::NORM_INF), 0);
    fs::remove(out);

    std::ofstream(dir / "ragged.txt") << "1 2 3\n4 5\n";
    const std::string missing = (dir / "missing.txt").string(), ragged = (dir / "ragged.txt").string();
    const struct {
        std::string value;
        int code;
        std::string says;
    } bad[] = {{"@" + missing, 1, missing + ": cannot open the file of --filter2d @" + missing},
               {"@" + ragged, 2, "--filter2d @" + ragged + ": filter2d row 2 has 2 taps"}};
    for (const auto& b : bad) {
        const auto r = run_cli({kPhoto, "--device", "cpu", "--filter2d", b.value, "-o", out.string()}, dir.path());
        EXPECT_EQ(r.code, b.code) << r.err;
        EXPECT_NE(r.err.find(b.says), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_FALSE(fs::exists(out));
    }
}

// On the CPU --fuse-stencils runs the chain through line buffers (one
// kernel, nothing intermediate stored): the same file as --no-fuse.
TEST(Cli, FuseStencilsOnTheCpuWritesTheSameFileThroughLineBuffers) {
    TempDir dir;
    const std::vector<std::string> chain{kPhoto, "--device", "cpu", "--pipeline",
                                         "color:gray | gaussian:5 | sobel:mag"};
    auto with = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = chain;
        args.insert(args.end(), extra.begin(), extra.end());
        return run_cli(args, dir.path());
    };
    const auto plan = with({"--fuse-stencils", "--print-pipeline"});
    ASSERT_EQ(plan.code, 0) << plan.err;
    EXPECT_NE(plan.out.find("(fused: computes n2 through line buffers, reading input through color:gray)"),
              std::string::npos)
        << plan.out;
    EXPECT_NE(plan.out.find("1 kernel runs"), std::string::npos) << plan.out;
    const auto fused = with({"--fuse-stencils", "-o", (dir / "fused.png").string()});
    ASSERT_EQ(fused.code, 0) << fused.err;
    const auto apart = with({"--no-fuse", "-o", (dir / "apart.png").string()});
    ASSERT_EQ(apart.code, 0) << apart.err;
    const cv::Mat a = decoded(dir / "fused.png"), b = decoded(dir / "apart.png");
    ASSERT_FALSE(a.empty());
    EXPECT_EQ(cv::norm(a, b, cv::NORM_INF), 0.0);
}

// --stats on one image: each step's seconds on stdout, the output as without it.
TEST(Cli, StatsForOneImagePrintTheStepsAndWriteTheSameOutput) {
    TempDir dir;
    const auto plain =
        run_cli({kPhoto, "--device", "cpu", "--blur", "5", "-o", (dir / "plain.png").string()}, dir.path());
    ASSERT_EQ(plain.code, 0) << plain.err;
    const auto stats =
        run_cli({kPhoto, "--device", "cpu", "--blur", "5", "--stats", "-o", (dir / "stats.png").string()}, dir.path());
    ASSERT_EQ(stats.code, 0) << stats.err;
    EXPECT_TRUE(plain.out.empty()) << plain.out;
    for (const char* step :
         {"before main", "options", "read+check", "decode", "device wait", "run", "encode+write", "main to here"})
        EXPECT_NE(stats.out.find(std::string("\n") + step + " "), std::string::npos) << step << " in:\n" << stats.out;
    EXPECT_EQ(cbi::test::slurp(dir / "plain.png"), cbi::test::slurp(dir / "stats.png"));
}

// --laplacian K, the pipeline stage laplacian:K and a JSON node give the
// same file, within 1 of |cv::Laplacian| on the photo, for every KSIZE; a
// bad KSIZE is a usage error, a schedule that cannot take KSIZE 1 exit 1.
TEST(Cli, LaplacianFlagTextAndJsonGiveIdenticalOutputsEqualToOpenCV) {
    TempDir dir;
    const cv::Mat photo = cbi::read_image(kPhoto);
    for (const char* k : {"1", "3", "5", "7"}) {
        SCOPED_TRACE(k);
        const std::string stage = std::string("laplacian:") + k;
        std::ofstream(dir / "lap.json") << R"({"nodes": [{"name": "lap", "filter": ")" << stage
                                        << R"(", "input": "input"}], "outputs": ["lap"]})";
        const auto flags =
            run_cli({kPhoto, "--device", "cpu", "--laplacian", k, "-o", (dir / "flags.png").string()}, dir.path());
        ASSERT_EQ(flags.code, 0) << flags.err;
        const auto text =
            run_cli({kPhoto, "--device", "cpu", "--pipeline", stage, "-o", (dir / "text.png").string()}, dir.path());
        ASSERT_EQ(text.code, 0) << text.err;
        const auto json = run_cli({kPhoto, "--device", "cpu", "--pipeline-file", (dir / "lap.json").string(), "-o",
                                   (dir / "json.png").string()},
                                  dir.path());
        ASSERT_EQ(json.code, 0) << json.err;
        const cv::Mat a = decoded(dir / "flags.png"), b = decoded(dir / "text.png"), c = decoded(dir / "json.png");
        ASSERT_EQ(a.type(), photo.type());
        EXPECT_EQ(cv::norm(a, b, cv::NORM_INF), 0.0);
        EXPECT_EQ(cv::norm(a, c, cv::NORM_INF), 0.0);
        EXPECT_GT(cv::norm(a, cv::NORM_INF), 0.0);
        cv::Mat lap, want;
        cv::Laplacian(photo, lap, CV_32F, std::stoi(k), 1, 0, cv::BORDER_REFLECT_101);
        cv::Mat(cv::abs(lap)).convertTo(want, CV_8U);
        EXPECT_LE(cv::norm(a, want, cv::NORM_INF), 1.0);
    }
    const std::string out = (dir / "out.png").string();
    const auto bad = run_cli({kPhoto, "--device", "cpu", "--laplacian", "4", "-o", out}, dir.path());
    EXPECT_EQ(bad.code, 2) << bad.err;
    EXPECT_NE(bad.err.find("--laplacian 4: laplacian ksize '4' must be 1, 3, 5 or 7"), std::string::npos) << bad.err;
    const auto cross =
        run_cli({kPhoto, "--device", "cpu", "--laplacian", "1", "--schedule", "stream:64x16", "-o", out}, dir.path());
    EXPECT_EQ(cross.code, 1) << cross.err;
    EXPECT_NE(cross.err.find("schedule stream:64x16 runs stencils up to 9x9"), std::string::npos) << cross.err;
    EXPECT_FALSE(fs::exists(out));
}

// The first acceptance check: the photo blurred through the CLI equals
// cv::blur (within 1) for every registered schedule.
TEST(Cli, Blur9OnAPhotoEqualsOpenCVForEveryRegisteredSchedule) {
    TempDir dir;
    const cv::Mat photo = cbi::read_image(kPhoto);
    cv::Mat want;
    cv::blur(photo, want, {9, 9}, {-1, -1}, cv::BORDER_REFLECT_101);
    for (const cbi::ScheduleSpec& s : cbi::example_schedules()) {
        SCOPED_TRACE(s.to_string());
        const fs::path out = dir / "out.png";
        fs::remove(out);
        const auto r = run_cli(
            {kPhoto, "--device", "cpu", "--blur", "9", "--schedule", s.to_string(), "-o", out.string()}, dir.path());
        if (!cbi::supports(s, cbi::parse_filter("blur:9"))) {  // vec:N: refused, the reason named, nothing written
            EXPECT_EQ(r.code, 1);  // cbi::Unsupported: well formed, this schedule cannot run it
            EXPECT_NE(
                r.err.find("cbi-filter: error: --schedule: schedule " + s.to_string() + " runs pointwise filters only"),
                std::string::npos)
                << r.err;
            EXPECT_FALSE(fs::exists(out));
            continue;
        }
        ASSERT_EQ(r.code, 0) << r.err;
        EXPECT_LE(cv::norm(decoded(out), want, cv::NORM_INF), 1.0);
    }
}

TEST(Cli, PrintPipelineShowsNodesSchedulesAndBufferReuseWithoutRunning) {
    TempDir dir;
    const auto r = run_cli({kPhoto, "--device", "cpu", "--pipeline-file", kPipelines + "/dog.json", "--print-pipeline",
                            "-o", (dir / "never.png").string()},
                           dir.path());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("input 493x356 3-channel 8u"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("coarse  gaussian:9:2      @zigzag:16"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("<- gray, coarse  -> buffer 1 (1 ch)  [output 1]"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("5 kernels run, 4 buffers"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(dir / "never.png"));
    // Without an input: the graph only.
    const auto bare = run_cli({"--device", "cpu", "--pipeline", "blur:3@column:32", "--print-pipeline"}, dir.path());
    ASSERT_EQ(bare.code, 0) << bare.err;
    EXPECT_NE(bare.out.find("n1     blur:3    @column:32"), std::string::npos) << bare.out;
}

TEST(Cli, SeveralOutputsAreWrittenBesideTheFirst) {
    TempDir dir;
    const auto r = run_cli(
        {kPhoto, "--device", "cpu", "--pipeline-file", kPipelines + "/dog.json", "-o", (dir / "out.png").string()},
        dir.path());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(decoded(dir / "out.png").type(), CV_8UC1);
    EXPECT_EQ(decoded(dir / "out.sharp.png").type(), CV_8UC1);
}

TEST(Cli, StencilOnlyDefaultScheduleLeavesPointwiseNodesOnNaive) {
    TempDir dir;
    const auto smem = run_cli({kPhoto, "--device", "cpu", "--schedule", "smem:32x8", "--color", "gray", "--blur", "3",
                               "-o", (dir / "smem.png").string()},
                              dir.path());
    ASSERT_EQ(smem.code, 0) << smem.err;
    const auto naive = run_cli(
        {kPhoto, "--device", "cpu", "--color", "gray", "--blur", "3", "-o", (dir / "naive.png").string()}, dir.path());
    ASSERT_EQ(naive.code, 0) << naive.err;
    EXPECT_EQ(cv::norm(decoded(dir / "smem.png"), decoded(dir / "naive.png"), cv::NORM_INF), 0.0);
}

struct BadCase {
    std::vector<std::string> args;
    int code;
    std::string message;  // a part of the one-line error
};

TEST(Cli, PipelineErrorsNameTheOptionStageOrFile) {
    TempDir dir;
    const std::string out = (dir / "out.png").string();
    {
        std::ofstream(dir / "bad.json")
            << R"({"nodes": [{"name": "a", "filter": "blur:3", "input": "input", "colour": 1}], "outputs": ["a"]})";
        std::ofstream(dir / "cycle.json") << R"({"nodes": [{"name": "a", "filter": "blur:3", "input": "b"},
            {"name": "b", "filter": "blur:3", "input": "a"}], "outputs": ["a"]})";
        std::ofstream(dir / "unsupported.json") << R"({"nodes": [{"name": "g", "filter": "gaussian:5", "input": "input",
            "schedule": "vec:4"}], "outputs": ["g"]})";
        std::ofstream(dir / "mismatch.json") << R"({"nodes": [{"name": "g", "filter": "color:gray", "input": "input"},
            {"name": "mix", "blend": "blend:1:1:0", "inputs": ["input", "g"]}], "outputs": ["mix"]})";
    }
    const BadCase cases[] = {
        {{"--pipeline", "blur:9 | gray"}, 2, "--pipeline: stage 2 'gray' (column 10)"},
        {{"--pipeline", ""}, 2, "stage 1 '' (column 1): empty stage"},
        {{"--pipeline-file", dir.path().string()}, 1, "the pipeline file is not a regular file"},
        {{"--pipeline", "blur:9 || blur:3"}, 2, "stage 2 '' (column 9): empty stage"},
        {{"--pipeline", "color:gray@smem:32x8"},
         1,
         "--pipeline: stage 1 'color:gray@smem:32x8' (column 1): node 'n1': "
         "schedule smem:32x8 runs stencil filters only"},
        {{"--pipeline-file", (dir / "unsupported.json").string()},
         1,
         "unsupported.json: node 'g': schedule vec:4 runs "
         "pointwise filters only"},
        {{"--pipeline", "blur:257@smem:32x8"}, 2, "stage 1 'blur:257@smem:32x8' (column 1): blur kernel size '257'"},
        {{"--pipeline", "blur:9@column:0"}, 2, "column:0"},
        {{"--pipeline", "blur:9", "--blur", "3"}, 2, "give one of --pipeline, --pipeline-file or filter flags"},
        {{"--pipeline-file", (dir / "missing.json").string()}, 1, "missing.json: cannot open the pipeline file"},
        {{"--pipeline-file", (dir / "bad.json").string()}, 2, "node 'a': unknown field \"colour\""},
        {{"--pipeline-file", (dir / "cycle.json").string()}, 2, "is part of a cycle"},
        {{"--pipeline-file", (dir / "mismatch.json").string()},
         1,
         "node 'mix': blend inputs 'input' and 'g' have 3 and 1 channels"},
        {{"--pipeline", "blur:3", "--schedule", "warp"}, 2, "--schedule"},
    };
    for (const BadCase& c : cases) {
        std::vector<std::string> args{kPhoto, "--device", "cpu", "-o", out};
        args.insert(args.end(), c.args.begin(), c.args.end());
        const auto r = run_cli(args, dir.path());
        SCOPED_TRACE(c.args.back());
        EXPECT_EQ(r.code, c.code) << r.err;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;  // one line
        EXPECT_FALSE(fs::exists(out));
    }
}

// The same schedule text is a usage error where it is malformed and exit 1
// (cbi::Unsupported) where it is well formed but cannot run the node: the
// message names the limit and the schedules that can.
TEST(Cli, AScheduleThatCannotRunTheNodeIsExit1AMalformedOneExit2) {
    TempDir dir;
    const std::string out = (dir / "out.png").string();
    const auto unsupported =
        run_cli({kPhoto, "--device", "cpu", "--blur", "11", "--schedule", "stream:64x64", "-o", out}, dir.path());
    EXPECT_EQ(unsupported.code, 1) << unsupported.err;
    EXPECT_EQ(unsupported.err.rfind("cbi-filter: error: --schedule: schedule stream:64x64 runs stencils up to 9x9", 0),
              0u)
        << unsupported.err;
    EXPECT_NE(unsupported.err.find("; use naive"), std::string::npos) << unsupported.err;
    const auto malformed =
        run_cli({kPhoto, "--device", "cpu", "--blur", "11", "--schedule", "stream:64", "-o", out}, dir.path());
    EXPECT_EQ(malformed.code, 2) << malformed.err;
    EXPECT_EQ(malformed.err.rfind("cbi-filter: error: --schedule: ", 0), 0u) << malformed.err;
    EXPECT_FALSE(fs::exists(out));
}

// Whatever libpng, OpenCV or TBB print, an error is one line; the
// chatter exists (CBI_LIBRARY_STDERR=1 shows it) but never reaches the user.
TEST(Cli, LibraryChatterNeverReachesStderr) {
    TempDir dir;
    std::vector<std::uint8_t> png;
    ASSERT_TRUE(cv::imencode(".png", cbi::test::random_image(64, 48, 3, cbi::Depth::u8, 1), png));
    // Cut the IDAT chunk's data to a third, keeping its length field right
    // (its CRC is then wrong): libpng reports it on stderr by itself.
    std::size_t at = 8;
    while (std::string(png.begin() + at + 4, png.begin() + at + 8) != "IDAT")
        at += 12 + (png[at] << 24 | png[at + 1] << 16 | png[at + 2] << 8 | png[at + 3]);
    const std::uint32_t len = png[at] << 24 | png[at + 1] << 16 | png[at + 2] << 8 | png[at + 3], cut = len / 3;
    std::vector<std::uint8_t> bad(png.begin(), png.begin() + at);
    for (int shift : {24, 16, 8, 0}) bad.push_back(static_cast<std::uint8_t>(cut >> shift));
    bad.insert(bad.end(), png.begin() + at + 4, png.begin() + at + 8 + cut + 4);
    bad.insert(bad.end(), png.begin() + at + 12 + len, png.end());
    const fs::path img = dir / "cut.png";
    std::ofstream(img, std::ios::binary)
        .write(reinterpret_cast<const char*>(bad.data()), static_cast<std::streamsize>(bad.size()));
    const std::vector<std::string> args{
        img.string(), "--blur", "3", "--device", "cpu", "-o", (dir / "out.png").string()};

    const auto r = run_cli(args, dir.path());
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err, "cbi-filter: error: " + img.string() + ": corrupt or unsupported image data (PNG)\n");
    ::setenv("CBI_LIBRARY_STDERR", "1", 1);
    const auto chatty = run_cli(args, dir.path());
    ::unsetenv("CBI_LIBRARY_STDERR");
    EXPECT_NE(chatty.err.find("libpng"), std::string::npos) << chatty.err;  // the test tests something

    // A batch asking for more workers than the cores: no TBB warning.
    fs::create_directories(dir / "in");
    fs::copy_file(kPhoto, dir / "in/a.jpg");
    const auto b = run_cli({"--input-dir", (dir / "in").string(), "--output-dir", (dir / "out").string(), "--blur", "3",
                            "--device", "cpu", "--jobs", "64"},
                           dir.path());
    EXPECT_EQ(b.code, 0) << b.err;
    EXPECT_EQ(std::count(b.err.begin(), b.err.end(), '\n'), 1) << b.err;  // the summary
    EXPECT_TRUE(b.err.starts_with("cbi-filter: 1 files: 1 processed")) << b.err;
}

TEST(Cli, MaxMemoryAndDeviceErrorsHaveTheirExitCodes) {
    TempDir dir;
    const std::string out = (dir / "out.png").string();
    // butterfly.jpg: 493x356 RGB, 526,524 bytes decoded.
    const BadCase cases[] = {
        {{"--max-memory", "500kB"}, 1, "= 526524 bytes decoded, larger than --max-memory 500000"},
        {{"--max-memory", "1.5GB"}, 2, "--max-memory"},
        {{"--max-memory", "0"}, 2, "--max-memory"},
    };
    for (const BadCase& c : cases) {
        std::vector<std::string> args{kPhoto, "--blur", "3", "--device", "cpu", "-o", out};
        args.insert(args.end(), c.args.begin(), c.args.end());
        const auto r = run_cli(args, dir.path());
        SCOPED_TRACE(c.args.back());
        EXPECT_EQ(r.code, c.code) << r.err;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_FALSE(fs::exists(out));
    }
    const auto ok = run_cli({kPhoto, "--blur", "3", "--device", "cpu", "-o", out, "--max-memory", "1MiB"}, dir.path());
    EXPECT_EQ(ok.code, 0) << ok.err;
    // --device cuda where there is none: a runtime error (the command is right, the machine lacks the device).
    if (!cbi::resolve_device(cbi::parse_device("auto")).cuda) {
        const auto r = run_cli({kPhoto, "--blur", "3", "--device", "cuda", "-o", (dir / "c.png").string()}, dir.path());
        EXPECT_EQ(r.code, 1) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_TRUE(r.err.starts_with("cbi-filter: error: --device cuda: ")) << r.err;
    }
}

}  // namespace
