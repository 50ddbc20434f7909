// Batch mode: a folder tree of good and bad files through the
// library and the real cbi-filter binary; outputs compared pixel-wise with
// the single-image path; SIGKILL mid-run and resume; a full disk.
#include "pipeline/batch.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "cli.hpp"
#include "filters/filter.hpp"
#include "pipeline/error.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/opencv.hpp"
#include "reference.hpp"

namespace fs = std::filesystem;
using cbi::test::ChildSetup;
using cbi::test::CliResult;
using cbi::test::random_image;
using cbi::test::run_cli;
using cbi::test::slurp;
using cbi::test::spawn_cli;
using cbi::test::TempDir;
using cbi::test::wait_code;

namespace {

void write_bytes(const fs::path& p, const std::vector<std::uint8_t>& bytes) {
    fs::create_directories(p.parent_path());
    std::ofstream f(p, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::uint8_t> encode(const std::string& ext, const cv::Mat& m) {
    std::vector<std::uint8_t> buf;
    if (!cv::imencode(ext, m, buf)) throw std::runtime_error("imencode " + ext + " failed");
    return buf;
}

// Smooth content, so JPEG inputs are realistic.
cv::Mat smooth_image(int w, int h, unsigned seed) {
    cv::Mat m(h, w, CV_8UC3);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            m.at<cv::Vec3b>(y, x) = cv::Vec3b((x * 5 + seed) % 256, (y * 3 + seed) % 256, (x + y + seed) % 256);
    return m;
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

std::vector<cbi::FilterRun> blur_chain(int k) {
    return {{cbi::BoxFilter{k}, {}, {}}};
}

cbi::RunOptions cpu_options() {
    cbi::RunOptions o;
    o.device = cbi::resolve_device(cbi::parse_device("cpu"));
    return o;
}

// Regular files under `root` (relative, sorted); temporaries listed too.
std::vector<std::string> files_under(const fs::path& root) {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(root))
        if (e.is_regular_file()) out.push_back(fs::relative(e.path(), root).generic_string());
    std::sort(out.begin(), out.end());
    return out;
}

bool is_temporary(const fs::path& p) {
    return cbi::is_temporary_name(p.filename().string());
}

// Spawns the batch, waits until `outputs` complete files exist under `out`,
// sends `sig`; returns the exit code (128 + signal when killed by it).
int interrupt_batch(const std::vector<std::string>& args, const fs::path& out, std::size_t outputs, int sig,
                    const fs::path& scratch) {
    const pid_t pid = spawn_cli(args, scratch / "out.txt", scratch / "err.txt");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    const auto complete = [&] {
        std::size_t n = 0;
        std::error_code ec;
        for (auto it = fs::recursive_directory_iterator(out, ec); !ec && it != fs::recursive_directory_iterator();
             it.increment(ec))
            n += it->is_regular_file(ec) && !is_temporary(it->path());
        return n;
    };
    while (complete() < outputs && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ::kill(pid, sig);
    return wait_code(pid);
}

// The single-image path: decode `input`, run_sequence on the CPU, encode to
// `output`'s format. Expects the decoded `output` to equal it exactly
// (lossy JPEG too: the same encoder on the same pixels).
void expect_matches_single_image(const fs::path& input, const fs::path& output,
                                 const std::vector<cbi::FilterRun>& nodes, const fs::path& scratch) {
    SCOPED_TRACE(output.string());
    const cv::Mat in = cbi::read_image(input);
    const cbi::Image ref = cbi::run_sequence(nodes, cbi::view_of(in), cpu_options());
    const fs::path ref_file = scratch / ("ref" + output.extension().string());
    cbi::write_image_atomic(ref_file, cbi::as_mat(ref.view()));
    const cv::Mat want = cbi::read_image(ref_file), got = cbi::read_image(output);
    ASSERT_EQ(got.type(), want.type());
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(cv::norm(got, want, cv::NORM_INF), 0.0);
    EXPECT_GT(cv::norm(got, cv::NORM_INF), 0.0);  // an all-zero output never passes
}

// The test tree: good images of several formats and depths in sub-folders,
// and the bad files (the unreadable one has its own test).
struct Tree {
    std::vector<std::string> good;  // relative paths
    std::vector<std::string> bad;
};
Tree make_tree(const fs::path& in) {
    write_bytes(in / "a.png", encode(".png", random_image(37, 23, 3, cbi::Depth::u8, 1)));
    write_bytes(in / "e.png", encode(".png", random_image(13, 11, 4, cbi::Depth::u8, 2)));
    write_bytes(in / "sub/b16.png", encode(".png", random_image(31, 17, 1, cbi::Depth::u16, 3)));
    write_bytes(in / "sub/deep/c.jpg", encode(".jpg", smooth_image(40, 30, 4)));
    cv::Mat f = random_image(19, 21, 3, cbi::Depth::f32, 5);
    cbi::write_image_atomic(in / "sub/d.tiff", f);

    write_bytes(in / "zero.png", {});
    std::vector<std::uint8_t> noise(2048);
    std::mt19937 rng(42);
    for (auto& b : noise) b = static_cast<std::uint8_t>(rng());
    noise[0] = 0;  // no real signature by chance
    write_bytes(in / "random.png", noise);
    auto png = encode(".png", random_image(64, 64, 3, cbi::Depth::u8, 6));
    png.resize(png.size() / 2);
    write_bytes(in / "sub/trunc.png", png);
    auto jpg = encode(".jpg", smooth_image(64, 64, 7));
    jpg.resize(jpg.size() * 2 / 3);
    write_bytes(in / "sub/deep/trunc.jpg", jpg);
    write_bytes(in / "text.jpg", {'h', 'e', 'l', 'l', 'o', '\n'});
    fs::create_directories(in / "x.png");
    fs::create_symlink(in / "nowhere.jpg", in / "sub/dangling.jpg");
    // Never inputs: not an image name, and a killed run's temporary.
    write_bytes(in / "notes.txt", {'n'});
    write_bytes(in / ".cbi-tmp-AbC123", {'t'});
    return {{"a.png", "e.png", "sub/b16.png", "sub/d.tiff", "sub/deep/c.jpg"},
            {"random.png", "sub/dangling.jpg", "sub/deep/trunc.jpg", "sub/trunc.png", "text.jpg", "x.png", "zero.png"}};
}

// ------------------------------------------------------------ the real CLI

std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream s(text);
    for (std::string l; std::getline(s, l);) out.push_back(l);
    return out;
}

bool contains_line(const std::string& text, const std::string& line) {
    const auto all = lines(text);
    return std::find(all.begin(), all.end(), line) != all.end();
}

// ------------------------------------------------------------ library

TEST(Batch, FolderTreeGoodAndBadFiles) {
    TempDir dir, scratch;
    const fs::path in = dir / "in", out = dir / "out", out_serial = dir / "out-serial";
    const Tree tree = make_tree(in);

    cbi::FolderOptions fo;
    fo.input_dir = in;
    fo.output_dir = out;
    fo.recursive = true;
    const cbi::BatchPlan plan = cbi::plan_folder(fo);
    ASSERT_EQ(plan.jobs.size(), tree.good.size() + tree.bad.size());
    EXPECT_TRUE(plan.rejected.empty());
    // Deterministic order: sorted by relative path, outputs mirrored.
    EXPECT_EQ(plan.jobs.front().input, in / "a.png");
    EXPECT_EQ(plan.jobs.front().output, out / "a.png");

    const auto nodes = blur_chain(3);
    std::atomic<int> inside{0};
    std::size_t calls = 0, last_done = 0;
    bool concurrent = false, monotonic = true;
    cbi::BatchOptions bo;
    bo.jobs = 2;
    bo.in_flight = 3;
    bo.on_progress = [&](const cbi::BatchProgress& p) {
        concurrent |= inside.fetch_add(1) != 0;
        ++calls;
        monotonic &= p.done == last_done + 1 && p.total == plan.jobs.size();
        last_done = p.done;
        inside.fetch_sub(1);
    };
    const cbi::BatchSummary s =
        cbi::run_batch(plan, cbi::graph_processor_factory(cbi::sequence_graph(nodes), cpu_options()), bo);
    EXPECT_EQ(s.processed, tree.good.size());
    EXPECT_EQ(s.failed, tree.bad.size());
    EXPECT_EQ(s.skipped, 0u);
    EXPECT_EQ(s.in_flight, 3);
    EXPECT_EQ(calls, plan.jobs.size());
    EXPECT_FALSE(concurrent);
    EXPECT_TRUE(monotonic);

    // Each failure carries the single-image path's one-line reason.
    std::set<std::string> failed;
    for (const cbi::BatchItem& item : s.items) {
        if (item.status != cbi::ItemStatus::failed) continue;
        failed.insert(fs::relative(item.input, in).generic_string());
        EXPECT_EQ(item.error, error_of([&] { cbi::read_image(item.input); }));
        EXPECT_EQ(item.error.find('\n'), std::string::npos);
    }
    EXPECT_EQ(failed, std::set<std::string>(tree.bad.begin(), tree.bad.end()));
    const auto error_for = [&](const std::string& rel) {
        for (const auto& item : s.items)
            if (item.input == in / rel) return item.error;
        return std::string();
    };
    EXPECT_EQ(error_for("zero.png"), (in / "zero.png").string() + ": empty file (0 bytes)");
    EXPECT_EQ(error_for("x.png"), (in / "x.png").string() + ": is a directory, not an image file");
    EXPECT_EQ(error_for("sub/dangling.jpg"),
              (in / "sub/dangling.jpg").string() + ": dangling symbolic link (its target does not exist)");
    EXPECT_NE(error_for("sub/trunc.png").find("truncated"), std::string::npos) << error_for("sub/trunc.png");
    EXPECT_NE(error_for("sub/deep/trunc.jpg").find("truncated"), std::string::npos) << error_for("sub/deep/trunc.jpg");
    EXPECT_NE(error_for("text.jpg").find("not a recognized image format"), std::string::npos);
    EXPECT_NE(error_for("random.png").find("not a recognized image format"), std::string::npos);

    // Exactly the good files, mirrored; no temporaries; pixel-exact.
    EXPECT_EQ(files_under(out), tree.good);
    for (const std::string& rel : tree.good) expect_matches_single_image(in / rel, out / rel, nodes, scratch.path());

    // Stage times: every processed item spent time in every stage.
    ASSERT_EQ(s.stages.size(), 3u);
    for (const auto& st : s.stages) {
        EXPECT_GT(st.busy_s, 0.0) << st.name;
        EXPECT_EQ(st.lanes, 2) << st.name;
    }
    EXPECT_GT(s.wall_s, 0.0);
    EXPECT_NEAR(s.images_per_s(), s.processed / s.wall_s, 1e-9);

    // --no-overlap: the same stages one image at a time, the same files.
    fo.output_dir = out_serial;
    bo.overlap = false;
    bo.on_progress = nullptr;
    const cbi::BatchSummary serial = cbi::run_batch(
        cbi::plan_folder(fo), cbi::graph_processor_factory(cbi::sequence_graph(nodes), cpu_options()), bo);
    EXPECT_EQ(serial.in_flight, 1);
    EXPECT_EQ(serial.stages[0].lanes, 1);
    EXPECT_EQ(serial.processed, s.processed);
    EXPECT_EQ(serial.failed, s.failed);
    ASSERT_EQ(files_under(out_serial), tree.good);
    for (const std::string& rel : tree.good) EXPECT_EQ(slurp(out_serial / rel), slurp(out / rel)) << rel;
}

TEST(Batch, ProcessorErrorsAreResults) {
    // input + sepia(input): sepia of a 1-channel image has 3 channels, so the
    // blend fails for the 1-channel file in the process stage; the others
    // complete.
    TempDir dir;
    write_bytes(dir / "in/a.png", encode(".png", random_image(9, 8, 3, cbi::Depth::u8, 1)));
    write_bytes(dir / "in/b.png", encode(".png", random_image(9, 8, 1, cbi::Depth::u8, 2)));
    write_bytes(dir / "in/c.png", encode(".png", random_image(9, 8, 4, cbi::Depth::u8, 3)));
    cbi::FolderOptions fo;
    fo.input_dir = dir / "in";
    fo.output_dir = dir / "out";
    cbi::Graph graph;
    const cbi::NodeId sepia =
        graph.add_filter("sepia", cbi::FilterKind<cbi::ColorFilter>::parse("sepia"), cbi::Graph::input());
    graph.add_output(graph.add_blend("mix", cbi::BlendFilter{0.5, 0.5, 0}, cbi::Graph::input(), sepia));
    const auto s = cbi::run_batch(cbi::plan_folder(fo), cbi::graph_processor_factory(graph, cpu_options()), {});
    EXPECT_EQ(s.processed, 2u);
    ASSERT_EQ(s.failed, 1u);
    // The graph's own reason, named after the file.
    const std::string reason = error_of(
        [&] { cbi::GraphExecutor(graph, cpu_options()).run(cbi::view_of(cbi::read_image(dir / "in/b.png"))); });
    EXPECT_NE(reason.find("channels"), std::string::npos) << reason;
    EXPECT_EQ(s.items[1].error, (dir / "in/b.png").string() + ": " + reason);
    EXPECT_GT(s.items[1].process_s, 0.0);
    EXPECT_EQ(files_under(dir / "out"), (std::vector<std::string>{"a.png", "c.png"}));
    EXPECT_EQ(cbi::read_image(dir / "out/c.png").channels(), 4);
}

TEST(Batch, OutputFormatsAndNameClashes) {
    TempDir dir;
    write_bytes(dir / "in/a.png", encode(".png", random_image(9, 8, 3, cbi::Depth::u8, 1)));
    write_bytes(dir / "in/a.jpg", encode(".jpg", smooth_image(9, 8, 2)));
    cbi::write_image_atomic(dir / "in/f.tiff", random_image(5, 4, 1, cbi::Depth::f32, 3));
    cbi::FolderOptions fo;
    fo.input_dir = dir / "in";
    fo.output_dir = dir / "out";
    fo.format = cbi::parse_output_format("png");
    const cbi::BatchPlan plan = cbi::plan_folder(fo);
    // a.jpg sorts first and claims out/a.png; a.png is refused, not overwritten.
    ASSERT_EQ(plan.rejected.size(), 1u);
    EXPECT_EQ(plan.rejected[0].error, (dir / "in/a.png").string() + ": its output " + (dir / "out/a.png").string() +
                                          " is also the output of " + (dir / "in/a.jpg").string() +
                                          " (choose another output format)");
    const auto s =
        cbi::run_batch(plan, cbi::graph_processor_factory(cbi::sequence_graph(blur_chain(3)), cpu_options()), {});
    EXPECT_EQ(s.processed, 1u);
    EXPECT_EQ(s.failed, 2u);
    EXPECT_EQ(s.items.size(), 3u);
    const std::string reason = error_of([&] { cbi::check_output_format(dir / "out/f.png", CV_32FC1); });
    EXPECT_TRUE(reason.starts_with((dir / "out/f.png").string() + ": PNG cannot store 32-bit float images")) << reason;
    EXPECT_EQ(s.items[2].error, reason);
    EXPECT_EQ(files_under(dir / "out"), std::vector<std::string>{"a.png"});
    EXPECT_THROW(cbi::parse_output_format("bmp"), std::invalid_argument);
}

TEST(Batch, OutputFolderRulesAndInPlace) {
    TempDir dir;
    const fs::path in = dir / "in";
    write_bytes(in / "a.png", encode(".png", random_image(9, 8, 3, cbi::Depth::u8, 1)));
    write_bytes(in / "s/b.png", encode(".png", random_image(9, 8, 3, cbi::Depth::u8, 2)));
    fs::create_directory_symlink(in, dir / "alias");

    cbi::FolderOptions fo;
    fo.input_dir = in;
    fo.output_dir = dir / "alias";  // the input folder by another name: device+inode
    fo.recursive = true;
    EXPECT_THROW(cbi::plan_folder(fo), std::invalid_argument);
    fo.output_dir.clear();
    EXPECT_THROW(cbi::plan_folder(fo), std::invalid_argument);
    fo.input_dir = dir / "missing";
    fo.output_dir = dir / "out";
    EXPECT_EQ(error_of([&] { cbi::plan_folder(fo); }), (dir / "missing").string() + ": is not a folder");

    // In place: NAME.cbi.EXT beside the inputs; a second run ignores them.
    fo.input_dir = in;
    fo.output_dir = dir / "alias";
    fo.in_place = true;
    const auto factory = cbi::graph_processor_factory(cbi::sequence_graph(blur_chain(3)), cpu_options());
    const auto first = cbi::run_batch(cbi::plan_folder(fo), factory, {});
    EXPECT_EQ(first.processed, 2u);
    const auto plan2 = cbi::plan_folder(fo);
    ASSERT_EQ(plan2.jobs.size(), 2u);
    EXPECT_EQ(plan2.jobs[0].output, dir / "alias/a.cbi.png");
    EXPECT_EQ(files_under(in), (std::vector<std::string>{"a.cbi.png", "a.png", "s/b.cbi.png", "s/b.png"}));

    // An output folder inside the input folder is not walked as input.
    const fs::path in2 = dir / "in2";
    write_bytes(in2 / "a.png", encode(".png", random_image(9, 8, 3, cbi::Depth::u8, 1)));
    write_bytes(in2 / "s/b.png", encode(".png", random_image(9, 8, 3, cbi::Depth::u8, 2)));
    fo.input_dir = in2;
    fo.in_place = false;
    fo.output_dir = in2 / "s" / "out";
    const auto s = cbi::run_batch(cbi::plan_folder(fo), factory, {});
    EXPECT_EQ(s.processed, 2u);
    EXPECT_EQ(cbi::plan_folder(fo).jobs.size(), 2u);
    EXPECT_EQ(files_under(in2 / "s/out"), (std::vector<std::string>{"a.png", "s/b.png"}));
}

TEST(Batch, SkipExistingLeftoverTemporariesAndLock) {
    TempDir dir;
    const fs::path in = dir / "in", out = dir / "out";
    write_bytes(in / "a.png", encode(".png", random_image(9, 8, 3, cbi::Depth::u8, 1)));
    write_bytes(in / "s/b.png", encode(".png", random_image(9, 8, 3, cbi::Depth::u8, 2)));
    write_bytes(out / "a.png", {'k', 'e', 'e', 'p'});
    write_bytes(out / "s/.cbi-tmp-Zz9xQ1", {'l', 'e', 'f', 't'});  // a killed run's
    cbi::FolderOptions fo;
    fo.input_dir = in;
    fo.output_dir = out;
    fo.recursive = true;
    cbi::BatchOptions bo;
    bo.skip_existing = true;
    const auto factory = cbi::graph_processor_factory(cbi::sequence_graph(blur_chain(3)), cpu_options());

    // Another batch holds the output folder: refused before touching anything.
    const int fd = ::open(out.c_str(), O_RDONLY | O_DIRECTORY);
    ASSERT_EQ(::flock(fd, LOCK_EX), 0);
    EXPECT_EQ(error_of([&] { cbi::run_batch(cbi::plan_folder(fo), factory, bo); }),
              out.string() + ": another cbi batch is writing to this output folder");
    EXPECT_TRUE(fs::exists(out / "s/.cbi-tmp-Zz9xQ1"));
    ::close(fd);

    const auto s = cbi::run_batch(cbi::plan_folder(fo), factory, bo);
    EXPECT_EQ(s.skipped, 1u);
    EXPECT_EQ(s.processed, 1u);
    EXPECT_EQ(slurp(out / "a.png"), "keep");
    EXPECT_EQ(files_under(out), (std::vector<std::string>{"a.png", "s/b.png"}));  // leftover removed
}

TEST(Batch, FileListOutputs) {
    TempDir dir;
    write_bytes(dir / "x/a.png", encode(".png", random_image(9, 8, 3, cbi::Depth::u8, 1)));
    write_bytes(dir / "y/a.png", encode(".png", random_image(9, 8, 3, cbi::Depth::u8, 2)));
    const auto factory = cbi::graph_processor_factory(cbi::sequence_graph(blur_chain(3)), cpu_options());
    const std::vector<fs::path> inputs{dir / "x/a.png", dir / "y/a.png"};

    auto plan = cbi::plan_files(inputs, dir / "out", cbi::OutputFormat::tiff, false);
    ASSERT_EQ(plan.jobs.size(), 1u);
    EXPECT_EQ(plan.jobs[0].output, dir / "out/a.tiff");
    ASSERT_EQ(plan.rejected.size(), 1u);
    EXPECT_EQ(plan.rejected[0].input, dir / "y/a.png");
    EXPECT_EQ(cbi::run_batch(plan, factory, {}).processed, 1u);
    EXPECT_EQ(cbi::read_image(dir / "out/a.tiff").type(), CV_8UC3);

    // Without an output folder: IN.cbi.EXT beside each input.
    plan = cbi::plan_files(inputs, {}, cbi::OutputFormat::same, false);
    ASSERT_EQ(plan.jobs.size(), 2u);
    EXPECT_EQ(cbi::run_batch(plan, factory, {}).processed, 2u);
    EXPECT_TRUE(fs::is_regular_file(dir / "x/a.cbi.png"));
    EXPECT_TRUE(fs::is_regular_file(dir / "y/a.cbi.png"));

    EXPECT_THROW(cbi::plan_files(inputs, dir / "x", cbi::OutputFormat::same, false), std::invalid_argument);
    plan = cbi::plan_files(inputs, dir / "x", cbi::OutputFormat::same, true);
    EXPECT_EQ(plan.jobs[0].output, dir / "x/a.cbi.png");

    // The same file twice is said so (not a format clash).
    plan = cbi::plan_files({dir / "x/a.png", dir / "x/../x/a.png"}, dir / "twice", cbi::OutputFormat::same, false);
    ASSERT_EQ(plan.rejected.size(), 1u);
    EXPECT_EQ(plan.rejected[0].error,
              (dir / "x/../x/a.png").string() + ": is listed twice (as " + (dir / "x/a.png").string() + ")");

    // --skip-existing keeps outputs, not a folder that has an output's name:
    // that image fails (nothing can replace a folder) instead of counting as done.
    fs::create_directories(dir / "dirs/a.png");
    cbi::BatchOptions skip;
    skip.skip_existing = true;
    const auto s =
        cbi::run_batch(cbi::plan_files({dir / "x/a.png"}, dir / "dirs", cbi::OutputFormat::same, false), factory, skip);
    EXPECT_EQ(s.skipped, 0u);
    EXPECT_EQ(s.failed, 1u);
    EXPECT_TRUE(fs::is_directory(dir / "dirs/a.png"));
}

// ------------------------------------------------------------ the CLI

TEST(BatchCli, TreeSummaryErrorsAndExitCode) {
    TempDir dir, scratch;
    const fs::path in = dir / "in", out = dir / "out";
    const Tree tree = make_tree(in);
    const auto r = run_cli({"--input-dir", in.string(), "--output-dir", out.string(), "--recursive", "--blur", "3",
                            "--device", "cpu", "--jobs", "2", "--stats"},
                           scratch.path());
    EXPECT_EQ(r.code, 1) << r.err;
    for (const std::string& rel : tree.bad) {
        std::string reason = error_of([&] { cbi::read_image(in / rel); });
        EXPECT_TRUE(contains_line(r.err, "cbi-filter: error: " + reason)) << reason << "\n" << r.err;
    }
    const auto err_lines = lines(r.err);
    ASSERT_FALSE(err_lines.empty());
    EXPECT_TRUE(err_lines.back().starts_with("cbi-filter: 12 files: 5 processed, 7 failed, 0 skipped in ")) << r.err;
    EXPECT_NE(r.out.find("read+decode"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("encode+write"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("jobs 2, in flight 4, overlap on"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("device cpu: 5 images, busy "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("jpeg decodes: 0 on the devices, 1 on the CPU (0 after"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" s before the batch ("), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" loading, "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" plan and devices), "), std::string::npos) << r.out;
    EXPECT_EQ(files_under(out), tree.good);
    const auto nodes = blur_chain(3);
    for (const std::string& rel : tree.good) expect_matches_single_image(in / rel, out / rel, nodes, scratch.path());

    // --quiet: the error lines only. All good files and --skip-existing: exit 0.
    const auto q = run_cli({"--input-dir", in.string(), "--output-dir", out.string(), "--recursive", "--blur", "3",
                            "--device", "cpu", "--quiet", "--skip-existing"},
                           scratch.path());
    EXPECT_EQ(q.code, 1);
    EXPECT_EQ(lines(q.err).size(), tree.bad.size()) << q.err;
    const auto ok = run_cli({"--input-dir", in.string(), "--output-dir", (dir / "png").string(), "--recursive",
                             "--pattern", "*.png", "--blur", "3", "--device", "cpu", "--no-overlap"},
                            scratch.path());
    // *.png also matches the bad PNGs: zero, random, truncated, x.png.
    EXPECT_EQ(ok.code, 1);
    EXPECT_TRUE(lines(ok.err).back().starts_with("cbi-filter: 7 files: 3 processed, 4 failed, 0 skipped")) << ok.err;
    const auto good = run_cli({"--input-dir", in.string(), "--output-dir", (dir / "one").string(), "--pattern",
                               "sub/deep/c.*", "--recursive", "--blur", "3", "--device", "cpu"},
                              scratch.path());
    EXPECT_EQ(good.code, 0) << good.err;
    EXPECT_EQ(files_under(dir / "one"), std::vector<std::string>{"sub/deep/c.jpg"});
}

TEST(BatchCli, UsageErrorsExit2) {
    TempDir dir, scratch;
    write_bytes(dir / "in/a.png", encode(".png", random_image(9, 8, 3, cbi::Depth::u8, 1)));
    write_bytes(dir / "file.png", encode(".png", random_image(9, 8, 3, cbi::Depth::u8, 2)));
    const std::string in = (dir / "in").string(), a = (dir / "in/a.png").string();
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
        {{"--input-dir", in, "--output-dir", in, "--device", "cpu"},
         "cbi-filter: error: --output-dir: " + in +
             " is the input folder; in-place mode writes NAME.cbi.EXT beside the inputs"},
        {{"--input-dir", in, "--device", "cpu"},
         "cbi-filter: error: --input-dir: --output-dir is required (or --in-place to write NAME.cbi.EXT beside the "
         "inputs)"},
        {{a, "--no-overlap", "--device", "cpu"},
         "cbi-filter: error: --no-overlap: applies to batch mode only (--input-dir, --output-dir or several inputs)"},
        {{a, a, "-o", (dir / "file.png").string(), "--device", "cpu"},
         "cbi-filter: error: " + (dir / "file.png").string() +
             ": is not a folder; in batch mode -o/--output-dir names the output folder"},
        {{"--input-dir", in, a, "--output-dir", (dir / "o").string(), "--device", "cpu"},
         "cbi-filter: error: IN: give either --input-dir or input files, not both"},
        // Nothing to read: not a batch of no files (and no output folder made).
        {{"--output-dir", (dir / "o").string(), "--blur", "3", "--device", "cpu"},
         "cbi-filter: error: IN: input images or --input-dir are required (see --help)"},
        // Empty values are not defaults.
        {{a, "--blur", "3", "-o", ""}, "cbi-filter: error: --output: an empty path"},
        {{"--input-dir", "", "--output-dir", (dir / "o").string(), "--blur", "3"},
         "cbi-filter: error: --input-dir: an empty path"},
        {{a, "--sobel", "", "--device", "cpu"}, "cbi-filter: error: --sobel: needs a value (see --help)"},
        {{a, "--laplacian", ""}, "cbi-filter: error: --laplacian: needs a value (see --help)"},
    };
    for (const auto& [args, want] : cases) {
        const auto r = run_cli(args, scratch.path());
        EXPECT_EQ(r.code, 2) << want;
        EXPECT_EQ(r.err, want + "\n");
    }
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"--input-dir", in, "--output-dir", (dir / "o").string(), "--format", "bmp"},
          std::vector<std::string>{"--input-dir", in, "--output-dir", (dir / "o").string(), "--in-flight", "0"}}) {
        const auto r = run_cli(args, scratch.path());
        EXPECT_EQ(r.code, 2) << r.err;
        EXPECT_TRUE(r.err.starts_with("cbi-filter: error: --")) << r.err;
    }
    EXPECT_FALSE(fs::exists(dir / "o"));

    // Single-image mode is unchanged.
    const auto single =
        run_cli({a, "--blur", "3", "--device", "cpu", "-o", (dir / "single.png").string()}, scratch.path());
    EXPECT_EQ(single.code, 0);
    EXPECT_EQ(single.err, "");
    EXPECT_TRUE(fs::is_regular_file(dir / "single.png"));
}

TEST(BatchCli, UnreadableFileAsUnprivilegedUser) {
    // Root reads mode-000 files anyway (CAP_DAC_OVERRIDE): as in
    // test_image_io, the run happens in a child that drops to nobody.
    TempDir dir, scratch;
    ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
    ASSERT_EQ(::chmod(scratch.path().c_str(), 0777), 0);
    const fs::path in = dir / "in", out = dir / "out";
    write_bytes(in / "good.png", encode(".png", random_image(9, 8, 3, cbi::Depth::u8, 1)));
    write_bytes(in / "secret.png", encode(".png", random_image(9, 8, 3, cbi::Depth::u8, 2)));
    ASSERT_EQ(::chmod((in / "secret.png").c_str(), 0), 0);
    fs::create_directories(out);
    ASSERT_EQ(::chmod(out.c_str(), 0777), 0);
    ChildSetup setup;
    setup.as_nobody = ::geteuid() == 0;
    const auto r = run_cli({"--input-dir", in.string(), "--output-dir", out.string(), "--blur", "3", "--device", "cpu"},
                           scratch.path(), setup);
    if (r.code == 77) GTEST_SKIP() << "running as root and cannot drop to uid 65534";
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_TRUE(contains_line(r.err, "cbi-filter: error: " + (in / "secret.png").string() + ": permission denied"))
        << r.err;
    EXPECT_TRUE(r.err.find("2 files: 1 processed, 1 failed") != std::string::npos) << r.err;
    EXPECT_EQ(files_under(out), std::vector<std::string>{"good.png"});
}

TEST(BatchCli, SigkillLeavesOnlyCompleteOutputsAndSkipExistingResumes) {
    TempDir dir, scratch;
    const fs::path in = dir / "in", out = dir / "out";
    constexpr int count = 48;
    for (int i = 0; i < count; ++i)
        write_bytes(in / ("s" + std::to_string(i % 3)) / ("img" + std::to_string(100 + i) + ".png"),
                    encode(".png", random_image(480, 360, 3, cbi::Depth::u8, 100 + i)));
    // About 25 ms an image on 2 cores: 1-2 s for the folder.
    const std::vector<std::string> chain{"--blur", "9"};
    const auto nodes = blur_chain(9);
    std::vector<std::string> args{"--input-dir", in.string(), "--output-dir", out.string(), "--recursive",
                                  "--device",    "cpu",       "--jobs",       "2",          "--quiet"};
    args.insert(args.end(), chain.begin(), chain.end());

    ASSERT_EQ(interrupt_batch(args, out, 3, SIGKILL, scratch.path()), 128 + SIGKILL)
        << "the batch finished before it was killed";

    std::vector<std::string> done;
    for (const std::string& rel : files_under(out))
        if (!is_temporary(rel)) done.push_back(rel);
    ASSERT_GE(done.size(), 3u);
    ASSERT_LT(done.size(), static_cast<std::size_t>(count)) << "killed too late to test anything";
    for (const std::string& rel : done) expect_matches_single_image(in / rel, out / rel, nodes, scratch.path());

    args.push_back("--skip-existing");
    args.erase(std::find(args.begin(), args.end(), "--quiet"));
    const auto r = run_cli(args, scratch.path());
    EXPECT_EQ(r.code, 0) << r.err;
    std::ostringstream want;
    want << "cbi-filter: " << count << " files: " << count - done.size() << " processed, 0 failed, " << done.size()
         << " skipped in ";
    EXPECT_TRUE(lines(r.err).back().starts_with(want.str())) << r.err;
    const auto all = files_under(out);
    ASSERT_EQ(all.size(), static_cast<std::size_t>(count));  // the leftover temporaries are gone
    for (const std::string& rel : all)
        if (std::find(done.begin(), done.end(), rel) == done.end())
            expect_matches_single_image(in / rel, out / rel, nodes, scratch.path());
}

TEST(BatchCli, DiskFullLeavesNoPartialOutput) {
    // RLIMIT_FSIZE in the child stands in for a full disk.
    TempDir dir, scratch;
    const fs::path in = dir / "in", out = dir / "out";
    write_bytes(in / "small.png", encode(".png", random_image(8, 8, 3, cbi::Depth::u8, 1)));
    cbi::write_image_atomic(in / "big.tiff", random_image(512, 512, 4, cbi::Depth::f32, 2));  // ~4 MiB, incompressible
    ChildSetup setup;
    setup.file_size_limit = 256 * 1024;
    const auto r = run_cli({"--input-dir", in.string(), "--output-dir", out.string(), "--blur", "3", "--device", "cpu"},
                           scratch.path(), setup);
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_TRUE(
        contains_line(r.err, "cbi-filter: error: " + (out / "big.tiff").string() + ": write failed: File too large"))
        << r.err;
    EXPECT_TRUE(r.err.find("2 files: 1 processed, 1 failed") != std::string::npos) << r.err;
    EXPECT_EQ(files_under(out), std::vector<std::string>{"small.png"});  // no partial big.tiff, no temporary
}

// ------------------------------------------------------------ inputs are never written

// The bytes of every regular file under `root`, to show nothing changed.
std::map<std::string, std::string> snapshot(const fs::path& root) {
    std::map<std::string, std::string> out;
    for (const std::string& rel : files_under(root)) out[rel] = slurp(root / rel);
    return out;
}

TEST(BatchCli, AnOutputThatIsAnotherInputIsRefusedBeforeAnyWork) {
    TempDir dir, scratch;
    const auto png = [](unsigned seed) { return encode(".png", random_image(9, 8, 3, cbi::Depth::u8, seed)); };
    // 1. The output of b1/x.png is b1/x.cbi.png, the second input.
    write_bytes(dir / "b1/x.png", png(1));
    write_bytes(dir / "b1/x.cbi.png", png(2));
    // 2. o2/sub/sub/a.png writes o2/sub/a.png, an input.
    write_bytes(dir / "o2/sub/a.png", png(3));
    write_bytes(dir / "o2/sub/sub/a.png", png(4));
    // 3. x.png writes a/x.png, the second input (a/x.png itself writes a/x.cbi.png).
    write_bytes(dir / "x.png", png(5));
    write_bytes(dir / "a/x.png", png(6));
    const auto before = snapshot(dir.path());
    const std::string d = dir.path().string();
    struct Case {
        std::vector<std::string> args;
        std::vector<std::string> conflicts;  // output, input
    };
    const std::vector<Case> cases{
        {{d + "/b1/x.png", d + "/b1/x.cbi.png"}, {d + "/b1/x.cbi.png", d + "/b1/x.cbi.png"}},
        {{"--input-dir", d + "/o2/sub", "--output-dir", d + "/o2", "--recursive"},
         {d + "/o2/sub/a.png", d + "/o2/sub/a.png"}},
        {{d + "/x.png", d + "/a/x.png", "-o", d + "/a", "--in-place"}, {d + "/a/x.png", d + "/a/x.png"}},
    };
    for (const Case& c : cases) {
        std::vector<std::string> args = c.args;
        for (const char* a : {"--blur", "3", "--device", "cpu"}) args.push_back(a);
        const auto r = run_cli(args, scratch.path());
        SCOPED_TRACE(args.front());
        EXPECT_EQ(r.code, 2) << r.err;
        const auto l = lines(r.err);
        ASSERT_EQ(l.size(), 1u) << r.err;  // one line per conflict, and no summary: nothing ran
        EXPECT_TRUE(l[0].starts_with("cbi-filter: error: " + c.conflicts[0] + ": is the input " + c.conflicts[1] +
                                     " (the same file)"))
            << r.err;
        EXPECT_NE(l[0].find("cbi never overwrites an input"), std::string::npos);
    }
    EXPECT_EQ(snapshot(dir.path()), before);  // not a byte changed, nothing added
}

TEST(Batch, HardLinksSymlinkedFoldersAndInPlaceNeverOverwriteInputs) {
    TempDir dir;
    const auto png = [](unsigned seed) { return encode(".png", random_image(9, 8, 3, cbi::Depth::u8, seed)); };
    const auto factory = cbi::graph_processor_factory(cbi::sequence_graph(blur_chain(3)), cpu_options());
    const fs::path in = dir / "in";
    const auto a = png(1), b = png(2), sub_b = png(3);
    write_bytes(in / "a.png", a);
    write_bytes(in / "b.png", b);
    write_bytes(in / "sub/b.png", sub_b);

    // An output that is a hard link to an input.
    fs::create_directories(dir / "out");
    fs::create_hard_link(in / "a.png", dir / "out/a.png");
    cbi::FolderOptions fo;
    fo.input_dir = in;
    fo.output_dir = dir / "out";
    auto plan = cbi::plan_folder(fo);
    ASSERT_EQ(plan.conflicts.size(), 1u);
    EXPECT_TRUE(
        plan.conflicts[0].starts_with((dir / "out/a.png").string() + ": is the input " + (in / "a.png").string()))
        << plan.conflicts[0];
    EXPECT_THROW(cbi::run_batch(plan, factory, {}), std::invalid_argument);

    // A symlinked folder inside the output tree leading back into the input:
    // out2/sub is in, so in/sub/b.png would write in/b.png.
    fs::create_directories(dir / "out2");
    fs::create_directory_symlink(in, dir / "out2/sub");
    fo.output_dir = dir / "out2";
    fo.recursive = true;
    plan = cbi::plan_folder(fo);
    ASSERT_EQ(plan.conflicts.size(), 1u);
    EXPECT_TRUE(
        plan.conflicts[0].starts_with((dir / "out2/sub/b.png").string() + ": is the input " + (in / "b.png").string()))
        << plan.conflicts[0];

    // In place: a NAME.cbi.EXT that is a hard link to another input.
    fs::create_hard_link(in / "b.png", in / "a.cbi.png");
    fo.output_dir.clear();
    fo.in_place = true;
    fo.recursive = false;
    plan = cbi::plan_folder(fo);
    ASSERT_EQ(plan.conflicts.size(), 1u);
    EXPECT_TRUE(
        plan.conflicts[0].starts_with((in / "a.cbi.png").string() + ": is the input " + (in / "b.png").string()))
        << plan.conflicts[0];

    // Two spellings of one folder are one folder: d/a.png and dlink/a.png
    // would both write d/a.cbi.png; the second is refused.
    fs::create_directory_symlink(in, dir / "in-alias");
    plan = cbi::plan_files({in / "sub/b.png", dir / "in-alias/sub/b.png"}, {}, cbi::OutputFormat::same, false);
    EXPECT_TRUE(plan.conflicts.empty());
    EXPECT_EQ(plan.jobs.size(), 1u);
    EXPECT_EQ(plan.rejected.size(), 1u);

    // A symbolic link as the output, pointing at an input.
    fs::create_symlink(in / "b.png", dir / "out/b.png");
    plan = cbi::plan_files({in / "sub/b.png", in / "b.png"}, dir / "out", cbi::OutputFormat::same, false);
    ASSERT_EQ(plan.conflicts.size(), 1u);
    EXPECT_TRUE(
        plan.conflicts[0].starts_with((dir / "out/b.png").string() + ": is the input " + (in / "b.png").string()))
        << plan.conflicts[0];
    EXPECT_THROW(cbi::run_batch(plan, factory, {}), std::invalid_argument);
    EXPECT_EQ(slurp(in / "a.png"), std::string(a.begin(), a.end()));
    EXPECT_EQ(slurp(in / "b.png"), std::string(b.begin(), b.end()));
    EXPECT_EQ(slurp(in / "sub/b.png"), std::string(sub_b.begin(), sub_b.end()));
}

// ------------------------------------------------------------ interrupts and leftovers

TEST(BatchCli, SigintAndSigtermStopCleanlyWithASummary) {
    TempDir dir;
    const fs::path in = dir / "in";
    constexpr int count = 40;
    for (int i = 0; i < count; ++i)
        write_bytes(in / ("img" + std::to_string(100 + i) + ".png"),
                    encode(".png", random_image(480, 360, 3, cbi::Depth::u8, i)));
    const auto nodes = blur_chain(9);
    for (const int sig : {SIGINT, SIGTERM}) {
        TempDir scratch;
        const fs::path out = dir / ("out" + std::to_string(sig));
        const int code = interrupt_batch({"--input-dir", in.string(), "--output-dir", out.string(), "--blur", "9",
                                          "--device", "cpu", "--jobs", "2", "--quiet"},
                                         out, 2, sig, scratch.path());
        const std::string err = slurp(scratch / "err.txt");
        ASSERT_EQ(code, 128 + sig) << err;
        const auto l = lines(err);
        ASSERT_EQ(l.size(), 1u) << err;  // --quiet: only the summary, which an interrupt always prints
        EXPECT_NE(l[0].find(std::string(" not done (interrupted by ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") + ")"),
                  std::string::npos)
            << err;
        const auto done = files_under(out);  // no temporary among them
        ASSERT_GE(done.size(), 2u);
        ASSERT_LT(done.size(), static_cast<std::size_t>(count)) << "interrupted too late to test anything";
        for (const std::string& rel : done) expect_matches_single_image(in / rel, out / rel, nodes, scratch.path());
    }
}

// An interrupt cancels the parallel loops of the images being filtered: the
// run ends at once, not after them (each of these takes tens of seconds on
// 2 cores).
TEST(BatchCli, SigintStopsTheImagesBeingFilteredAtOnce) {
    TempDir dir, scratch;
    for (int i = 0; i < 2; ++i)
        write_bytes(dir / ("in/s" + std::to_string(i) + ".png"),
                    encode(".png", random_image(640, 480, 3, cbi::Depth::u8, 40 + i)));
    const pid_t pid = spawn_cli({"--input-dir", (dir / "in").string(), "--output-dir", (dir / "out").string(), "--blur",
                                 "201", "--schedule", "naive", "--device", "cpu", "--jobs", "2"},
                                scratch / "out.txt", scratch / "err.txt");
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // read and filtering
    const auto t0 = std::chrono::steady_clock::now();
    ::kill(pid, SIGINT);
    EXPECT_EQ(wait_code(pid), 128 + SIGINT);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(waited, 8.0);
    const std::string err = slurp(scratch / "err.txt");
    EXPECT_NE(err.find("2 files: 0 processed, 0 failed, 0 skipped, 2 not done (interrupted by SIGINT)"),
              std::string::npos)
        << err;
    EXPECT_TRUE(files_under(dir / "out").empty());
}

TEST(BatchCli, SigintDuringASingleImageLeavesNothingAndLaterRunsClearLeftovers) {
    TempDir dir, scratch;
    // Large enough that the blur takes a while on 2 cores.
    const fs::path img = dir / "big.png";
    write_bytes(img, encode(".png", random_image(1024, 768, 3, cbi::Depth::u8, 9)));
    const pid_t pid = spawn_cli({img.string(), "--blur", "255", "--schedule", "naive", "--device", "cpu", "--threads",
                                 "2", "-o", (dir / "out.png").string()},
                                scratch / "out.txt", scratch / "err.txt");
    // Filtering: main thread, signal thread and a TBB worker exist.
    const auto threads = [&] {
        std::ifstream status("/proc/" + std::to_string(pid) + "/status");
        for (std::string line; std::getline(status, line);)
            if (line.starts_with("Threads:")) return std::stoi(line.substr(8));
        return 0;
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (threads() < 3 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ::kill(pid, SIGINT);
    EXPECT_EQ(wait_code(pid), 128 + SIGINT) << slurp(scratch / "err.txt");
    EXPECT_EQ(slurp(scratch / "err.txt"), "cbi-filter: interrupted by SIGINT\n");
    EXPECT_EQ(files_under(dir.path()), std::vector<std::string>{"big.png"});

    // A leftover of a killed run is removed by the next run into that folder;
    // a temporary that a live writer holds (flock) is not.
    write_bytes(dir / ".cbi-tmp-Left01", {'l'});
    write_bytes(dir / ".cbi-tmp-Live01", {'w'});
    const int held = ::open((dir / ".cbi-tmp-Live01").c_str(), O_RDONLY);
    ASSERT_EQ(::flock(held, LOCK_EX), 0);
    const auto r =
        run_cli({img.string(), "--blur", "3", "--device", "cpu", "-o", (dir / "out.png").string()}, scratch.path());
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(files_under(dir.path()), (std::vector<std::string>{".cbi-tmp-Live01", "big.png", "out.png"}));
    ::close(held);
    EXPECT_EQ(cbi::remove_stale_temporaries(dir.path()), 1u);
    EXPECT_EQ(files_under(dir.path()), (std::vector<std::string>{"big.png", "out.png"}));
}

// Only write_image_atomic's own temporaries (`.cbi-tmp-` and six letters or
// digits) are cleared as a killed run's leftovers, and never an input: a
// user's files that merely start with the prefix, and an input named
// exactly like a temporary, survive runs into their folder, one image or a
// batch.
TEST(BatchCli, FilesNamedLikeTemporariesAreNeverRemovedWhenTheyAreNotOurs) {
    TempDir dir, scratch;
    EXPECT_TRUE(cbi::is_temporary_name(".cbi-tmp-Zz9xQ1"));
    EXPECT_FALSE(cbi::is_temporary_name(".cbi-tmp-photo.png"));
    EXPECT_FALSE(cbi::is_temporary_name(".cbi-tmp-abc"));
    EXPECT_FALSE(cbi::is_temporary_name(".cbi-tmp-Ab_2Cd"));
    const auto png = encode(".png", random_image(40, 30, 3, cbi::Depth::u8, 4));
    write_bytes(dir / ".cbi-tmp-photo.png", png);  // an input that starts with the prefix
    write_bytes(dir / ".cbi-tmp-abc", {'u'});      // a user's file: three characters after it
    write_bytes(dir / ".cbi-tmp-Zz9xQ1", {'l'});   // a killed run's leftover
    auto r = run_cli({(dir / ".cbi-tmp-photo.png").string(), "--blur", "3", "--device", "cpu"}, scratch.path());
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(files_under(dir.path()),
              (std::vector<std::string>{".cbi-tmp-abc", ".cbi-tmp-photo.cbi.png", ".cbi-tmp-photo.png"}));

    write_bytes(dir / ".cbi-tmp-Ab12Cd", png);  // an input named exactly like a temporary
    r = run_cli({(dir / ".cbi-tmp-Ab12Cd").string(), "--blur", "3", "--device", "cpu", "-o", (dir / "b.png").string()},
                scratch.path());
    EXPECT_EQ(r.code, 0) << r.err;
    r = run_cli({(dir / ".cbi-tmp-Ab12Cd").string(), (dir / ".cbi-tmp-photo.png").string(), "--blur", "3", "--device",
                 "cpu", "--output-dir", dir.path().string(), "--in-place", "--format", "png"},
                scratch.path());
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(files_under(dir.path()),
              (std::vector<std::string>{".cbi-tmp-Ab12Cd", ".cbi-tmp-Ab12Cd.cbi.png", ".cbi-tmp-abc",
                                        ".cbi-tmp-photo.cbi.png", ".cbi-tmp-photo.png", "b.png"}));
    EXPECT_EQ(cbi::read_file(dir / ".cbi-tmp-Ab12Cd"), png);
    EXPECT_EQ(cbi::read_file(dir / ".cbi-tmp-photo.png"), png);
}

// A JPEG whose scan is cut short, with an end-of-image marker after it, is
// refused in one line (OpenCV would have decoded it, filled with gray), one
// image or in a batch with a good one.
TEST(BatchCli, AJpegWithACorruptScanIsOneErrorLine) {
    TempDir dir, scratch;
    const auto jpg = encode(".jpg", random_image(96, 64, 3, cbi::Depth::u8, 12));
    std::vector<std::uint8_t> cut(jpg.begin(), jpg.begin() + static_cast<long>(jpg.size() * 3 / 4));
    cut.insert(cut.end(), {0xFF, 0xD9});
    write_bytes(dir / "in/cut.jpg", cut);
    write_bytes(dir / "in/good.jpg", jpg);
    auto r = run_cli({(dir / "in/cut.jpg").string(), "--blur", "3", "--device", "cpu", "-o", (dir / "o.png").string()},
                     scratch.path());
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err, "cbi-filter: error: " + (dir / "in/cut.jpg").string() +
                         ": corrupt JPEG data (premature end of data segment)\n");
    EXPECT_FALSE(fs::exists(dir / "o.png"));
    r = run_cli({"--input-dir", (dir / "in").string(), "--output-dir", (dir / "out").string(), "--blur", "3",
                 "--device", "cpu", "--quiet"},
                scratch.path());
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err, "cbi-filter: error: " + (dir / "in/cut.jpg").string() +
                         ": corrupt JPEG data (premature end of data segment)\n");
    EXPECT_EQ(files_under(dir / "out"), std::vector<std::string>{"good.jpg"});
}

TEST(BatchCli, ControlCharactersInNamesStayOnOneLine) {
    TempDir dir, scratch;
    const fs::path bad = dir / "in/two\nlines\x1b[31m.png";
    write_bytes(bad, {'n', 'o', 't'});
    const auto r = run_cli({"--input-dir", (dir / "in").string(), "--output-dir", (dir / "out").string(), "--blur", "3",
                            "--device", "cpu", "--quiet"},
                           scratch.path());
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err,
              "cbi-filter: error: " + (dir / "in").string() +
                  "/two\\nlines\\x1b[31m.png: not a recognized image format (cbi reads PNG, JPEG, TIFF, BMP, WebP, "
                  "PNM/PAM/PFM, OpenEXR, Radiance HDR, Sun raster)\n");
    // Bytes that are not UTF-8 (a Latin-1 name, a lone continuation byte) and
    // C1 controls are escaped too; UTF-8 names are kept as they are.
    const fs::path latin = dir / "in2/caf\xe9 \x9b\xc2\x9b fl\xc3\xbcgel\xe2\x82.png";
    write_bytes(latin, {'n', 'o', 't'});
    const auto l =
        run_cli({latin.string(), "--blur", "3", "--device", "cpu", "-o", (dir / "o.png").string()}, scratch.path());
    EXPECT_EQ(l.code, 1);
    EXPECT_EQ(l.err.substr(0, l.err.find(": not a recognized")),
              "cbi-filter: error: " + (dir / "in2").string() + "/caf\\xe9 \\x9b\\xc2\\x9b fl\xc3\xbcgel\\xe2\\x82.png");
}

// A folder of gray, colour, alpha, 16-bit and float images runs
// with a colour preset (a 1-channel image reads as R = G = B) and a stencil.
TEST(BatchCli, MixedFolderWithColourPresetsJustWorks) {
    TempDir dir, scratch;
    const fs::path in = dir / "in";
    cv::Mat gray;
    cv::cvtColor(smooth_image(40, 30, 1), gray, cv::COLOR_BGR2GRAY);
    write_bytes(in / "gray.jpg", encode(".jpg", gray));
    write_bytes(in / "colour.jpg", encode(".jpg", smooth_image(41, 29, 2)));
    write_bytes(in / "alpha.png", encode(".png", random_image(23, 17, 4, cbi::Depth::u8, 3)));
    write_bytes(in / "deep16.png", encode(".png", random_image(19, 13, 1, cbi::Depth::u16, 4)));
    write_bytes(in / "rgb16.png", encode(".png", random_image(19, 13, 3, cbi::Depth::u16, 5)));
    cbi::write_image_atomic(in / "float1.tiff", random_image(17, 11, 1, cbi::Depth::f32, 6));
    cbi::write_image_atomic(in / "float3.tiff", random_image(17, 11, 3, cbi::Depth::f32, 7));
    const std::vector<std::string> all = files_under(in);
    for (const std::string preset : {"gray", "sepia"}) {
        const fs::path out = dir / ("out-" + preset);
        const auto r = run_cli({"--input-dir", in.string(), "--output-dir", out.string(), "--color", preset,
                                "--gaussian", "3", "--device", "cpu"},
                               scratch.path());
        SCOPED_TRACE(preset);
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_TRUE(r.err.starts_with("cbi-filter: 7 files: 7 processed, 0 failed")) << r.err;
        ASSERT_EQ(files_under(out), all);
        const std::vector<cbi::FilterRun> nodes{{cbi::FilterKind<cbi::ColorFilter>::parse(preset), {}, {}},
                                                {cbi::GaussianFilter{3, 0}, {}, {}}};
        for (const std::string& rel : all) {
            expect_matches_single_image(in / rel, out / rel, nodes, scratch.path());
            const int in_channels = cbi::read_image(in / rel).channels();
            const int want = preset == std::string("gray") ? 1 : in_channels == 1 ? 3 : in_channels;
            EXPECT_EQ(cbi::read_image(out / rel).channels(), want) << rel;
        }
    }
}

}  // namespace
