// Output encoding options and metadata on real files: --quality and
// --png-compression (API and CLI, single image and batch), EXIF/ICC/XMP
// carried from input to output (made and checked with exiv2 itself),
// Orientation reset where the pixels were turned, --strip, corrupt EXIF
// (pixels still written, one warning) and bad option values (exit 2).
#include <gtest/gtest.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cli.hpp"
#include "pipeline/error.hpp"
#include "pipeline/image_io.hpp"

#if CBI_TEST_HAVE_EXIV2
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <exiv2/exiv2.hpp>
#pragma GCC diagnostic pop
#endif

namespace fs = std::filesystem;
using cbi::test::TempDir;

namespace {

// The real cbi-filter on the CPU (no notice about a missing GPU).
cbi::test::CliResult run_cli(std::vector<std::string> args, const fs::path& scratch) {
    args.insert(args.end(), {"--device", "cpu"});
    return cbi::test::run_cli(args, scratch);
}

std::vector<std::uint8_t> bytes_of(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// An asymmetric colour image, so that a turn or a flip shows.
cv::Mat test_image(int w, int h, int type = CV_8UC3) {
    cv::Mat m(h, w, CV_8UC3);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            m.at<cv::Vec3b>(y, x) = {static_cast<uchar>(x * 5), static_cast<uchar>(y * 3),
                                     static_cast<uchar>((x + 2 * y) % 256)};
    cv::rectangle(m, {2, 2}, {w / 3, h / 4}, {255, 255, 255}, cv::FILLED);  // a mark in one corner
    if (type == CV_8UC3) return m;
    cv::Mat out;
    if (CV_MAT_CN(type) == 1) cv::cvtColor(m, m, cv::COLOR_BGR2GRAY);
    if (CV_MAT_CN(type) == 4) {  // an alpha that varies (an opaque one may come back as 3 channels from WebP)
        cv::cvtColor(m, m, cv::COLOR_BGR2BGRA);
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) m.at<cv::Vec4b>(y, x)[3] = static_cast<uchar>(128 + (x + y) % 100);
    }
    m.convertTo(out, CV_MAT_DEPTH(type),
                CV_MAT_DEPTH(type) == CV_16U   ? 257.0
                : CV_MAT_DEPTH(type) == CV_32F ? 1 / 255.0
                                               : 1.0);
    return out;
}

TEST(WriteOptions, JpegQualityChangesSizeMonotonicallyAndDecodes) {
    TempDir dir;
    const cv::Mat image = test_image(160, 120);
    std::uintmax_t last = 0;
    for (const int q : {5, 30, 60, 90, 100}) {
        const fs::path out = dir / ("q" + std::to_string(q) + ".jpg");
        cbi::WriteOptions o;
        o.quality = q;
        cbi::write_image_atomic(out, image, o);
        const std::uintmax_t size = fs::file_size(out);
        EXPECT_GT(size, last) << "quality " << q;
        last = size;
        const cv::Mat back = cv::imread(out.string(), cv::IMREAD_UNCHANGED);
        ASSERT_EQ(back.size(), image.size());
        if (q >= 90) {
            EXPECT_LT(cv::norm(back, image, cv::NORM_L1) / image.total() / 3, 4.0) << "quality " << q;
        }
    }
    // The default stays 95.
    cbi::WriteOptions q95;
    q95.quality = 95;
    cbi::write_image_atomic(dir / "default.jpg", image);
    cbi::write_image_atomic(dir / "95.jpg", image, q95);
    EXPECT_EQ(bytes_of(dir / "default.jpg"), bytes_of(dir / "95.jpg"));
}

TEST(WriteOptions, WebpQualityIsLossyAndTheDefaultLossless) {
    TempDir dir;
    const cv::Mat image = test_image(160, 120);
    cbi::write_image_atomic(dir / "lossless.webp", image);
    EXPECT_EQ(cv::norm(cv::imread((dir / "lossless.webp").string(), cv::IMREAD_UNCHANGED), image, cv::NORM_INF), 0.0);
    std::uintmax_t last = 0;
    for (const int q : {10, 50, 90}) {
        const fs::path out = dir / ("q" + std::to_string(q) + ".webp");
        cbi::WriteOptions o;
        o.quality = q;
        cbi::write_image_atomic(out, image, o);
        EXPECT_GT(fs::file_size(out), last) << "quality " << q;
        last = fs::file_size(out);
        EXPECT_EQ(cv::imread(out.string(), cv::IMREAD_UNCHANGED).size(), image.size());
    }
}

TEST(WriteOptions, PngCompressionLevelsGiveIdenticalPixelsAndDifferentSizes) {
    TempDir dir;
    for (const int type : {CV_8UC3, CV_16UC1, CV_8UC4}) {
        const cv::Mat image = test_image(200, 150, type);
        std::uintmax_t none = 0, best = 0;
        for (int level = 0; level <= 9; ++level) {
            const fs::path out = dir / ("l" + std::to_string(level) + ".png");
            cbi::WriteOptions o;
            o.png_compression = level;
            cbi::write_image_atomic(out, image, o);
            const cv::Mat back = cv::imread(out.string(), cv::IMREAD_UNCHANGED);
            ASSERT_EQ(back.type(), image.type());
            EXPECT_EQ(cv::norm(back, image, cv::NORM_INF), 0.0) << "level " << level;
            if (level == 0) none = fs::file_size(out);
            if (level == 9) best = fs::file_size(out);
        }
        EXPECT_LT(best, none) << cv::typeToString(type);
        EXPECT_GT(none, image.total() * image.elemSize());  // level 0 stores
    }
}

TEST(WriteOptions, OutOfRangeValuesAreRefused) {
    TempDir dir;
    const cv::Mat image = test_image(8, 8);
    for (const auto& [q, l] : {std::pair{-1, -1}, std::pair{101, -1}, std::pair{0, 10}, std::pair{0, -2}}) {
        cbi::WriteOptions o;
        o.quality = q;
        o.png_compression = l;
        EXPECT_THROW(cbi::check_write_options(o), std::invalid_argument);
        EXPECT_THROW(cbi::write_image_atomic(dir / "x.png", image, o), cbi::Error);
    }
    EXPECT_FALSE(fs::exists(dir / "x.png"));
}

TEST(EncodingCli, QualityAndCompressionInSingleAndBatchMode) {
    TempDir dir;
    cv::imwrite((dir / "a.png").string(), test_image(160, 120));
    cv::imwrite((dir / "b.png").string(), test_image(120, 160));
    const auto low = run_cli(
        {(dir / "a.png").string(), "--blur", "1", "--quality", "20", "-o", (dir / "low.jpg").string()}, dir.path());
    ASSERT_EQ(low.code, 0) << low.err;
    const auto high = run_cli({(dir / "a.png").string(), "--blur", "1", "-o", (dir / "high.jpg").string()}, dir.path());
    ASSERT_EQ(high.code, 0) << high.err;
    EXPECT_LT(fs::file_size(dir / "low.jpg"), fs::file_size(dir / "high.jpg"));
    const auto l0 =
        run_cli({(dir / "a.png").string(), "--blur", "1", "--png-compression", "0", "-o", (dir / "l0.png").string()},
                dir.path());
    ASSERT_EQ(l0.code, 0) << l0.err;
    const auto l9 =
        run_cli({(dir / "a.png").string(), "--blur", "1", "--png-compression", "9", "-o", (dir / "l9.png").string()},
                dir.path());
    ASSERT_EQ(l9.code, 0) << l9.err;
    EXPECT_GT(fs::file_size(dir / "l0.png"), fs::file_size(dir / "l9.png"));

    fs::create_directories(dir / "in");
    fs::copy(dir / "a.png", dir / "in/a.png");
    fs::copy(dir / "b.png", dir / "in/b.png");
    for (const char* q : {"20", "90"}) {
        const auto r =
            run_cli({"--input-dir", (dir / "in").string(), "--output-dir", (dir / (std::string("out") + q)).string(),
                     "--format", "jpg", "--quality", q, "--blur", "1", "--quiet"},
                    dir.path());
        ASSERT_EQ(r.code, 0) << r.err;
    }
    for (const char* name : {"a.jpg", "b.jpg"})
        EXPECT_LT(fs::file_size(dir / "out20" / name), fs::file_size(dir / "out90" / name)) << name;
}

TEST(EncodingCli, BadValuesExitTwoWithOneLineNamingTheOption) {
    TempDir dir;
    cv::imwrite((dir / "a.png").string(), test_image(16, 16));
    const std::string in = (dir / "a.png").string();
    struct Case {
        std::vector<std::string> args;
        std::string option;
    };
    const std::vector<Case> cases = {
        {{"--quality", "0", "-o", "o.jpg"}, "--quality"},
        {{"--quality", "101", "-o", "o.jpg"}, "--quality"},
        {{"--quality", "x", "-o", "o.jpg"}, "--quality"},
        {{"--quality", "80", "-o", "o.png"}, "--quality"},  // no output takes it
        {{"--png-compression", "10", "-o", "o.png"}, "--png-compression"},
        {{"--png-compression", "-1", "-o", "o.png"}, "--png-compression"},
        {{"--png-compression", "5", "-o", "o.jpg"}, "--png-compression"},
        {{"--output-dir", (dir / "out").string(), "--format", "tiff", "--quality", "50"}, "--quality"},  // batch
    };
    for (const Case& c : cases) {
        std::vector<std::string> args = {in, "--blur", "3"};
        args.insert(args.end(), c.args.begin(), c.args.end());
        const auto r = run_cli(args, dir.path());
        std::string joined;
        for (const auto& a : c.args) joined += a + " ";
        EXPECT_EQ(r.code, 2) << joined << r.err;
        EXPECT_NE(r.err.find(c.option), std::string::npos) << joined << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << joined << r.err;
        EXPECT_FALSE(fs::exists(dir / "o.jpg") || fs::exists(dir / "o.png") || fs::exists(dir / "out")) << joined;
    }
}

#if CBI_TEST_HAVE_EXIV2

// A minimal well-formed ICC profile header (no tags) of a colour space.
std::vector<std::uint8_t> icc_profile(const char* space) {
    std::vector<std::uint8_t> p(132, 0);
    p[3] = 132;                             // size, big-endian
    p[8] = 2, p[9] = 0x10;                  // version 2.1
    std::memcpy(p.data() + 12, "mntr", 4);  // display class
    std::memcpy(p.data() + 16, space, 4);   // data colour space
    std::memcpy(p.data() + 20, "XYZ ", 4);  // connection space
    std::memcpy(p.data() + 36, "acsp", 4);
    std::memcpy(p.data() + 80, "cbi!", 4);  // creator: tells this profile apart
    return p;
}

// A JPEG of `raw` (stored as is) whose EXIF says Orientation 6 (viewers
// turn it 90 degrees clockwise), with camera tags, an ICC profile and XMP.
void write_photo(const fs::path& path, const cv::Mat& raw) {
    ASSERT_TRUE(cv::imwrite(path.string(), raw, {cv::IMWRITE_JPEG_QUALITY, 100}));
    auto image = Exiv2::ImageFactory::open(path.string());
    image->readMetadata();
    Exiv2::ExifData& exif = image->exifData();
    exif["Exif.Image.Make"] = "CbiCam";
    exif["Exif.Image.Model"] = "Model X";
    exif["Exif.Image.Orientation"] = uint16_t(6);
    exif["Exif.Photo.DateTimeOriginal"] = "2024:05:06 07:08:09";
    exif["Exif.Photo.PixelXDimension"] = uint32_t(raw.cols);
    exif["Exif.Photo.PixelYDimension"] = uint32_t(raw.rows);
    image->xmpData()["Xmp.dc.title"] = "lang=\"x-default\" A test photo";
    image->xmpData()["Xmp.tiff.Orientation"] = "6";
    std::vector<std::uint8_t> icc = icc_profile("RGB ");
    Exiv2::DataBuf buf(icc.data(), static_cast<long>(icc.size()));
    image->setIccProfile(buf);
    image->writeMetadata();
}

struct Read {
    Exiv2::ExifData exif;
    std::vector<std::uint8_t> icc;
    Exiv2::XmpData xmp;
};
Read read_back(const fs::path& path) {
    auto image = Exiv2::ImageFactory::open(path.string());
    image->readMetadata();
    Read r{image->exifData(), {}, image->xmpData()};
    if (image->iccProfileDefined())
        r.icc.assign(image->iccProfile()->pData_, image->iccProfile()->pData_ + image->iccProfile()->size_);
    return r;
}
std::string tag(const Exiv2::ExifData& exif, const char* key) {
    const auto it = exif.findKey(Exiv2::ExifKey(key));
    return it == exif.end() ? "(none)" : it->toString();
}
std::string tag(const Exiv2::XmpData& xmp, const char* key) {
    const auto it = xmp.findKey(Exiv2::XmpKey(key));
    return it == xmp.end() ? "(none)" : it->toString();
}

TEST(Metadata, ReadResetsOrientationAndSwapsPixelDimensionsOfAJpeg) {
    ASSERT_TRUE(cbi::metadata_supported());
    TempDir dir;
    write_photo(dir / "photo.jpg", test_image(64, 40));
    const cbi::ImageMetadata m = cbi::read_metadata(bytes_of(dir / "photo.jpg"), "photo.jpg");
    ASSERT_FALSE(m.exif.empty());
    Exiv2::ExifData exif;
    Exiv2::ExifParser::decode(exif, m.exif.data(), static_cast<std::uint32_t>(m.exif.size()));
    EXPECT_EQ(tag(exif, "Exif.Image.Make"), "CbiCam");
    EXPECT_EQ(tag(exif, "Exif.Image.Orientation"), "1");
    EXPECT_EQ(tag(exif, "Exif.Photo.PixelXDimension"), "40");
    EXPECT_EQ(tag(exif, "Exif.Photo.PixelYDimension"), "64");
    EXPECT_EQ(m.icc, icc_profile("RGB "));
    EXPECT_NE(m.xmp.find("A test photo"), std::string::npos);
    EXPECT_EQ(m.xmp.find("Orientation>6<"), std::string::npos) << m.xmp;
    // The pixels decode_image gives are turned as the EXIF said.
    EXPECT_EQ(cbi::read_image(dir / "photo.jpg").size(), cv::Size(40, 64));
}

// Input JPEG with EXIF orientation 6 -> JPEG, PNG, TIFF and WebP outputs
// keep Make/Model/DateTimeOriginal, the ICC profile and XMP; Orientation is
// 1 and the pixels are turned.
TEST(MetadataCli, KeptInJpegPngTiffWebpWithOrientationOneAndTurnedPixels) {
    TempDir dir;
    const cv::Mat raw = test_image(64, 40);
    write_photo(dir / "photo.jpg", raw);
    cv::Mat stored = cv::imread((dir / "photo.jpg").string(), cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION), turned;
    ASSERT_EQ(stored.size(), raw.size());
    cv::rotate(stored, turned, cv::ROTATE_90_CLOCKWISE);
    for (const char* ext : {"jpg", "png", "tif", "webp"}) {
        const fs::path out = dir / (std::string("out.") + ext);
        const auto r = run_cli({(dir / "photo.jpg").string(), "--blur", "1", "-o", out.string()}, dir.path());
        ASSERT_EQ(r.code, 0) << ext << ": " << r.err;
        EXPECT_EQ(r.err, "") << ext;
        const Read back = read_back(out);
        EXPECT_EQ(tag(back.exif, "Exif.Image.Make"), "CbiCam") << ext;
        EXPECT_EQ(tag(back.exif, "Exif.Image.Model"), "Model X") << ext;
        EXPECT_EQ(tag(back.exif, "Exif.Photo.DateTimeOriginal"), "2024:05:06 07:08:09") << ext;
        EXPECT_EQ(tag(back.exif, "Exif.Image.Orientation"), "1") << ext;
        EXPECT_EQ(back.icc, icc_profile("RGB ")) << ext;
        EXPECT_EQ(tag(back.xmp, "Xmp.tiff.Orientation"), "1") << ext;
        EXPECT_NE(tag(back.xmp, "Xmp.dc.title").find("A test photo"), std::string::npos) << ext;
        // The output's pixels: the stored ones turned (OpenCV reads PNG and
        // TIFF without applying any orientation here; JPEG's is now 1).
        const cv::Mat pixels = cv::imread(out.string(), cv::IMREAD_UNCHANGED);
        ASSERT_EQ(pixels.size(), turned.size()) << ext;
        const double tolerance = std::string(ext) == "jpg" ? 3.0 : 0.0;  // mean error of one more JPEG pass
        EXPECT_LE(cv::norm(pixels, turned, cv::NORM_L1) / turned.total() / 3, tolerance) << ext;
    }
    // The pixels of lossless outputs are those of a run with --strip.
    ASSERT_EQ(run_cli({(dir / "photo.jpg").string(), "--blur", "1", "--strip", "-o", (dir / "strip.png").string()},
                      dir.path())
                  .code,
              0);
    EXPECT_EQ(cv::norm(cv::imread((dir / "out.png").string(), cv::IMREAD_UNCHANGED),
                       cv::imread((dir / "strip.png").string(), cv::IMREAD_UNCHANGED), cv::NORM_INF),
              0.0);
}

// A PNG large enough to be deflated in bands (pipeline/png_bands.hpp)
// keeps the metadata as OpenCV's encoding does, and the turned pixels.
TEST(MetadataCli, KeptInAPngDeflatedInBands) {
    TempDir dir;
    const cv::Mat raw = test_image(900, 700);
    write_photo(dir / "photo.jpg", raw);
    cv::Mat stored = cv::imread((dir / "photo.jpg").string(), cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION), turned;
    cv::rotate(stored, turned, cv::ROTATE_90_CLOCKWISE);
    const fs::path out = dir / "out.png";
    const auto r = run_cli({(dir / "photo.jpg").string(), "--blur", "1", "-o", out.string()}, dir.path());
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    const Read back = read_back(out);
    EXPECT_EQ(tag(back.exif, "Exif.Image.Make"), "CbiCam");
    EXPECT_EQ(tag(back.exif, "Exif.Image.Orientation"), "1");
    EXPECT_EQ(back.icc, icc_profile("RGB "));
    EXPECT_NE(tag(back.xmp, "Xmp.dc.title").find("A test photo"), std::string::npos);
    EXPECT_EQ(cv::norm(cv::imread(out.string(), cv::IMREAD_UNCHANGED), turned, cv::NORM_INF), 0.0);
    // The bands' encoding: its first IDAT holds the zlib header alone.
    const std::vector<std::uint8_t> bytes = bytes_of(out);
    const std::uint8_t header_idat[] = {0, 0, 0, 2, 'I', 'D', 'A', 'T', 0x78, 0x01};
    EXPECT_NE(std::search(bytes.begin(), bytes.end(), std::begin(header_idat), std::end(header_idat)), bytes.end());
}

TEST(MetadataCli, StripWritesNone) {
    TempDir dir;
    write_photo(dir / "photo.jpg", test_image(64, 40));
    for (const char* ext : {"jpg", "png", "tif", "webp"}) {
        const fs::path out = dir / (std::string("out.") + ext);
        const auto r =
            run_cli({(dir / "photo.jpg").string(), "--blur", "3", "--strip", "-o", out.string()}, dir.path());
        ASSERT_EQ(r.code, 0) << r.err;
        const Read back = read_back(out);
        EXPECT_EQ(tag(back.exif, "Exif.Image.Make"), "(none)") << ext;
        EXPECT_EQ(tag(back.exif, "Exif.Photo.DateTimeOriginal"), "(none)") << ext;
        EXPECT_TRUE(back.icc.empty()) << ext;
        EXPECT_TRUE(back.xmp.empty()) << ext;
        EXPECT_EQ(cv::imread(out.string(), cv::IMREAD_UNCHANGED).size(), cv::Size(40, 64)) << ext;  // still turned
    }
}

TEST(MetadataCli, BatchKeepsItAndStripDropsIt) {
    TempDir dir;
    fs::create_directories(dir / "in");
    write_photo(dir / "in/a.jpg", test_image(64, 40));
    write_photo(dir / "in/b.jpg", test_image(48, 32));
    const auto kept = run_cli({"--input-dir", (dir / "in").string(), "--output-dir", (dir / "kept").string(),
                               "--format", "png", "--png-compression", "9", "--blur", "3", "--quiet"},
                              dir.path());
    ASSERT_EQ(kept.code, 0) << kept.err;
    EXPECT_EQ(kept.err, "");
    const auto stripped = run_cli({"--input-dir", (dir / "in").string(), "--output-dir", (dir / "stripped").string(),
                                   "--quality", "70", "--strip", "--blur", "3", "--quiet"},
                                  dir.path());
    ASSERT_EQ(stripped.code, 0) << stripped.err;
    for (const char* name : {"a", "b"}) {
        const Read k = read_back(dir / "kept" / (std::string(name) + ".png"));
        EXPECT_EQ(tag(k.exif, "Exif.Image.Model"), "Model X") << name;
        EXPECT_EQ(tag(k.exif, "Exif.Image.Orientation"), "1") << name;
        EXPECT_EQ(k.icc, icc_profile("RGB ")) << name;
        const Read s = read_back(dir / "stripped" / (std::string(name) + ".jpg"));
        EXPECT_TRUE(s.exif.empty() && s.icc.empty() && s.xmp.empty()) << name;
    }
}

// An RGB profile does not describe a gray output: it is left out, the rest kept.
TEST(MetadataCli, AnRgbProfileIsNotPutOnAGrayOutput) {
    TempDir dir;
    write_photo(dir / "photo.jpg", test_image(64, 40));
    const auto r =
        run_cli({(dir / "photo.jpg").string(), "--color", "gray", "-o", (dir / "gray.png").string()}, dir.path());
    ASSERT_EQ(r.code, 0) << r.err;
    const Read back = read_back(dir / "gray.png");
    EXPECT_TRUE(back.icc.empty());
    EXPECT_EQ(tag(back.exif, "Exif.Image.Make"), "CbiCam");
}

// TIFF outputs of every depth keep their layout: the pixels read back exactly.
TEST(Metadata, TiffAndWebpOutputsOfEveryTypeKeepTheirPixels) {
    TempDir dir;
    write_photo(dir / "photo.jpg", test_image(64, 40));
    const cbi::ImageMetadata m = cbi::read_metadata(bytes_of(dir / "photo.jpg"), "photo.jpg");
    for (const int type : {CV_8UC1, CV_8UC3, CV_8UC4, CV_16UC1, CV_16UC3, CV_16UC4, CV_32FC1, CV_32FC3, CV_32FC4}) {
        const cv::Mat image = test_image(37, 23, type);
        for (const char* ext : {"tif", "webp", "png"}) {
            const fs::path out = dir / (std::string("o.") + ext);
            std::error_code ec;
            fs::remove(out, ec);
            try {
                cbi::check_output_format(out, image.type());
            } catch (const cbi::Error&) {
                continue;
            }
            const std::string warning = cbi::write_image_atomic(out, image, {}, m);
            EXPECT_EQ(warning, "") << ext << " " << cv::typeToString(type);
            const cv::Mat back = cv::imread(out.string(), cv::IMREAD_UNCHANGED);
            ASSERT_EQ(back.type(), image.type()) << ext << " " << cv::typeToString(type);
            EXPECT_EQ(cv::norm(back, image, cv::NORM_INF), 0.0) << ext << " " << cv::typeToString(type);
            const Read r = read_back(out);
            EXPECT_EQ(tag(r.exif, "Exif.Image.Make"), "CbiCam") << ext << " " << cv::typeToString(type);
            EXPECT_EQ(r.icc.empty(), image.channels() == 1) << ext << " " << cv::typeToString(type);
        }
    }
}

// A JPEG whose APP1 Exif block is garbage: the pixels are written, with one
// warning naming the file and no metadata.
TEST(MetadataCli, CorruptExifStillWritesThePixelsWithOneWarning) {
    TempDir dir;
    const cv::Mat raw = test_image(64, 40);
    std::vector<std::uint8_t> jpeg;
    ASSERT_TRUE(cv::imencode(".jpg", raw, jpeg));
    // After SOI: APP1 "Exif\0\0" + a TIFF header whose first IFD is far outside.
    std::vector<std::uint8_t> app1 = {'E', 'x', 'i', 'f', 0, 0, 'I', 'I', 42, 0, 0xF0, 0xFF, 0xFF, 0x7F};
    for (int i = 0; i < 40; ++i) app1.push_back(static_cast<std::uint8_t>(0xA5 ^ i));
    const std::size_t len = app1.size() + 2;
    std::vector<std::uint8_t> segment = {0xFF, 0xE1, static_cast<std::uint8_t>(len >> 8),
                                         static_cast<std::uint8_t>(len & 0xFF)};
    segment.insert(segment.end(), app1.begin(), app1.end());
    jpeg.insert(jpeg.begin() + 2, segment.begin(), segment.end());
    {
        std::ofstream f(dir / "bad.jpg", std::ios::binary);
        f.write(reinterpret_cast<const char*>(jpeg.data()), static_cast<std::streamsize>(jpeg.size()));
    }
    EXPECT_THROW(cbi::read_metadata(jpeg, "bad.jpg"), cbi::Error);
    for (const char* ext : {"jpg", "png"}) {
        const fs::path out = dir / (std::string("out.") + ext);
        const auto r = run_cli({(dir / "bad.jpg").string(), "--blur", "1", "-o", out.string()}, dir.path());
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_EQ(r.err.rfind("cbi-filter: warning: " + (dir / "bad.jpg").string() + ": metadata not kept", 0), 0u)
            << r.err;
        EXPECT_EQ(cv::imread(out.string(), cv::IMREAD_UNCHANGED).size(), raw.size()) << ext;
        EXPECT_TRUE(read_back(out).exif.empty()) << ext;
    }
    // Batch: the file is processed, the warning printed once.
    fs::create_directories(dir / "in");
    fs::copy(dir / "bad.jpg", dir / "in/bad.jpg");
    write_photo(dir / "in/good.jpg", raw);
    const auto b = run_cli(
        {"--input-dir", (dir / "in").string(), "--output-dir", (dir / "out").string(), "--blur", "1", "--quiet"},
        dir.path());
    EXPECT_EQ(b.code, 0) << b.err;
    EXPECT_EQ(std::count(b.err.begin(), b.err.end(), '\n'), 1) << b.err;
    EXPECT_NE(b.err.find("warning: " + (dir / "in/bad.jpg").string() + ": metadata not kept"), std::string::npos)
        << b.err;
    EXPECT_TRUE(fs::exists(dir / "out/bad.jpg"));
    EXPECT_EQ(tag(read_back(dir / "out/good.jpg").exif, "Exif.Image.Make"), "CbiCam");
}

// A bad ICC profile (its size field disagrees) and oversized metadata are
// refused by read_metadata; the write path never throws for metadata.
TEST(Metadata, BadPartsAreRefusedAndNeverFailAWrite) {
    TempDir dir;
    const cv::Mat image = test_image(32, 24);
    cbi::ImageMetadata junk;
    junk.exif = {'I', 'I', 42, 0, 8, 0, 0, 0, 0xFF, 0xFF};  // 65535 entries in 2 bytes
    junk.icc = std::vector<std::uint8_t>(200, 0x41);
    junk.xmp = "<x:xmpmeta this is not XML";
    for (const char* ext : {"jpg", "png", "tif", "webp"}) {
        const fs::path out = dir / (std::string("o.") + ext);
        std::string warning;
        EXPECT_NO_THROW(warning = cbi::write_image_atomic(out, image, {}, junk)) << ext;
        EXPECT_EQ(cv::imread(out.string(), cv::IMREAD_UNCHANGED).size(), image.size()) << ext << ": " << warning;
        if (!warning.empty()) {
            EXPECT_EQ(warning.rfind(out.string() + ": metadata not kept", 0), 0u) << warning;
        }
    }
}

#endif  // CBI_TEST_HAVE_EXIV2

}  // namespace
