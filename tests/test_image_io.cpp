// Image file I/O: round trips, header probes, hostile and broken files,
// atomic writes that fail.
#include "pipeline/image_io.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <oneapi/tbb/task_arena.h>
#include <zlib.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "jpeg_bytes.hpp"
#include "pipeline/error.hpp"
#include "pipeline/jpeg_bands.hpp"
#include "pipeline/png_bands.hpp"

namespace fs = std::filesystem;
using cbi::Error;
using cbi::test::with_exif;

namespace {

// A fresh directory per test, removed afterwards.
class TempDir {
public:
    TempDir() {
        std::string templ = (fs::temp_directory_path() / "cbi-io-test-XXXXXX").string();
        if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
        path_ = templ;
    }
    ~TempDir() {
        std::error_code ec;
        fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
        fs::remove_all(path_, ec);
    }
    const fs::path& path() const { return path_; }
    fs::path operator/(const std::string& name) const { return path_ / name; }
    std::vector<std::string> names() const {
        std::vector<std::string> out;
        for (const auto& e : fs::directory_iterator(path_)) out.push_back(e.path().filename().string());
        return out;
    }

private:
    fs::path path_;
};

void write_bytes(const fs::path& p, const std::vector<std::uint8_t>& bytes) {
    std::ofstream f(p, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::uint8_t> encode(const std::string& ext, const cv::Mat& m, const std::vector<int>& params = {}) {
    std::vector<std::uint8_t> buf;
    if (!cv::imencode(ext, m, buf, params)) throw std::runtime_error("imencode " + ext + " failed");
    return buf;
}

// Random values over the depth's range (floats also negative and > 1, which
// only exact float formats preserve).
cv::Mat random_image(int w, int h, int type, unsigned seed) {
    cv::Mat m(h, w, type);
    cv::RNG rng(seed);
    const int d = CV_MAT_DEPTH(type);
    if (d == CV_8U)
        rng.fill(m, cv::RNG::UNIFORM, 0, 256);
    else if (d == CV_16U)
        rng.fill(m, cv::RNG::UNIFORM, 0, 65536);
    else
        rng.fill(m, cv::RNG::UNIFORM, -2.0, 3.0);
    return m;
}

// A smooth image for lossy JPEG comparisons.
cv::Mat gradient_image(int w, int h, int channels) {
    cv::Mat m(h, w, CV_8UC(channels));
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            for (int c = 0; c < channels; ++c)
                m.ptr<std::uint8_t>(y)[x * channels + c] =
                    static_cast<std::uint8_t>((x * 3 + y * 2 + c * 40) % 256 / 2 + 60);
    return m;
}

double max_abs_diff(const cv::Mat& a, const cv::Mat& b) {
    return cv::norm(a, b, cv::NORM_INF);
}

template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "<no cbi::Error thrown>";
}

std::uint32_t crc32(const std::uint8_t* p, std::size_t n) {
    std::uint32_t c = 0xFFFFFFFFu;
    for (std::size_t i = 0; i < n; ++i) {
        c ^= p[i];
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

void put_be32(std::vector<std::uint8_t>& v, std::uint32_t x) {
    for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<std::uint8_t>(x >> s));
}

// Signature + a valid IHDR chunk (correct CRC) claiming w x h, 8-bit RGB,
// + a tiny IDAT and IEND, so only the size is wrong.
std::vector<std::uint8_t> png_claiming(std::uint32_t w, std::uint32_t h) {
    std::vector<std::uint8_t> v = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    auto chunk = [&](const char* type, const std::vector<std::uint8_t>& data) {
        put_be32(v, static_cast<std::uint32_t>(data.size()));
        std::vector<std::uint8_t> td(type, type + 4);
        td.insert(td.end(), data.begin(), data.end());
        v.insert(v.end(), td.begin(), td.end());
        put_be32(v, crc32(td.data(), td.size()));
    };
    std::vector<std::uint8_t> ihdr;
    put_be32(ihdr, w);
    put_be32(ihdr, h);
    ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});
    chunk("IHDR", ihdr);
    chunk("IDAT", {0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01});
    chunk("IEND", {});
    return v;
}

// A little-endian classic TIFF of one uncompressed IFD: the given tags
// (SHORT values below 2^16, else LONG) plus the offsets and byte counts of
// one tile or strip of `data_bytes` zeros. Tags are sorted, as TIFF requires.
std::vector<std::uint8_t> tiny_tiff(std::vector<std::pair<std::uint16_t, std::uint32_t>> tags, bool tiled,
                                    std::uint32_t data_bytes = 1) {
    tags.emplace_back(tiled ? 324 : 273, 0);  // offset, patched below
    tags.emplace_back(tiled ? 325 : 279, data_bytes);
    std::sort(tags.begin(), tags.end());
    std::vector<std::uint8_t> v = {'I', 'I', 42, 0, 8, 0, 0, 0};
    auto le = [&](std::uint32_t x, int n) {
        for (int i = 0; i < n; ++i) v.push_back(static_cast<std::uint8_t>(x >> (8 * i)));
    };
    const std::uint32_t data_at = 8 + 2 + 12 * static_cast<std::uint32_t>(tags.size()) + 4;
    le(static_cast<std::uint32_t>(tags.size()), 2);
    for (auto [tag, value] : tags) {
        if (tag == 273 || tag == 324) value = data_at;
        const bool shrt = value < 65536 && tag != 273 && tag != 324 && tag != 279 && tag != 325;
        le(tag, 2), le(shrt ? 3 : 4, 2), le(1, 4), le(value, 4);
    }
    le(0, 4);
    v.resize(v.size() + data_bytes, 0);
    return v;
}

std::string shared_images_dir() {
    return CBI_SHARED_IMAGES_DIR;
}

std::string type_name(int type) {
    const int d = CV_MAT_DEPTH(type);
    return std::string(d == CV_8U ? "8u" : d == CV_16U ? "16u" : "32f") + "c" + std::to_string(CV_MAT_CN(type));
}

}  // namespace

// ------------------------------------------------------------ round trips

// Extension x type: supported pairs must round-trip (exactly, or within JPEG
// loss); unsupported pairs must be refused with a message naming the file.
struct Format {
    const char* ext;
    bool lossless;
};

class RoundTrip : public ::testing::TestWithParam<std::tuple<Format, int>> {};

TEST_P(RoundTrip, WritesAndReadsBack) {
    const auto [fmt, type] = GetParam();
    TempDir dir;
    const fs::path out = dir / (std::string("img") + fmt.ext);
    cv::Mat src = fmt.lossless ? random_image(37, 23, type, 7u + type) : gradient_image(37, 23, CV_MAT_CN(type));
    if (std::string(fmt.ext) == ".webp" && src.type() == CV_8UC4) {
        // WebP drops the colour of fully transparent pixels (documented): keep alpha >= 1.
        for (auto it = src.begin<cv::Vec4b>(); it != src.end<cv::Vec4b>(); ++it)
            (*it)[3] = std::max<std::uint8_t>((*it)[3], 1);
    }

    bool supported = true;
    try {
        cbi::check_output_format(out, src.type());
    } catch (const Error& e) {
        supported = false;
        EXPECT_NE(std::string(e.what()).find(out.string()), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("cannot store"), std::string::npos) << e.what();
        // write_image_atomic refuses the same way and creates nothing.
        EXPECT_EQ(error_of([&] { cbi::write_image_atomic(out, src); }), std::string(e.what()));
        EXPECT_TRUE(dir.names().empty());
    }
    if (!supported) return;

    cbi::write_image_atomic(out, src);
    EXPECT_EQ(dir.names(), std::vector<std::string>{out.filename().string()});  // no temporaries left
    const cv::Mat back = cbi::read_image(out);
    ASSERT_EQ(back.type(), src.type()) << cv::typeToString(back.type());
    ASSERT_EQ(back.size(), src.size());
    if (fmt.lossless) {
        EXPECT_EQ(max_abs_diff(back, src), 0.0);
    } else {
        EXPECT_LE(max_abs_diff(back, src), 12.0);  // JPEG quality 95 on a smooth image
        EXPECT_LT(cv::norm(back, src, cv::NORM_L1) / static_cast<double>(src.total() * src.channels()), 2.0);
    }
}

INSTANTIATE_TEST_SUITE_P(Formats, RoundTrip,
                         ::testing::Combine(::testing::Values(Format{".png", true}, Format{".tiff", true},
                                                              Format{".tif", true}, Format{".jpg", false},
                                                              Format{".bmp", true}, Format{".webp", true},
                                                              Format{".pgm", true}, Format{".ppm", true},
                                                              Format{".pfm", true}, Format{".exr", true}),
                                            ::testing::Values(CV_8UC1, CV_8UC3, CV_8UC4, CV_16UC1, CV_16UC3, CV_16UC4,
                                                              CV_32FC1, CV_32FC3, CV_32FC4)),
                         [](const auto& info) {
                             std::string e = std::get<0>(info.param).ext + 1;
                             return e + "_" + type_name(std::get<1>(info.param));
                         });

// A JPEG taller than one band is encoded band by band on all cores: the
// bytes are what libjpeg writes for the whole image with that restart
// interval, and they decode to the pixels of OpenCV's one encoding.
TEST(ImageIo, TallJpegsAreEncodedInBandsAsLibjpegWithRestartMarkers) {
    cv::RNG rng(7);
    for (const auto& [w, h, ch] : std::vector<std::tuple<int, int, int>>{
             {1001, 517, 3}, {777, 1025, 1}, {31, 600, 3}, {100, 257, 3}, {100, 256, 3}, {4000, 8, 3}}) {
        SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h) + "x" + std::to_string(ch));
        cv::Mat img(h, w, CV_8UC(ch));
        cv::randu(img, 0, 256);
        cv::GaussianBlur(img, img, {5, 5}, 0);  // photo-like, not pure noise
        for (const int quality : {95, 50}) {
            cbi::WriteOptions options;
            options.quality = quality;
            const std::vector<std::uint8_t> ours = cbi::encode_image("x.jpg", img, options).bytes;
            std::vector<std::uint8_t> whole, restarts;
            ASSERT_TRUE(cv::imencode(".jpg", img, whole, {cv::IMWRITE_JPEG_QUALITY, quality}));
            const int mcu = ch == 3 ? 16 : 8;
            const int interval = (w + mcu - 1) / mcu * (cbi::kJpegBandRows / mcu);
            ASSERT_TRUE(cv::imencode(".jpg", img, restarts,
                                     {cv::IMWRITE_JPEG_QUALITY, quality, cv::IMWRITE_JPEG_RST_INTERVAL, interval}));
            if (h <= cbi::kJpegBandRows) {
                EXPECT_EQ(ours, whole);  // one band: OpenCV's own encoding
            } else {
                EXPECT_EQ(ours, restarts);
            }
            EXPECT_EQ(cv::norm(cv::imdecode(ours, cv::IMREAD_UNCHANGED), cv::imdecode(whole, cv::IMREAD_UNCHANGED),
                               cv::NORM_INF),
                      0.0);
        }
    }
}

// A PNG's chunks checked with zlib alone (not libpng): the signature, every
// chunk's CRC, IHDR, and the IDATs' zlib stream inflated whole (which checks
// its Adler-32) to `h` rows of a filter byte and the row's bytes.
void expect_valid_png(const std::vector<std::uint8_t>& png, int w, int h, int bytes_per_pixel) {
    const std::uint8_t signature[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    ASSERT_GE(png.size(), 8u);
    ASSERT_TRUE(std::equal(std::begin(signature), std::end(signature), png.begin()));
    const auto get32 = [&](std::size_t at) {
        return std::uint32_t{png[at]} << 24 | std::uint32_t{png[at + 1]} << 16 | std::uint32_t{png[at + 2]} << 8 |
               png[at + 3];
    };
    std::vector<std::uint8_t> idat;
    std::vector<std::string> types;
    for (std::size_t at = 8; at < png.size();) {
        ASSERT_LE(at + 12, png.size());
        const std::uint32_t len = get32(at);
        ASSERT_LE(at + 12 + len, png.size());
        const std::string type(png.begin() + static_cast<std::ptrdiff_t>(at + 4),
                               png.begin() + static_cast<std::ptrdiff_t>(at + 8));
        EXPECT_EQ(get32(at + 8 + len), ::crc32(0, png.data() + at + 4, 4 + len)) << type;
        if (type == "IDAT")
            idat.insert(idat.end(), png.begin() + static_cast<std::ptrdiff_t>(at + 8),
                        png.begin() + static_cast<std::ptrdiff_t>(at + 8 + len));
        if (types.empty() || types.back() != type) types.push_back(type);
        at += 12 + len;
    }
    EXPECT_EQ(types, (std::vector<std::string>{"IHDR", "IDAT", "IEND"}));
    EXPECT_EQ(get32(16), static_cast<std::uint32_t>(w));
    EXPECT_EQ(get32(20), static_cast<std::uint32_t>(h));
    const std::size_t row = 1 + static_cast<std::size_t>(w) * static_cast<std::size_t>(bytes_per_pixel);
    std::vector<std::uint8_t> raw(row * static_cast<std::size_t>(h) + 1);
    uLongf n = raw.size();
    ASSERT_EQ(::uncompress(raw.data(), &n, idat.data(), idat.size()), Z_OK);
    ASSERT_EQ(n, row * static_cast<std::size_t>(h));
    for (int y = 0; y < h; ++y) EXPECT_LE(raw[row * static_cast<std::size_t>(y)], 4) << "row " << y;
}

// A PNG larger than one band at the default level is deflated band by band
// on all cores into one zlib stream: a valid file (checked with zlib), the
// same pixels back through OpenCV, the same bytes on one core and all, and
// about the size of OpenCV's own encoding. One band, or an explicit level,
// is OpenCV's encoding.
TEST(ImageIo, LargePngsAreDeflatedInBandsIntoOneValidStream) {
    cv::RNG rng(8);
    for (const auto& [w, h, type] : std::vector<std::tuple<int, int, int>>{{1001, 1517, CV_8UC3},
                                                                           {777, 2025, CV_8UC1},
                                                                           {600, 900, CV_8UC4},
                                                                           {513, 1100, CV_16UC3},
                                                                           {1, 600000, CV_8UC1},
                                                                           {3000, 120, CV_16UC4},
                                                                           {100, 100, CV_8UC3}}) {
        SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h) + " " + cv::typeToString(type));
        cv::Mat big(h, w + 2, type);
        cv::randu(big, 0, CV_MAT_DEPTH(type) == CV_8U ? 256 : 65536);
        cv::GaussianBlur(big, big, {5, 5}, 0);       // photo-like, not pure noise
        const cv::Mat img = big.colRange(1, w + 1);  // rows with gaps between them
        const std::vector<std::uint8_t> ours = cbi::encode_image("x.png", img, {}).bytes;
        std::vector<std::uint8_t> whole;
        ASSERT_TRUE(cv::imencode(".png", img, whole));
        const std::size_t row_bytes = 1 + static_cast<std::size_t>(w) * img.elemSize();
        if (h <= cbi::png_band_rows(row_bytes)) {
            EXPECT_EQ(ours, whole);  // one band: OpenCV's own encoding
            continue;
        }
        expect_valid_png(ours, w, h, static_cast<int>(img.elemSize()));
        const cv::Mat back = cv::imdecode(ours, cv::IMREAD_UNCHANGED);
        ASSERT_EQ(back.type(), type);
        EXPECT_EQ(cv::norm(back, img, cv::NORM_INF), 0.0);
        EXPECT_LE(ours.size(), whole.size() + whole.size() / 50);
        EXPECT_NE(ours, whole);  // the bands' encoding, not OpenCV's
        std::vector<std::uint8_t> one_thread;
        tbb::task_arena(1).execute([&] { one_thread = *cbi::encode_png_bands(img); });
        EXPECT_EQ(ours, one_thread);  // all cores'
        cbi::WriteOptions level1;
        level1.png_compression = 1;
        std::vector<std::uint8_t> explicit_level;
        ASSERT_TRUE(cv::imencode(".png", img, explicit_level, {cv::IMWRITE_PNG_COMPRESSION, 1}));
        EXPECT_EQ(cbi::encode_image("x.png", img, level1).bytes, explicit_level);
    }
}

TEST(ImageIo, SupportMatrixIsWhatTheHeaderDocuments) {
    auto ok = [](const char* name, int type) {
        try {
            cbi::check_output_format(name, type);
            return true;
        } catch (const Error&) {
            return false;
        }
    };
    EXPECT_TRUE(ok("a.png", CV_16UC4));
    EXPECT_FALSE(ok("a.png", CV_32FC3));
    EXPECT_TRUE(ok("a.TIFF", CV_32FC4));  // extension case does not matter
    EXPECT_TRUE(ok("a.jpeg", CV_8UC3));
    EXPECT_FALSE(ok("a.jpg", CV_16UC3));
    EXPECT_FALSE(ok("a.jpg", CV_8UC4));
    EXPECT_TRUE(ok("a.exr", CV_32FC4));
    EXPECT_FALSE(ok("a.webp", CV_8UC1));
    EXPECT_FALSE(ok("a.png", CV_16SC1));
}

TEST(ImageIo, WriteErrorsNameThePathAndSuggestAFormat) {
    TempDir dir;
    const cv::Mat f32 = random_image(8, 8, CV_32FC3, 1);
    const std::string png = error_of([&] { cbi::write_image_atomic(dir / "f.png", f32); });
    EXPECT_NE(png.find((dir / "f.png").string() + ": PNG cannot store 32-bit float images"), std::string::npos) << png;
    EXPECT_TRUE(png.ends_with("; use .tiff, .pfm or .exr")) << png;
    // Float to JPEG once suggested .png, which cannot hold float either.
    const std::string jpg32 = error_of([&] { cbi::write_image_atomic(dir / "f.jpg", f32); });
    EXPECT_TRUE(jpg32.ends_with("JPEG cannot store 32-bit float images; use .tiff, .pfm or .exr")) << jpg32;

    const std::string jpg = error_of([&] { cbi::write_image_atomic(dir / "g.jpg", random_image(8, 8, CV_16UC1, 2)); });
    EXPECT_TRUE(jpg.ends_with("g.jpg: JPEG cannot store 16-bit images; use .png, .tiff, .pgm or .pnm")) << jpg;

    const std::string unknown = error_of([&] { cbi::write_image_atomic(dir / "h.xyz", f32); });
    EXPECT_NE(unknown.find("h.xyz: unknown image extension '.xyz'"), std::string::npos) << unknown;
    const std::string none = error_of([&] { cbi::write_image_atomic(dir / "noext", f32); });
    EXPECT_NE(none.find("noext: no file extension"), std::string::npos) << none;

    const std::string empty = error_of([&] { cbi::write_image_atomic(dir / "e.png", cv::Mat()); });
    EXPECT_NE(empty.find("e.png: cannot write an empty image"), std::string::npos) << empty;
    EXPECT_TRUE(dir.names().empty());
}

// ------------------------------------------------------------ real photos

TEST(ImageIo, ReadsRealPhotosLikeOpenCv) {
    std::vector<fs::path> files;
    for (const std::string& d : {std::string(CBI_SAMPLES_DIR), shared_images_dir()}) {
        if (!fs::is_directory(d)) continue;
        for (const auto& e : fs::directory_iterator(d)) {
            const std::string ext = e.path().extension().string();
            if (ext == ".jpg" || ext == ".png" || ext == ".tif" || ext == ".tiff") files.push_back(e.path());
        }
    }
    if (files.empty()) GTEST_SKIP() << "no photos in " << CBI_SAMPLES_DIR << " or " << shared_images_dir();
    for (const auto& f : files) {
        SCOPED_TRACE(f.string());
        const cv::Mat ours = cbi::read_image(f);
        const cv::Mat ref = cv::imread(f.string(), cv::IMREAD_UNCHANGED);
        ASSERT_FALSE(ref.empty());
        ASSERT_EQ(ours.type(), ref.type());
        ASSERT_EQ(ours.size(), ref.size());
        EXPECT_EQ(max_abs_diff(ours, ref), 0.0);
        // The probe agrees with the decoder.
        const auto bytes = cbi::read_file(f);
        const cbi::ImageHeader h = cbi::probe_image(bytes, f.string());
        EXPECT_EQ(h.width, static_cast<std::uint64_t>(ref.cols));
        EXPECT_EQ(h.height, static_cast<std::uint64_t>(ref.rows));
    }
}

// ------------------------------------------------------------ header probes

TEST(ImageIo, ProbeReadsEveryFormatsHeader) {
    const cv::Mat rgb = random_image(53, 29, CV_8UC3, 3);
    cv::Mat f32;
    rgb.convertTo(f32, CV_32F, 1 / 255.0);
    cv::Mat rgba;
    cv::Mat channels[] = {rgb, rgb};
    const int from_to[] = {0, 0, 1, 1, 2, 2, 3, 3};
    rgba.create(rgb.size(), CV_8UC4);
    cv::mixChannels(channels, 2, &rgba, 1, from_to, 4);
    struct Case {
        const char* ext;
        cv::Mat image;
        std::vector<int> params;
        const char* format;
    };
    const std::vector<Case> cases = {
        {".png", rgb, {}, "PNG"},
        {".jpg", rgb, {}, "JPEG"},
        {".jpg", rgb, {cv::IMWRITE_JPEG_PROGRESSIVE, 1}, "JPEG"},
        {".tiff", rgb, {}, "TIFF"},
        {".bmp", rgb, {}, "BMP"},
        {".webp", rgb, {}, "WebP"},                               // lossless: VP8L
        {".webp", rgb, {cv::IMWRITE_WEBP_QUALITY, 80}, "WebP"},   // lossy: VP8
        {".webp", rgba, {cv::IMWRITE_WEBP_QUALITY, 80}, "WebP"},  // lossy with alpha: VP8X
        {".ppm", rgb, {}, "PNM"},
        {".pgm", random_image(53, 29, CV_8UC1, 4), {cv::IMWRITE_PXM_BINARY, 0}, "PNM"},  // ASCII P2
        {".pam", rgb, {}, "PAM"},
        {".pfm", f32, {}, "PFM"},
        {".exr", f32, {}, "OpenEXR"},
        {".hdr", f32, {}, "Radiance HDR"},
        {".ras", rgb, {}, "Sun raster"},
        {".png", random_image(53, 29, CV_16UC1, 5), {}, "PNG"},
        {".png", rgba, {}, "PNG"},
        {".png", random_image(53, 29, CV_16UC4, 6), {}, "PNG"},
        {".jpg", random_image(53, 29, CV_8UC1, 7), {}, "JPEG"},
        {".tiff", random_image(53, 29, CV_16UC4, 8), {}, "TIFF"},
        {".tiff", random_image(53, 29, CV_32FC1, 9), {}, "TIFF"},
        {".tiff", random_image(53, 29, CV_8UC1, 10), {}, "TIFF"},
        {".webp", rgba, {}, "WebP"},  // lossless with alpha: VP8L
        {".pgm", random_image(53, 29, CV_16UC1, 11), {}, "PNM"},
        {".pfm", random_image(53, 29, CV_32FC1, 12), {}, "PFM"},
        {".exr", random_image(53, 29, CV_32FC1, 13), {}, "OpenEXR"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(std::string(c.ext) + " params " + std::to_string(c.params.size()));
        const auto bytes = encode(c.ext, c.image, c.params);
        const cbi::ImageHeader h = cbi::probe_image(bytes, "mem");
        EXPECT_STREQ(h.format, c.format);
        EXPECT_EQ(h.width, 53u);
        EXPECT_EQ(h.height, 29u);
        const cv::Mat back = cbi::decode_image(bytes, "mem");
        EXPECT_EQ(back.cols, 53);
        EXPECT_EQ(back.rows, 29);
        // What the header says about channels and samples is what OpenCV decodes.
        EXPECT_EQ(h.channels, static_cast<std::uint32_t>(back.channels()));
        EXPECT_EQ(h.bytes_per_sample, back.elemSize1());
        EXPECT_EQ(h.decoded_bytes(), back.total() * back.elemSize());
    }
}

// probe_file reads a header from the first 256 KiB, and the whole file where
// the header lies beyond them: the same answer as probe_image of all bytes.
TEST(ImageIo, ProbeFileReadsTheHeadOrTheWholeFile) {
    TempDir dir;
    const cv::Mat big = random_image(700, 500, CV_8UC3, 33);  // 1 MB of samples
    write_bytes(dir / "a.png", encode(".png", big));
    write_bytes(dir / "b.tiff", encode(".tiff", big));  // libtiff writes its directory after the strips
    // A JPEG whose frame header follows 320 KiB of APP2 segments.
    const auto jpg = encode(".jpg", gradient_image(64, 48, 3));
    std::vector<std::uint8_t> padded(jpg.begin(), jpg.begin() + 2);
    for (int k = 0; k < 5; ++k) {
        padded.insert(padded.end(), {0xFF, 0xE2, 0xFF, 0xFF});
        padded.insert(padded.end(), 0xFFFF - 2, static_cast<std::uint8_t>('p'));
    }
    padded.insert(padded.end(), jpg.begin() + 2, jpg.end());
    write_bytes(dir / "c.jpg", padded);
    for (const char* name : {"a.png", "b.tiff", "c.jpg"}) {
        SCOPED_TRACE(name);
        const cbi::ImageHeader all = cbi::probe_image(cbi::read_file(dir / name), name);
        const cbi::ImageHeader head = cbi::probe_file(dir / name);
        EXPECT_EQ(std::string(head.format), std::string(all.format));
        EXPECT_EQ(head.width, all.width);
        EXPECT_EQ(head.height, all.height);
        EXPECT_EQ(head.channels, all.channels);
    }
    EXPECT_EQ(cbi::probe_file(dir / "c.jpg").width, 64u);
    EXPECT_EQ(error_of([&] { cbi::probe_file(dir / "none.png"); }), (dir / "none.png").string() + ": no such file");
}

TEST(ImageIo, ProbeReadsBigTiff) {
    // Little-endian BigTIFF: header (16 bytes), IFD at 16 with 2 entries:
    // ImageWidth LONG8 = 70000, ImageLength LONG = 50000.
    std::vector<std::uint8_t> b = {'I', 'I', 43, 0, 8, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0};
    auto le = [&](std::uint64_t v, int n) {
        for (int i = 0; i < n; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
    };
    le(2, 8);
    le(256, 2), le(16, 2), le(1, 8), le(70000, 8);
    le(257, 2), le(4, 2), le(1, 8), le(50000, 8);
    le(0, 8);
    const cbi::ImageHeader h = cbi::probe_image(b, "big.tif");
    EXPECT_STREQ(h.format, "TIFF");
    EXPECT_EQ(h.width, 70000u);
    EXPECT_EQ(h.height, 50000u);
    const std::string e = error_of([&] { cbi::decode_image(b, "big.tif"); });
    EXPECT_NE(e.find("big.tif: image is 70000x50000 = 3500000000 pixels, larger than --max-pixels 268435456"),
              std::string::npos)
        << e;
}

// ------------------------------------------------------------ hostile input

TEST(ImageIo, RefusesDecompressionBombBeforeDecoding) {
    TempDir dir;
    const fs::path p = dir / "bomb.png";
    write_bytes(p, png_claiming(100000, 100000));
    // The header is valid PNG: the probe sees the claimed size.
    const auto bytes = cbi::read_file(p);
    EXPECT_EQ(cbi::probe_image(bytes, p.string()).width, 100000u);
    // A 3e10-byte allocation would fail or take seconds; the refusal is immediate.
    const std::string e = error_of([&] { cbi::read_image(p); });
    EXPECT_EQ(e, p.string() + ": image is 100000x100000 = 10000000000 pixels, larger than --max-pixels 268435456");
    // With the pixel limit lifted, the memory budget refuses it; with both
    // lifted, its 8 bytes of compressed data cannot hold 3e10 bytes.
    EXPECT_EQ(error_of([&] { cbi::read_image(p, std::uint64_t{1} << 40); }),
              p.string() +
                  ": image is 100000x100000 x 3 channels x 1 byte = 30000000000 bytes decoded, larger than "
                  "--max-memory 4294967296");
    EXPECT_EQ(
        error_of([&] { cbi::read_image(p, std::uint64_t{1} << 40, ~std::uint64_t{0}); }),
        p.string() +
            ": truncated PNG data (100000x100000 needs at least 29069767 bytes of compressed data, the file has 8)");
    // The limit is the caller's: a smaller one refuses a normal image too.
    const fs::path small = dir / "small.png";
    write_bytes(small, encode(".png", random_image(20, 10, CV_8UC1, 5)));
    EXPECT_EQ(cbi::read_image(small, 200).total(), 200u);
    EXPECT_NE(error_of([&] {
                  cbi::read_image(small, 199);
              }).find("image is 20x10 = 200 pixels, larger than --max-pixels 199"),
              std::string::npos);
}

TEST(ImageIo, RefusesHugeJpegFrameBeforeDecoding) {
    auto jpg = encode(".jpg", gradient_image(16, 16, 3));
    // Patch the SOF0 frame size to 60000x60000.
    for (std::size_t i = 2; i + 9 < jpg.size(); ++i)
        if (jpg[i] == 0xFF && jpg[i + 1] == 0xC0) {
            jpg[i + 5] = jpg[i + 7] = 0xEA;
            jpg[i + 6] = jpg[i + 8] = 0x60;
            break;
        }
    const std::string e = error_of([&] { cbi::decode_image(jpg, "huge.jpg"); });
    EXPECT_NE(e.find("huge.jpg: image is 60000x60000 = 3600000000 pixels"), std::string::npos) << e;
    // With cbi's limits lifted, OpenCV's own limit (2^30 pixels) still refuses
    // it before allocating, and the message says which limit.
    const std::string cv_limit =
        error_of([&] { cbi::decode_image(jpg, "huge.jpg", std::uint64_t{1} << 40, ~std::uint64_t{0}); });
    EXPECT_EQ(cv_limit.rfind("huge.jpg: image is 60000x60000, over OpenCV's decoder limits", 0), 0u) << cv_limit;
}

TEST(ImageIo, HostileTiffTilesAndStripsAreRefusedFromTheHeader) {
    // 162 bytes declaring 16384x16384 tiles for a 1x1 image took 1.1 GB and
    // seconds to decode, whatever --max-pixels said. The probe refuses it,
    // so no decoder runs.
    const auto tiles =
        tiny_tiff({{256, 1}, {257, 1}, {258, 8}, {259, 1}, {262, 1}, {277, 1}, {322, 16384}, {323, 16384}}, true);
    const std::string tile_error = "t.tif: TIFF tiles of 16384x16384 are out of proportion to the 1x1 image";
    EXPECT_EQ(error_of([&] { cbi::probe_image(tiles, "t.tif"); }),
              tile_error + " (cbi allows the image rounded up to 16 pixels a side, or 2^22 pixels)");
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(error_of([&] { cbi::decode_image(tiles, "t.tif", 1); }).rfind(tile_error, 0), 0u);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
    // libtiff reads a size tag of any integer type: the same tile length as
    // SSHORT is the same bomb (a fuzzer's find), and a negative one is refused.
    auto signed_length = tiles;
    for (std::size_t e = 10; e + 12 <= signed_length.size(); e += 12)
        if (signed_length[e] == (323 & 0xFF) && signed_length[e + 1] == (323 >> 8)) signed_length[e + 2] = 8;
    EXPECT_EQ(error_of([&] { cbi::decode_image(signed_length, "t.tif", 1); }).rfind(tile_error, 0), 0u);
    for (std::size_t e = 10; e + 12 <= signed_length.size(); e += 12)
        if (signed_length[e] == (323 & 0xFF) && signed_length[e + 1] == (323 >> 8)) signed_length[e + 9] = 0xFF;
    EXPECT_EQ(error_of([&] { cbi::probe_image(signed_length, "t.tif"); }).rfind("t.tif: TIFF tag 323 is negative", 0),
              0u);
    // Tall thin tiles, and strips (RowsPerStrip) far past the image's height.
    const auto thin = tiny_tiff({{256, 16}, {257, 16}, {258, 8}, {262, 1}, {322, 16}, {323, 1u << 20}}, true);
    EXPECT_EQ(error_of([&] {
                  cbi::decode_image(thin, "thin.tif");
              }).rfind("thin.tif: TIFF tiles of 16x1048576 are out of proportion to the 16x16 image", 0),
              0u);
    const auto strips = tiny_tiff({{256, 1}, {257, 1}, {258, 8}, {262, 1}, {278, 1u << 23}}, false);
    EXPECT_EQ(error_of([&] {
                  cbi::decode_image(strips, "s.tif");
              }).rfind("s.tif: TIFF strips of 8388608 rows are out of proportion to the 1x1 image", 0),
              0u);
    // The message is one line.
    EXPECT_EQ(error_of([&] { cbi::decode_image(strips, "s.tif"); }).find('\n'), std::string::npos);

    // Ordinary layouts pass: tiles of 256x256 on a small image, one strip of
    // "all rows" (2^32 - 1), strips of 16 rows; decoded_bytes and the tile
    // buffer (OpenCV's RGBA tile plus libtiff's tile) follow the header.
    const auto small = tiny_tiff({{256, 10}, {257, 10}, {258, 8}, {262, 1}, {277, 1}, {322, 256}, {323, 256}}, true);
    const cbi::ImageHeader hs = cbi::probe_image(small, "small.tif");
    EXPECT_EQ(hs.decoded_bytes(), 100u);
    EXPECT_EQ(hs.scratch_bytes, 256u * 256 * (4 + 1));
    const auto rgb16 = tiny_tiff({{256, 30}, {257, 20}, {258, 16}, {262, 2}, {277, 3}, {278, 0xFFFFFFFFu}}, false);
    const cbi::ImageHeader h16 = cbi::probe_image(rgb16, "rgb16.tif");
    EXPECT_EQ(h16.channels, 3u);
    EXPECT_EQ(h16.bytes_per_sample, 2u);
    EXPECT_EQ(h16.decoded_bytes(), 30u * 20 * 3 * 2);
    EXPECT_EQ(h16.scratch_bytes, 30u * 20 * (6 + 6));
    EXPECT_NO_THROW(
        cbi::probe_image(tiny_tiff({{256, 5000}, {257, 3000}, {258, 8}, {262, 1}, {278, 16}}, false), "ok.tif"));

    // The memory budget counts the tile or strip buffers: a real TIFF (OpenCV
    // writes strips) passes with exactly image + buffers and fails one byte under.
    const auto real = encode(".tiff", random_image(64, 48, CV_8UC3, 21));
    const cbi::ImageHeader hr = cbi::probe_image(real, "r.tif");
    ASSERT_EQ(hr.decoded_bytes(), 64u * 48 * 3);
    ASSERT_GT(hr.scratch_bytes, 0u);
    const std::uint64_t budget = hr.decoded_bytes() + hr.scratch_bytes;
    EXPECT_EQ(cbi::decode_image(real, "r.tif", cbi::default_max_pixels, budget).cols, 64);
    EXPECT_EQ(error_of([&] { cbi::decode_image(real, "r.tif", cbi::default_max_pixels, budget - 1); }),
              "r.tif: image is 64x48 x 3 channels x 1 byte = 9216 bytes decoded + " + std::to_string(hr.scratch_bytes) +
                  " bytes of TIFF tile/strip buffers, larger than --max-memory " + std::to_string(budget - 1));
}

TEST(ImageIo, MemoryBudgetIsCheckedBeforeDecoding) {
    // A PNG header declaring 16384x16384 RGB: 805 MB decoded, within the
    // pixel limit (2^28). A budget below that refuses it without decoding.
    const auto png = png_claiming(16384, 16384);
    const cbi::ImageHeader h = cbi::probe_image(png, "z.png");
    EXPECT_EQ(h.channels, 3u);
    EXPECT_EQ(h.bytes_per_sample, 1u);
    EXPECT_EQ(h.decoded_bytes(), 805306368u);
    EXPECT_EQ(error_of([&] { cbi::decode_image(png, "z.png", cbi::default_max_pixels, 100u << 20); }),
              "z.png: image is 16384x16384 x 3 channels x 1 byte = 805306368 bytes decoded, larger than --max-memory "
              "104857600");
    // Within the budget, its 8 bytes of compressed data cannot hold the image
    // (deflate expands at most 1032:1), so it is refused before libpng runs.
    EXPECT_EQ(error_of([&] { cbi::decode_image(png, "z.png"); }),
              "z.png: truncated PNG data (16384x16384 needs at least 780335 bytes of compressed data, the file has 8)");
    // A real PNG of zeros is far inside that bound and decodes.
    const cv::Mat zeros = cv::Mat::zeros(1024, 1024, CV_8UC1);
    const auto zpng = encode(".png", zeros, {cv::IMWRITE_PNG_COMPRESSION, 9});
    EXPECT_EQ(max_abs_diff(cbi::decode_image(zpng, "zeros.png"), zeros), 0.0);

    // The budget is on the decoded size (16-bit RGBA: 8 bytes a pixel):
    // exactly enough passes, one byte less is refused.
    const cv::Mat img = random_image(20, 10, CV_16UC4, 22);
    const auto bytes = encode(".png", img);
    EXPECT_EQ(max_abs_diff(cbi::decode_image(bytes, "a.png", 200, 1600), img), 0.0);
    EXPECT_EQ(error_of([&] { cbi::decode_image(bytes, "a.png", 200, 1599); }),
              "a.png: image is 20x10 x 4 channels x 2 bytes = 1600 bytes decoded, larger than --max-memory 1599");
    // read_image takes the same budget.
    TempDir dir;
    write_bytes(dir / "a.png", bytes);
    EXPECT_NE(error_of([&] { cbi::read_image(dir / "a.png", 200, 1599); }).find("larger than --max-memory 1599"),
              std::string::npos);
}

TEST(ImageIo, DeclaredSizeLargerThanTheDataIsRefused) {
    // Uncompressed formats: the header's size needs a known number of bytes.
    // A BMP whose header is patched to 16384x16384 holds 3 rows' worth.
    auto bmp = encode(".bmp", random_image(64, 3, CV_8UC3, 23));
    for (int at : {18, 22}) bmp[at] = 0x00, bmp[at + 1] = 0x40, bmp[at + 2] = bmp[at + 3] = 0;
    EXPECT_EQ(error_of([&] { cbi::decode_image(bmp, "b.bmp"); }),
              "b.bmp: truncated BMP data (16384x16384 needs at least 805306368 bytes, the file has 576)");
    // A BMP cut inside its pixels: refused (OpenCV decoded it, garbage-filled).
    const auto full = encode(".bmp", random_image(24, 10, CV_8UC3, 24));
    const std::vector<std::uint8_t> cut(full.begin(), full.end() - 1);
    EXPECT_EQ(error_of([&] { cbi::decode_image(cut, "c.bmp"); }),
              "c.bmp: truncated BMP data (24x10 needs at least 720 bytes, the file has 719)");

    // Netpbm: binary P5 with 4 bytes of samples, ASCII P2 (a digit and a
    // separator per sample at least), P4 bitmap, PFM and PAM.
    auto text = [](const std::string& t) { return std::vector<std::uint8_t>(t.begin(), t.end()); };
    EXPECT_EQ(error_of([&] { cbi::decode_image(text("P5\n16384 16384\n255\n\x01\x02\x03\x04"), "a.pgm"); }),
              "a.pgm: truncated PNM data (16384x16384 needs at least 268435456 bytes, the file has 4)");
    EXPECT_EQ(error_of([&] { cbi::decode_image(text("P2\n16384 16384\n255\n0 1 2 3\n"), "b.pgm"); }),
              "b.pgm: truncated PNM data (16384x16384 needs at least 536870912 bytes, the file has 9)");
    EXPECT_EQ(error_of([&] { cbi::decode_image(text("P4\n100 10\n" + std::string(129, '\xff')), "c.pbm"); }),
              "c.pbm: truncated PNM data (100x10 needs at least 130 bytes, the file has 129)");
    EXPECT_EQ(cbi::decode_image(text("P4\n100 10\n" + std::string(130, '\xff')), "c.pbm").rows, 10);
    const auto pfm = encode(".pfm", random_image(16, 8, CV_32FC3, 25));
    const std::vector<std::uint8_t> pfm_cut(pfm.begin(), pfm.end() - 4);
    EXPECT_EQ(error_of([&] { cbi::decode_image(pfm_cut, "d.pfm"); }),
              "d.pfm: truncated PFM data (16x8 needs at least 1536 bytes, the file has 1532)");
    const auto pam = encode(".pam", random_image(16, 8, CV_8UC4, 26));
    const std::vector<std::uint8_t> pam_cut(pam.begin(), pam.end() - 1);
    EXPECT_EQ(error_of([&] { cbi::decode_image(pam_cut, "e.pam"); }),
              "e.pam: truncated PAM data (16x8 needs at least 512 bytes, the file has 511)");

    // Sun raster, uncompressed: patched to 16384x16384.
    auto ras = encode(".ras", random_image(16, 4, CV_8UC3, 27));
    ASSERT_EQ(ras[20] | ras[21] | ras[22], 0);
    for (int at : {4, 8}) ras[at] = 0, ras[at + 1] = 0, ras[at + 2] = 0x40, ras[at + 3] = 0;
    EXPECT_EQ(error_of([&] {
                  cbi::decode_image(ras, "f.ras");
              }).rfind("f.ras: truncated Sun raster data (16384x16384 needs at least 805306368 bytes", 0),
              0u);
}

TEST(ImageIo, JpegExifOrientationIsApplied) {
    // Viewers show a JPEG turned as its EXIF orientation says.
    const cv::Mat colour = gradient_image(40, 24, 3);
    cv::Mat gray;
    cv::extractChannel(colour, gray, 1);
    for (const cv::Mat& src : {colour, gray}) {
        SCOPED_TRACE(src.channels());
        const auto jpg = encode(".jpg", src);
        const cv::Mat plain = cbi::decode_image(jpg, "p.jpg");
        ASSERT_EQ(plain.type(), src.type());  // gray stays gray, colour colour
        // 6: rotate 90 degrees clockwise; 3: 180; 8: 90 counter-clockwise.
        for (auto [orientation, turn] : {std::pair{6, cv::ROTATE_90_CLOCKWISE}, std::pair{3, cv::ROTATE_180},
                                         std::pair{8, cv::ROTATE_90_COUNTERCLOCKWISE}}) {
            SCOPED_TRACE(orientation);
            const auto exif = with_exif(jpg, static_cast<std::uint16_t>(orientation));
            const cv::Mat turned = cbi::decode_image(exif, "o.jpg");
            cv::Mat want;
            cv::rotate(plain, want, turn);
            ASSERT_EQ(turned.type(), want.type());
            ASSERT_EQ(turned.size(), want.size());
            EXPECT_EQ(max_abs_diff(turned, want), 0.0);
        }
        // 1: as stored.
        EXPECT_EQ(max_abs_diff(cbi::decode_image(with_exif(jpg, 1), "o.jpg"), plain), 0.0);
        // A malformed Exif segment (IFD0 offset outside it, or no TIFF header
        // at all) is ignored: the image decodes as stored.
        const std::vector<std::uint8_t> bad_offset = {'E', 'x', 'i',  'f',  0,    0,    'M', 'M',
                                                      0,   42,  0xFF, 0xFF, 0xFF, 0x00, 0,   1};
        EXPECT_EQ(max_abs_diff(cbi::decode_image(with_exif(jpg, 0, bad_offset), "m.jpg"), plain), 0.0);
        const std::vector<std::uint8_t> garbage = {'E', 'x', 'i', 'f', 0, 0, 'x', 'y', 'z'};
        EXPECT_EQ(max_abs_diff(cbi::decode_image(with_exif(jpg, 0, garbage), "m.jpg"), plain), 0.0);
    }
    // The limits use the header's size, which turning only swaps.
    const auto turned = with_exif(encode(".jpg", colour), 6);
    EXPECT_EQ(cbi::decode_image(turned, "o.jpg", 40 * 24, 40 * 24 * 3).size(), cv::Size(24, 40));
    EXPECT_NE(error_of([&] { cbi::decode_image(turned, "o.jpg", 40 * 24, 40 * 24 * 3 - 1); }).find("--max-memory"),
              std::string::npos);
}

TEST(ImageIo, MissingEmptyAndNonFiles) {
    TempDir dir;
    const fs::path missing = dir / "missing.png";
    EXPECT_EQ(error_of([&] { cbi::read_image(missing); }), missing.string() + ": no such file");

    const fs::path empty = dir / "empty.png";
    write_bytes(empty, {});
    EXPECT_EQ(error_of([&] { cbi::read_image(empty); }), empty.string() + ": empty file (0 bytes)");

    const fs::path d = dir / "x.png";
    fs::create_directory(d);
    EXPECT_EQ(error_of([&] { cbi::read_image(d); }), d.string() + ": is a directory, not an image file");

    const fs::path link = dir / "dangling.jpg";
    fs::create_symlink(dir / "nowhere.jpg", link);
    EXPECT_EQ(error_of([&] { cbi::read_image(link); }),
              link.string() + ": dangling symbolic link (its target does not exist)");

    // A FIFO must be refused, not block the reader forever.
    const fs::path fifo = dir / "fifo.png";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    EXPECT_EQ(error_of([&] { cbi::read_image(fifo); }), fifo.string() + ": not a regular file");
}

TEST(ImageIo, UnreadableFile) {
    TempDir dir;
    ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);  // others may look up the name
    const fs::path p = dir / "secret.png";
    write_bytes(p, encode(".png", random_image(4, 4, CV_8UC1, 6)));
    ASSERT_EQ(::chmod(p.c_str(), 0), 0);
    const std::string expected = p.string() + ": permission denied";
    if (::geteuid() != 0) {
        EXPECT_EQ(error_of([&] { cbi::read_image(p); }), expected);
        return;
    }
    // Root reads mode-000 files anyway (CAP_DAC_OVERRIDE): check in a child
    // that drops to nobody (65534).
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(77);
        ::_exit(error_of([&] { cbi::read_image(p); }) == expected ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77)
        GTEST_SKIP() << "running as root and cannot drop to uid 65534: mode 000 does not stop root";
    EXPECT_EQ(WEXITSTATUS(status), 0) << "expected '" << expected << "' in the unprivileged child";
}

TEST(ImageIo, GarbageIsNotAnImage) {
    TempDir dir;
    const fs::path random = dir / "random.png";
    std::vector<std::uint8_t> noise(4096);
    std::mt19937 rng(42);
    for (auto& b : noise) b = static_cast<std::uint8_t>(rng());
    noise[0] = 0x00;  // make sure it does not start with a real signature by chance
    write_bytes(random, noise);
    EXPECT_NE(error_of([&] { cbi::read_image(random); }).find(random.string() + ": not a recognized image format"),
              std::string::npos);

    const fs::path text = dir / "notes.jpg";
    const std::string words = "this is a text file, not a JPEG\n";
    write_bytes(text, std::vector<std::uint8_t>(words.begin(), words.end()));
    EXPECT_NE(error_of([&] { cbi::read_image(text); }).find(text.string() + ": not a recognized image format"),
              std::string::npos);
}

TEST(ImageIo, CorruptDataAfterAValidHeader) {
    // A real PNG whose compressed data is overwritten: header and IEND intact.
    auto png = encode(".png", random_image(64, 64, CV_8UC3, 8));
    std::size_t idat = 0;
    for (std::size_t i = 8; i + 8 < png.size() && !idat;
         i += 12 + ((png[i] << 24) | (png[i + 1] << 16) | (png[i + 2] << 8) | png[i + 3]))
        if (std::memcmp(&png[i + 4], "IDAT", 4) == 0) idat = i;
    ASSERT_GT(idat, 0u);
    for (std::size_t i = idat + 8 + 2; i < idat + 8 + 200; ++i) png[i] ^= 0x5A;  // zlib stream, chunk lengths intact
    const std::string e = error_of([&] { cbi::decode_image(png, "bad.png"); });
    EXPECT_EQ(e, "bad.png: corrupt or unsupported image data (PNG)");
}

// libjpeg decodes a JPEG whose scan data is cut short (an end-of-image
// marker after it) or overwritten, filling what it lost with gray; OpenCV
// keeps that image without a word. cbi refuses it, naming the file.
TEST(ImageIo, CorruptJpegScanDataIsAnError) {
    const std::string photo = shared_images_dir() + "/fruits.jpg";
    const std::vector<std::uint8_t> jpg =
        fs::exists(photo) ? cbi::read_file(photo) : encode(".jpg", gradient_image(300, 200, 3));
    std::vector<std::uint8_t> cut(jpg.begin(), jpg.begin() + static_cast<long>(jpg.size() / 3));
    cut.insert(cut.end(), {0xFF, 0xD9});
    EXPECT_FALSE(cv::imdecode(cut, cv::IMREAD_COLOR).empty());  // what OpenCV makes of it
    EXPECT_EQ(error_of([&] { cbi::decode_image(cut, "cut.jpg"); }),
              "cut.jpg: corrupt JPEG data (premature end of data segment)");
    std::vector<std::uint8_t> overwritten = jpg;
    for (std::size_t i = jpg.size() / 2; i < jpg.size() / 2 + 1000; ++i) overwritten[i] = 0x55;
    EXPECT_EQ(error_of([&] { cbi::decode_image(overwritten, "bad.jpg"); }).rfind("bad.jpg: corrupt JPEG data (", 0),
              0u);
}

// cbi decodes JPEGs with libjpeg-turbo itself (pipeline/jpeg_decode.hpp):
// the same pixels as cv::imdecode, turned by all eight EXIF orientations as
// OpenCV turns them, for gray and colour, baseline, progressive, restart
// intervals, chroma subsampling and odd sizes.
TEST(ImageIo, JpegDecodesAsOpenCvDoes) {
    const cv::Mat colour = random_image(37, 23, CV_8UC3, 31);
    cv::Mat smooth;
    cv::GaussianBlur(colour, smooth, {5, 5}, 0);
    cv::Mat gray;
    cv::extractChannel(smooth, gray, 2);
    const std::vector<std::pair<cv::Mat, std::vector<int>>> cases = {
        {smooth, {}},
        {gray, {}},
        {colour, {cv::IMWRITE_JPEG_QUALITY, 100}},
        {smooth, {cv::IMWRITE_JPEG_PROGRESSIVE, 1}},
        {smooth, {cv::IMWRITE_JPEG_RST_INTERVAL, 2}},
        {smooth, {cv::IMWRITE_JPEG_OPTIMIZE, 1, cv::IMWRITE_JPEG_QUALITY, 20}},
        {gray, {cv::IMWRITE_JPEG_PROGRESSIVE, 1}},
    };
    for (std::size_t c = 0; c < cases.size(); ++c) {
        const auto jpg = encode(".jpg", cases[c].first, cases[c].second);
        for (std::uint16_t orientation = 1; orientation <= 8; ++orientation) {
            SCOPED_TRACE("case " + std::to_string(c) + ", orientation " + std::to_string(orientation));
            const auto bytes = with_exif(jpg, orientation);
            const cv::Mat ours = cbi::decode_image(bytes, "o.jpg");
            const cv::Mat theirs = cv::imdecode(bytes, cv::IMREAD_ANYCOLOR | cv::IMREAD_ANYDEPTH);
            ASSERT_EQ(ours.type(), theirs.type());
            ASSERT_EQ(ours.size(), theirs.size());
            EXPECT_EQ(max_abs_diff(ours, theirs), 0.0);
        }
    }
}

TEST(ImageIo, TruncatedPngAndJpeg) {
    TempDir dir;
    const std::string photo = shared_images_dir() + "/fruits.jpg";
    std::vector<std::uint8_t> jpg =
        fs::exists(photo) ? cbi::read_file(photo) : encode(".jpg", gradient_image(300, 200, 3));
    std::vector<std::uint8_t> png = encode(".png", random_image(120, 80, CV_16UC3, 9));

    for (double frac : {0.3, 0.9, 0.999}) {
        SCOPED_TRACE(frac);
        const fs::path cut_jpg = dir / "cut.jpg";
        write_bytes(cut_jpg,
                    std::vector<std::uint8_t>(jpg.begin(), jpg.begin() + static_cast<long>(jpg.size() * frac)));
        EXPECT_EQ(error_of([&] { cbi::read_image(cut_jpg); }),
                  cut_jpg.string() + ": truncated JPEG data (no end-of-image marker)");

        const fs::path cut_png = dir / "cut.png";
        write_bytes(cut_png,
                    std::vector<std::uint8_t>(png.begin(), png.begin() + static_cast<long>(png.size() * frac)));
        EXPECT_EQ(error_of([&] { cbi::read_image(cut_png); }),
                  cut_png.string() + ": truncated PNG data (no IEND chunk)");
    }
    // Cut inside the header: still a one-line error naming the file.
    const std::vector<std::uint8_t> head(png.begin(), png.begin() + 16);
    EXPECT_EQ(error_of([&] { cbi::decode_image(head, "head.png"); }),
              "head.png: PNG header is incomplete or has no IHDR chunk");

    // Progressive JPEG (several scans) cut between scans.
    const auto prog = encode(".jpg", gradient_image(200, 120, 3), {cv::IMWRITE_JPEG_PROGRESSIVE, 1});
    EXPECT_EQ(cbi::decode_image(prog, "p.jpg").cols, 200);
    const std::vector<std::uint8_t> prog_cut(prog.begin(), prog.begin() + static_cast<long>(prog.size() * 0.6));
    EXPECT_EQ(error_of([&] { cbi::decode_image(prog_cut, "p.jpg"); }),
              "p.jpg: truncated JPEG data (no end-of-image marker)");

    // Bytes after EOI (camera trailers, padding) are fine.
    std::vector<std::uint8_t> padded = jpg;
    padded.insert(padded.end(), 100, 0x00);
    EXPECT_FALSE(cbi::decode_image(padded, "padded.jpg").empty());
}

TEST(ImageIo, EveryPrefixFailsWithAOneLineError) {
    // Cut files at every length inside the header (the probes' territory) and
    // at intervals after it: only cbi::Error may come out, one line, naming
    // the subject; formats with a truncation check never decode a prefix.
    const cv::Mat rgb = random_image(23, 11, CV_8UC3, 15);
    cv::Mat f32;
    rgb.convertTo(f32, CV_32F, 1 / 255.0);
    const std::vector<std::pair<const char*, cv::Mat>> cases = {
        {".png", rgb}, {".jpg", rgb}, {".webp", rgb}, {".ppm", rgb}, {".tiff", rgb}, {".bmp", rgb}, {".pfm", f32}};
    for (const auto& [ext, img] : cases) {
        const auto full = encode(ext, img);
        for (std::size_t n = 1; n < full.size(); n += (n < 400 || n + 70 > full.size() ? 1 : 61)) {
            SCOPED_TRACE(std::string(ext) + " cut at " + std::to_string(n) + " of " + std::to_string(full.size()));
            const bool checked = std::string(ext) != ".tiff";  // left to libtiff
            const std::vector<std::uint8_t> cut(full.begin(), full.begin() + static_cast<long>(n));
            try {
                const cv::Mat m = cbi::decode_image(cut, "cut");
                EXPECT_FALSE(checked) << "a prefix decoded";
                EXPECT_EQ(m.size(), img.size());
            } catch (const Error& e) {
                const std::string msg = e.what();
                EXPECT_EQ(msg.rfind("cut: ", 0), 0u) << msg;
                EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
            }
        }
    }
}

TEST(ImageIo, TruncatedWebpAndPnm) {
    const auto webp = encode(".webp", gradient_image(64, 64, 3));
    const std::vector<std::uint8_t> webp_cut(webp.begin(), webp.begin() + static_cast<long>(webp.size() / 2));
    EXPECT_EQ(error_of([&] { cbi::decode_image(webp_cut, "a.webp"); }),
              "a.webp: truncated WebP data (shorter than its RIFF size)");
    const auto ppm = encode(".ppm", random_image(64, 64, CV_16UC3, 10));
    const std::vector<std::uint8_t> ppm_cut(ppm.begin(), ppm.end() - 1);
    EXPECT_EQ(error_of([&] { cbi::decode_image(ppm_cut, "a.ppm"); }),
              "a.ppm: truncated PNM data (64x64 needs at least 24576 bytes, the file has 24575)");
    EXPECT_EQ(max_abs_diff(cbi::decode_image(ppm, "a.ppm"), cv::imdecode(ppm, cv::IMREAD_UNCHANGED)), 0.0);
}

TEST(ImageIo, SampleTypesCbiDoesNotSupport) {
    // TIFF can hold signed and double samples; OpenCV returns them as such.
    const cv::Mat s16 = random_image(9, 7, CV_16SC1, 11);
    EXPECT_EQ(
        error_of([&] { cbi::decode_image(encode(".tiff", s16), "s.tif"); }),
        "s.tif: unsupported sample type CV_16SC1 (cbi supports 8-bit unsigned, 16-bit unsigned and 32-bit float)");
    // Doubles are converted to float (documented).
    cv::Mat f64(7, 9, CV_64FC1);
    cv::randu(f64, -1.0, 1.0);
    const cv::Mat back = cbi::decode_image(encode(".tiff", f64), "d.tif");
    ASSERT_EQ(back.type(), CV_32FC1);
    cv::Mat expect;
    f64.convertTo(expect, CV_32F);
    EXPECT_EQ(max_abs_diff(back, expect), 0.0);
}

// ------------------------------------------------------------ atomic writes

TEST(ImageIo, WriteReplacesExistingOutputAndKeepsItsMode) {
    TempDir dir;
    const fs::path out = dir / "out.png";
    write_bytes(out, {'o', 'l', 'd'});
    ASSERT_EQ(::chmod(out.c_str(), 0640), 0);
    const cv::Mat img = random_image(10, 6, CV_16UC4, 12);
    cbi::write_image_atomic(out, img);
    EXPECT_EQ(max_abs_diff(cbi::read_image(out), img), 0.0);
    struct stat st;
    ASSERT_EQ(::stat(out.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0640u);
    EXPECT_EQ(dir.names(), std::vector<std::string>{"out.png"});

    // A path without a directory part writes into the current directory.
    const fs::path cwd = fs::current_path();
    fs::current_path(dir.path());
    cbi::write_image_atomic("rel.png", img);
    fs::current_path(cwd);
    EXPECT_EQ(max_abs_diff(cbi::read_image(dir / "rel.png"), img), 0.0);
}

TEST(ImageIo, FailedWriteLeavesNothingAndKeepsTheOldFile) {
    TempDir dir;
    const cv::Mat img = random_image(16, 16, CV_8UC3, 13);
    const fs::path nodir = dir / "no" / "such" / "dir" / "out.png";
    const std::string e = error_of([&] { cbi::write_image_atomic(nodir, img); });
    EXPECT_EQ(e.rfind(nodir.string() + ": cannot create a temporary file in ", 0), 0u) << e;
    EXPECT_NE(e.find("No such file or directory"), std::string::npos) << e;

    // The output is a directory: refused, directory untouched.
    const fs::path d = dir / "d.png";
    fs::create_directory(d);
    EXPECT_EQ(error_of([&] { cbi::write_image_atomic(d, img); }), d.string() + ": is a directory");
    EXPECT_TRUE(fs::is_directory(d));
    EXPECT_EQ(dir.names(), std::vector<std::string>{"d.png"});
}

TEST(ImageIo, DiskFullWriteLeavesNoPartialFile) {
    // RLIMIT_FSIZE in a child stands in for a full disk: write() fails with
    // EFBIG once the file reaches the limit (SIGXFSZ ignored, as a real
    // caller's default would kill it). The old output must survive.
    TempDir dir;
    const fs::path out = dir / "big.tiff";
    write_bytes(out, {'o', 'l', 'd'});
    const cv::Mat img = random_image(512, 512, CV_32FC4, 14);  // 4 MiB of incompressible samples
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::signal(SIGXFSZ, SIG_IGN);
        const rlimit lim{65536, 65536};
        ::setrlimit(RLIMIT_FSIZE, &lim);
        int code = 3;
        try {
            cbi::write_image_atomic(out, img);
            code = 1;  // should not succeed
        } catch (const Error& e) {
            const std::string m = e.what();
            code = m.rfind(out.string() + ": write failed: File too large", 0) == 0 ? 0 : 2;
        } catch (...) {}
        ::_exit(code);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 0) << "1: write succeeded, 2: wrong message, 3: other exception";
    EXPECT_EQ(dir.names(), std::vector<std::string>{"big.tiff"});  // no .cbi-tmp-* left
    EXPECT_EQ(fs::file_size(out), 3u);                             // old content intact
}

// ------------------------------------------------------------ same_file

TEST(ImageIo, SameFileComparesDeviceAndInode) {
    TempDir dir;
    const fs::path a = dir / "a.png", b = dir / "b.png";
    write_bytes(a, {1});
    write_bytes(b, {1});
    EXPECT_TRUE(cbi::same_file(a, a));
    EXPECT_TRUE(cbi::same_file(a, dir.path() / "." / "a.png"));
    EXPECT_FALSE(cbi::same_file(a, b));  // equal contents, different files
    fs::create_hard_link(a, dir / "hard.png");
    EXPECT_TRUE(cbi::same_file(a, dir / "hard.png"));
    fs::create_symlink(a, dir / "soft.png");
    EXPECT_TRUE(cbi::same_file(dir / "soft.png", a));
    EXPECT_FALSE(cbi::same_file(a, dir / "missing.png"));
    EXPECT_FALSE(cbi::same_file(dir / "missing.png", dir / "missing.png"));
}
