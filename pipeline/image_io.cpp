#include "pipeline/image_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <system_error>

#include <opencv2/imgcodecs.hpp>

#include "pipeline/error.hpp"

namespace cbi {
namespace {

namespace fs = std::filesystem;
using Bytes = std::span<const std::uint8_t>;
using namespace std::string_view_literals;  // magics contain NUL bytes

std::string errno_text(int err) { return std::system_category().message(err); }

// ---------------------------------------------------------------- reading

std::uint32_t be16(const std::uint8_t* p) { return (std::uint32_t{p[0]} << 8) | p[1]; }
std::uint32_t be32(const std::uint8_t* p) { return (be16(p) << 16) | be16(p + 2); }
std::uint32_t le16(const std::uint8_t* p) { return (std::uint32_t{p[1]} << 8) | p[0]; }
std::uint32_t le32(const std::uint8_t* p) { return (le16(p + 2) << 16) | le16(p); }
std::uint64_t le64(const std::uint8_t* p) { return (std::uint64_t{le32(p + 4)} << 32) | le32(p); }
std::uint64_t be64(const std::uint8_t* p) { return (std::uint64_t{be32(p)} << 32) | be32(p + 4); }

bool starts_with(Bytes b, std::string_view magic) {
    return b.size() >= magic.size() && std::memcmp(b.data(), magic.data(), magic.size()) == 0;
}

// Thrown inside the probes; the caller adds the subject.
struct Malformed {
    std::string reason;
};
[[noreturn]] void malformed(std::string reason) { throw Malformed{std::move(reason)}; }

ImageHeader probe_png(Bytes b) {
    // Signature, then IHDR must be the first chunk: length 13, "IHDR", width, height.
    if (b.size() < 24 || std::memcmp(b.data() + 12, "IHDR", 4) != 0) malformed("PNG header is incomplete or has no IHDR chunk");
    return {"PNG", be32(b.data() + 16), be32(b.data() + 20)};
}

// SOFn markers carry the frame size; C4 (DHT), C8 (JPG) and CC (DAC) are not SOFs.
bool is_sof(std::uint8_t m) { return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC; }

ImageHeader probe_jpeg(Bytes b) {
    std::size_t i = 2;  // after SOI
    while (i + 4 <= b.size()) {
        if (b[i] != 0xFF) malformed("JPEG marker expected at byte " + std::to_string(i));
        const std::uint8_t m = b[i + 1];
        if (m == 0xFF) { ++i; continue; }  // fill byte
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) { i += 2; continue; }  // no length
        if (m == 0xD9 || m == 0xDA) break;  // EOI or SOS before any SOF
        const std::size_t len = be16(b.data() + i + 2);
        if (len < 2) malformed("JPEG segment with invalid length");
        if (is_sof(m)) {
            if (len < 8 || i + 9 > b.size()) malformed("JPEG frame header is incomplete");
            const std::uint32_t h = be16(b.data() + i + 5), w = be16(b.data() + i + 7);
            if (h == 0) malformed("JPEG height defined by a DNL marker is not supported");
            return {"JPEG", w, h};
        }
        i += 2 + len;
    }
    malformed("JPEG has no frame header (SOF marker)");
}

ImageHeader probe_tiff(Bytes b) {
    const bool le = b[0] == 'I';
    auto u16 = [&](std::uint64_t at) { return le ? le16(b.data() + at) : be16(b.data() + at); };
    auto u32 = [&](std::uint64_t at) { return le ? le32(b.data() + at) : be32(b.data() + at); };
    auto u64 = [&](std::uint64_t at) { return le ? le64(b.data() + at) : be64(b.data() + at); };
    const bool big = u16(2) == 43;  // BigTIFF: 64-bit offsets and counts
    if (big && b.size() < 16) malformed("BigTIFF header is incomplete");
    const std::uint64_t ifd = big ? u64(8) : u32(4);
    const std::uint64_t count_size = big ? 8 : 2, entry_size = big ? 20 : 12;
    if (ifd < 8 || ifd > b.size() || b.size() - ifd < count_size) malformed("TIFF first IFD offset is outside the file");
    const std::uint64_t n = big ? u64(ifd) : u16(ifd);
    if (n > (b.size() - ifd - count_size) / entry_size) malformed("TIFF first IFD is truncated");
    std::optional<std::uint64_t> width, height;
    for (std::uint64_t k = 0; k < n; ++k) {
        const std::uint64_t e = ifd + count_size + k * entry_size;
        const unsigned tag = u16(e), type = u16(e + 2);
        if (tag != 256 && tag != 257) continue;
        const std::uint64_t value_at = e + (big ? 12 : 8);  // inline value: SHORT, LONG or LONG8
        const std::uint64_t v = type == 3 ? u16(value_at) : type == 4 ? u32(value_at)
                              : (type == 16 && big) ? u64(value_at) : ~std::uint64_t{0};
        if (v == ~std::uint64_t{0}) malformed("TIFF image size tag has an unexpected type");
        (tag == 256 ? width : height) = v;
    }
    if (!width || !height) malformed("TIFF first IFD has no ImageWidth/ImageLength");
    return {"TIFF", *width, *height};
}

ImageHeader probe_bmp(Bytes b) {
    if (b.size() < 26) malformed("BMP header is incomplete");
    const std::uint32_t dib = le32(b.data() + 14);
    if (dib == 12) return {"BMP", le16(b.data() + 18), le16(b.data() + 20)};  // OS/2 core header
    if (dib != 40 && dib != 52 && dib != 56 && dib != 64 && dib != 108 && dib != 124)
        malformed("BMP has an unknown header size " + std::to_string(dib));
    const auto w = static_cast<std::int32_t>(le32(b.data() + 18)), h = static_cast<std::int32_t>(le32(b.data() + 22));
    if (w < 0) malformed("BMP has a negative width");
    return {"BMP", static_cast<std::uint64_t>(w), h < 0 ? 0 - static_cast<std::uint64_t>(std::int64_t{h}) : static_cast<std::uint64_t>(h)};
}

ImageHeader probe_webp(Bytes b) {
    if (b.size() < 30) malformed("WebP header is incomplete");
    const std::uint8_t* c = b.data() + 12;
    if (std::memcmp(c, "VP8X", 4) == 0)  // extended: 24-bit canvas size minus one
        return {"WebP", 1 + (c[12] | (c[13] << 8) | (std::uint32_t{c[14]} << 16)),
                1 + (c[15] | (c[16] << 8) | (std::uint32_t{c[17]} << 16))};
    if (std::memcmp(c, "VP8L", 4) == 0) {  // lossless: signature 0x2F, then 14+14 bits minus one
        if (c[8] != 0x2F) malformed("WebP lossless signature missing");
        const std::uint32_t bits = le32(c + 9);
        return {"WebP", 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)};
    }
    if (std::memcmp(c, "VP8 ", 4) == 0) {  // lossy: frame tag (3), start code 9D 01 2A, 14-bit sizes
        if (c[11] != 0x9D || c[12] != 0x01 || c[13] != 0x2A) malformed("WebP VP8 start code missing");
        return {"WebP", le16(c + 14) & 0x3FFF, le16(c + 16) & 0x3FFF};
    }
    malformed("WebP has an unknown first chunk");
}

// Netpbm headers (P1-P6, PFM): whitespace-separated ASCII numbers, '#' comments.
struct TextScanner {
    Bytes b;
    std::size_t i;
    void skip_space() {
        while (i < b.size()) {
            if (b[i] == '#') {
                while (i < b.size() && b[i] != '\n' && b[i] != '\r') ++i;
            } else if (std::isspace(b[i])) {
                ++i;
            } else {
                break;
            }
        }
    }
    std::uint64_t number(const char* what) {
        skip_space();
        std::uint64_t v = 0;
        std::size_t digits = 0;
        while (i < b.size() && std::isdigit(b[i])) {
            if (++digits > 10) malformed(std::string("image ") + what + " has too many digits");
            v = v * 10 + (b[i++] - '0');
        }
        if (digits == 0) malformed(std::string("image header has no ") + what);
        return v;
    }
    std::string word() {
        skip_space();
        std::string w;
        while (i < b.size() && !std::isspace(b[i]) && w.size() < 64) w += static_cast<char>(b[i++]);
        return w;
    }
};

ImageHeader probe_pnm(Bytes b) {
    TextScanner s{b, 2};
    const std::uint64_t w = s.number("width");
    const std::uint64_t h = s.number("height");
    return {b[1] == 'f' || b[1] == 'F' ? "PFM" : "PNM", w, h};
}

ImageHeader probe_pam(Bytes b) {
    TextScanner s{b, 2};
    std::optional<std::uint64_t> w, h;
    for (int tokens = 0; tokens < 64; ++tokens) {
        const std::string t = s.word();
        if (t == "WIDTH") w = s.number("width");
        else if (t == "HEIGHT") h = s.number("height");
        else if (t == "ENDHDR" || t.empty()) break;
    }
    if (!w || !h) malformed("PAM header has no WIDTH/HEIGHT");
    return {"PAM", *w, *h};
}

ImageHeader probe_exr(Bytes b) {
    // Attributes: name\0 type\0 size(int32) value, until an empty name.
    std::size_t i = 8;
    auto cstr = [&]() {
        const auto* end = static_cast<const std::uint8_t*>(std::memchr(b.data() + i, 0, b.size() - i));
        if (!end) malformed("OpenEXR header is truncated");
        std::string s(reinterpret_cast<const char*>(b.data() + i), end - (b.data() + i));
        i = end - b.data() + 1;
        return s;
    };
    while (i < b.size()) {
        const std::string name = cstr();
        if (name.empty()) break;
        const std::string type = cstr();
        if (i + 4 > b.size()) malformed("OpenEXR header is truncated");
        const std::uint32_t size = le32(b.data() + i);
        i += 4;
        if (size > b.size() - i) malformed("OpenEXR header is truncated");
        if (name == "dataWindow" && type == "box2i" && size == 16) {
            const auto x0 = static_cast<std::int32_t>(le32(b.data() + i)), y0 = static_cast<std::int32_t>(le32(b.data() + i + 4));
            const auto x1 = static_cast<std::int32_t>(le32(b.data() + i + 8)), y1 = static_cast<std::int32_t>(le32(b.data() + i + 12));
            const std::int64_t w = std::int64_t{x1} - x0 + 1, h = std::int64_t{y1} - y0 + 1;
            return {"OpenEXR", static_cast<std::uint64_t>(std::max<std::int64_t>(w, 0)),
                    static_cast<std::uint64_t>(std::max<std::int64_t>(h, 0))};
        }
        i += size;
    }
    malformed("OpenEXR header has no dataWindow");
}

ImageHeader probe_hdr(Bytes b) {
    // Header lines end with an empty line; then "-Y H +X W" (axes may vary).
    const std::string_view text(reinterpret_cast<const char*>(b.data()), std::min<std::size_t>(b.size(), 65536));
    const std::size_t blank = text.find("\n\n");
    if (blank == std::string_view::npos) malformed("Radiance HDR header is incomplete");
    TextScanner s{b, blank + 2};
    const std::string a1 = s.word();
    const std::uint64_t n1 = s.number("size");
    const std::string a2 = s.word();
    const std::uint64_t n2 = s.number("size");
    if (a1.size() != 2 || a2.size() != 2) malformed("Radiance HDR resolution line is malformed");
    return a1[1] == 'Y' ? ImageHeader{"Radiance HDR", n2, n1} : ImageHeader{"Radiance HDR", n1, n2};
}

const char* const known_formats = "PNG, JPEG, TIFF, BMP, WebP, PNM/PAM/PFM, OpenEXR, Radiance HDR, Sun raster";

// Throws Malformed; returns nullopt for an unrecognized signature.
std::optional<ImageHeader> probe(Bytes b) {
    if (starts_with(b, "\x89PNG\r\n\x1a\n"sv)) return probe_png(b);
    if (starts_with(b, "\xFF\xD8\xFF"sv)) return probe_jpeg(b);
    if (starts_with(b, "II*\0"sv) || starts_with(b, "MM\0*"sv) || starts_with(b, "II+\0"sv) || starts_with(b, "MM\0+"sv)) {
        if (b.size() < 8) malformed("TIFF header is incomplete");
        return probe_tiff(b);
    }
    if (starts_with(b, "BM"sv)) return probe_bmp(b);
    if (b.size() >= 12 && starts_with(b, "RIFF"sv) && std::memcmp(b.data() + 8, "WEBP", 4) == 0) return probe_webp(b);
    if (b.size() >= 3 && b[0] == 'P' && ((b[1] >= '1' && b[1] <= '6') || b[1] == 'f' || b[1] == 'F') && std::isspace(b[2]))
        return probe_pnm(b);
    if (starts_with(b, "P7\n"sv)) return probe_pam(b);
    if (starts_with(b, "\x76\x2f\x31\x01"sv)) return probe_exr(b);
    if (starts_with(b, "#?RADIANCE"sv) || starts_with(b, "#?RGBE"sv)) return probe_hdr(b);
    if (starts_with(b, "\x59\xa6\x6a\x95"sv)) {
        if (b.size() < 12) malformed("Sun raster header is incomplete");
        return ImageHeader{"Sun raster", be32(b.data() + 4), be32(b.data() + 8)};
    }
    return std::nullopt;
}

// Truncation checks for formats whose decoders accept (JPEG) or complain
// noisily about (PNG) cut files. Returns the reason, or empty.
std::string png_truncated(Bytes b) {
    std::uint64_t i = 8;
    while (i + 8 <= b.size()) {
        const std::uint64_t len = be32(b.data() + i);
        if (std::memcmp(b.data() + i + 4, "IEND", 4) == 0) {
            if (i + 12 <= b.size()) return {};
            break;  // IEND's CRC is cut off
        }
        i += 12 + len;  // length, type, data, CRC
    }
    return "truncated PNG data (no IEND chunk)";
}

std::string jpeg_truncated(Bytes b) {
    // Walk the marker segments, then the entropy-coded data of each scan, until
    // EOI. Inside scan data FF 00 is a stuffed byte and FF D0-D7 a restart
    // marker; any other marker ends the scan (progressive files have several).
    // Bytes after EOI (camera trailers, padding) are allowed.
    const auto* p = b.data();
    const std::size_t n = b.size();
    std::size_t i = 2;
    bool in_scan = false;
    while (i < n) {
        if (in_scan) {
            const auto* ff = static_cast<const std::uint8_t*>(std::memchr(p + i, 0xFF, n - i));
            if (!ff) break;
            i = ff - p;
            if (i + 1 >= n) break;
            const std::uint8_t m = p[i + 1];
            if (m == 0x00 || (m >= 0xD0 && m <= 0xD7) || m == 0xFF) { i += (m == 0xFF ? 1 : 2); continue; }
            in_scan = false;
            continue;
        }
        if (i + 2 > n) break;
        if (p[i] != 0xFF) return "corrupt JPEG data (marker expected at byte " + std::to_string(i) + ")";
        const std::uint8_t m = p[i + 1];
        if (m == 0xFF) { ++i; continue; }
        if (m == 0xD9) return {};
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) { i += 2; continue; }
        if (i + 4 > n) break;
        i += 2 + be16(p + i + 2);
        if (m == 0xDA) in_scan = true;
    }
    return "truncated JPEG data (no end-of-image marker)";
}

std::string webp_truncated(Bytes b) {
    if (std::uint64_t{le32(b.data() + 4)} + 8 > b.size()) return "truncated WebP data (shorter than its RIFF size)";
    return {};
}

std::string pnm_truncated(Bytes b, const ImageHeader& h) {
    // Binary P5/P6 only: after the maxval one whitespace byte, then the samples.
    if (b[1] != '5' && b[1] != '6') return {};
    TextScanner s{b, 2};
    s.number("width");
    s.number("height");
    const std::uint64_t maxval = s.number("maxval");
    const std::uint64_t data = s.i + 1;
    const std::uint64_t need = h.width * h.height * (b[1] == '6' ? 3 : 1) * (maxval > 255 ? 2 : 1);
    if (data > b.size() || b.size() - data < need) return "truncated PNM data";
    return {};
}

// One line from an OpenCV exception: its message without file/line/function.
std::string cv_reason(const cv::Exception& e) {
    std::string r = e.err.empty() ? e.what() : e.err;
    r.erase(std::remove(r.begin(), r.end(), '\n'), r.end());
    return r;
}

// ---------------------------------------------------------------- writing

struct FormatRule {
    const char* exts;  // space-separated, with dots
    const char* name;
    bool u8, u16, f32;
    bool ch1, ch3, ch4;
    const char* suggestion;  // for depths this format cannot store
};

constexpr FormatRule format_rules[] = {
    {".png", "PNG", true, true, false, true, true, true, "use .tiff (or .exr/.pfm) for 32-bit float"},
    {".jpg .jpeg .jpe", "JPEG", true, false, false, true, true, false, "use .png or .tiff"},
    {".tif .tiff", "TIFF", true, true, true, true, true, true, ""},
    {".bmp", "BMP", true, false, false, true, true, false, "use .png or .tiff"},
    {".webp", "WebP", true, false, false, false, true, true, "use .png or .tiff"},
    {".pgm", "PGM", true, true, false, true, false, false, "use .tiff"},
    {".ppm", "PPM", true, true, false, false, true, false, "use .tiff"},
    {".pnm", "PNM", true, true, false, true, true, false, "use .tiff"},
    {".pfm", "PFM", false, false, true, true, true, false, "use .tiff or .png"},
    {".exr", "OpenEXR", false, false, true, true, true, true, "use .tiff or .png"},
};

std::string lower_extension(const fs::path& p) {
    std::string e = p.extension().string();
    std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return std::tolower(c); });
    return e;
}

const FormatRule* rule_for(const std::string& ext) {
    if (ext.empty()) return nullptr;
    for (const auto& r : format_rules) {
        std::string_view list = r.exts;
        while (!list.empty()) {
            const std::size_t sp = list.find(' ');
            if (list.substr(0, sp) == ext) return &r;
            list = sp == std::string_view::npos ? std::string_view{} : list.substr(sp + 1);
        }
    }
    return nullptr;
}

mode_t new_file_mode() {
    // umask() cannot be read without setting it (racy in threaded callers);
    // Linux reports it in /proc/self/status.
    mode_t mask = 022;
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("Umask:", 0) == 0) {
            mask = static_cast<mode_t>(std::stoul(line.substr(6), nullptr, 8));
            break;
        }
    return 0666 & ~mask;
}

// Removes the temporary file unless released.
struct TempFile {
    std::string path;
    int fd = -1;
    ~TempFile() {
        if (fd >= 0) ::close(fd);
        if (!path.empty()) ::unlink(path.c_str());
    }
};

}  // namespace

// ---------------------------------------------------------------- public

std::vector<std::uint8_t> read_file(const fs::path& path) {
    const std::string subject = path.string();
    // O_NONBLOCK: opening a FIFO named like an image must not hang.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        const int err = errno;
        struct stat st;
        if (err == ENOENT && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
            throw Error(subject, "dangling symbolic link (its target does not exist)");
        if (err == ENOENT) throw Error(subject, "no such file");
        if (err == EACCES) throw Error(subject, "permission denied");
        throw Error(subject, "cannot open: " + errno_text(err));
    }
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st;
    if (::fstat(fd, &st) != 0) throw Error(subject, "cannot stat: " + errno_text(errno));
    if (S_ISDIR(st.st_mode)) throw Error(subject, "is a directory, not an image file");
    if (!S_ISREG(st.st_mode)) throw Error(subject, "not a regular file");
    if (st.st_size == 0) throw Error(subject, "empty file (0 bytes)");
    // cv::imdecode takes at most INT_MAX bytes: refuse before reading it all.
    if (st.st_size > INT32_MAX)
        throw Error(subject, "file is " + std::to_string(st.st_size) + " bytes; files over 2 GiB are not supported");

    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < bytes.size()) {
        const ssize_t r = ::read(fd, bytes.data() + got, bytes.size() - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) throw Error(subject, "read error: " + errno_text(errno));
        if (r == 0) break;  // shrank while reading; decode_image judges what is left
        got += static_cast<std::size_t>(r);
    }
    bytes.resize(got);
    if (bytes.empty()) throw Error(subject, "empty file (0 bytes)");
    return bytes;
}

ImageHeader probe_image(Bytes bytes, const std::string& subject) {
    try {
        if (auto h = probe(bytes)) return *h;
    } catch (const Malformed& m) {
        throw Error(subject, m.reason);
    }
    throw Error(subject, std::string("not a recognized image format (cbi reads ") + known_formats + ")");
}

cv::Mat decode_image(Bytes bytes, const std::string& subject, std::uint64_t max_pixels) {
    if (bytes.empty()) throw Error(subject, "empty file (0 bytes)");
    const ImageHeader h = probe_image(bytes, subject);
    if (h.width == 0 || h.height == 0)
        throw Error(subject, std::string(h.format) + " header gives an empty image (" + std::to_string(h.width) + "x" +
                                 std::to_string(h.height) + ")");
    // BigTIFF sizes are 64-bit: the product may overflow.
    std::uint64_t pixels = 0;
    const bool overflow = __builtin_mul_overflow(h.width, h.height, &pixels);
    if (overflow || pixels > max_pixels)
        throw Error(subject, "image is " + std::to_string(h.width) + "x" + std::to_string(h.height) + " = " +
                                 (overflow ? std::string("more than 2^64") : std::to_string(pixels)) +
                                 " pixels, larger than --max-pixels " + std::to_string(max_pixels));

    std::string cut;
    const std::string_view format = h.format;
    try {
        if (format == "PNG") cut = png_truncated(bytes);
        else if (format == "JPEG") cut = jpeg_truncated(bytes);
        else if (format == "WebP") cut = webp_truncated(bytes);
        else if (format == "PNM") cut = pnm_truncated(bytes, h);
    } catch (const Malformed& m) {
        throw Error(subject, m.reason);
    }
    if (!cut.empty()) throw Error(subject, cut);

    // OpenCV refuses sizes over its own limits (read once at load from
    // OPENCV_IO_MAX_IMAGE_PIXELS/_WIDTH/_HEIGHT), by exception or empty Mat.
    const bool over_opencv_limits =
        pixels > (std::uint64_t{1} << 30) || h.width > (1u << 20) || h.height > (1u << 20);
    const std::string opencv_limits = "image is " + std::to_string(h.width) + "x" + std::to_string(h.height) +
                                      ", over OpenCV's decoder limits (OPENCV_IO_MAX_IMAGE_PIXELS, default 2^30 "
                                      "pixels, and 2^20 per side)";
    cv::Mat mat;
    try {
        if (bytes.size() > INT32_MAX) throw Error(subject, "files over 2 GiB are not supported by the decoder");
        // A Mat header over the bytes (no copy): imdecode only reads them.
        const cv::Mat buf(1, static_cast<int>(bytes.size()), CV_8U, const_cast<std::uint8_t*>(bytes.data()));
        mat = cv::imdecode(buf, cv::IMREAD_UNCHANGED);
    } catch (const cv::Exception& e) {
        if (over_opencv_limits) throw Error(subject, opencv_limits);
        throw Error(subject, "cannot decode " + std::string(h.format) + ": " + cv_reason(e));
    }
    if (mat.empty()) {
        if (over_opencv_limits) throw Error(subject, opencv_limits);
        throw Error(subject, "corrupt or unsupported image data (" + std::string(h.format) + ")");
    }
    if (static_cast<std::uint64_t>(mat.cols) != h.width || static_cast<std::uint64_t>(mat.rows) != h.height) {
        // Not an error by itself (e.g. a TIFF whose first IFD is a thumbnail),
        // but the limit must still hold for what was decoded.
        if (static_cast<std::uint64_t>(mat.total()) > max_pixels)
            throw Error(subject, "decoded image is " + std::to_string(mat.cols) + "x" + std::to_string(mat.rows) +
                                     ", larger than --max-pixels " + std::to_string(max_pixels));
    }

    const int ch = mat.channels();
    if (ch != 1 && ch != 3 && ch != 4)
        throw Error(subject, std::to_string(ch) + "-channel image is not supported (cbi supports 1, 3 or 4 channels)");
    switch (mat.depth()) {
        case CV_8U:
        case CV_16U:
        case CV_32F: break;
        case CV_64F:  // doubles become floats: documented in image_io.hpp
        case CV_16F: {
            cv::Mat f;
            mat.convertTo(f, CV_32F);
            mat = f;
            break;
        }
        default:
            throw Error(subject, "unsupported sample type " + cv::typeToString(mat.type()) +
                                     " (cbi supports 8-bit unsigned, 16-bit unsigned and 32-bit float)");
    }
    return mat;
}

cv::Mat read_image(const fs::path& path, std::uint64_t max_pixels) {
    const std::vector<std::uint8_t> bytes = read_file(path);
    return decode_image(bytes, path.string(), max_pixels);
}

void check_output_format(const fs::path& out, int cv_type) {
    const std::string subject = out.string();
    const std::string ext = lower_extension(out);
    const FormatRule* r = rule_for(ext);
    if (!r) {
        std::string reason = ext.empty() ? "no file extension" : "unknown image extension '" + ext + "'";
        reason += " (supported:";
        for (const auto& f : format_rules) (reason += ' ') += f.exts;
        throw Error(subject, reason + ")");
    }
    const int depth = CV_MAT_DEPTH(cv_type), ch = CV_MAT_CN(cv_type);
    const bool depth_ok = (depth == CV_8U && r->u8) || (depth == CV_16U && r->u16) || (depth == CV_32F && r->f32);
    if (!depth_ok) {
        const char* d = depth == CV_8U ? "8-bit" : depth == CV_16U ? "16-bit" : depth == CV_32F ? "32-bit float" : nullptr;
        throw Error(subject, std::string(r->name) + " cannot store " + (d ? d : cv::typeToString(cv_type).c_str()) +
                                 " images; " + r->suggestion);
    }
    const bool ch_ok = (ch == 1 && r->ch1) || (ch == 3 && r->ch3) || (ch == 4 && r->ch4);
    if (!ch_ok)
        throw Error(subject, std::string(r->name) + " cannot store " + std::to_string(ch) + "-channel images" +
                                 (ch == 4 ? " (alpha would be lost); use .png or .tiff" : "; use .png or .tiff"));
}

void write_image_atomic(const fs::path& out, const cv::Mat& image) {
    const std::string subject = out.string();
    if (image.empty()) throw Error(subject, "cannot write an empty image");
    check_output_format(out, image.type());

    std::vector<int> params;
    const std::string ext = lower_extension(out);
    const std::string_view format = rule_for(ext)->name;
    if (format == "JPEG") params = {cv::IMWRITE_JPEG_QUALITY, 95};
    // OpenCV 4.6 writes 3-channel float TIFF as lossy SGILOG (LogLuv) unless a
    // compression is given (1.0 came back as 1.0268); any explicit one is exact.
    if (format == "TIFF") params = {cv::IMWRITE_TIFF_COMPRESSION, 5 /* LZW */};
    std::vector<std::uint8_t> encoded;
    try {
        if (!cv::imencode(ext, image, encoded, params)) throw Error(subject, "encoding failed");
    } catch (const cv::Exception& e) {
        throw Error(subject, "encoding failed: " + cv_reason(e));
    }

    struct stat st;
    mode_t mode;
    if (::stat(out.c_str(), &st) == 0) {
        if (S_ISDIR(st.st_mode)) throw Error(subject, "is a directory");
        mode = st.st_mode & 07777;  // replacing: keep the old file's permissions
    } else {
        mode = new_file_mode();
    }

    const fs::path dir = out.has_parent_path() ? out.parent_path() : fs::path(".");
    TempFile tmp;
    std::string templ = (dir / ".cbi-tmp-XXXXXX").string();
    tmp.fd = ::mkostemp(templ.data(), O_CLOEXEC);
    if (tmp.fd < 0) throw Error(subject, "cannot create a temporary file in " + dir.string() + ": " + errno_text(errno));
    tmp.path = templ;

    if (::fchmod(tmp.fd, mode) != 0) throw Error(subject, "cannot set permissions: " + errno_text(errno));
    std::size_t done = 0;
    while (done < encoded.size()) {
        const ssize_t w = ::write(tmp.fd, encoded.data() + done, encoded.size() - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) throw Error(subject, "write failed: " + errno_text(errno));
        done += static_cast<std::size_t>(w);
    }
    if (::fsync(tmp.fd) != 0) throw Error(subject, "fsync failed: " + errno_text(errno));
    const int fd = tmp.fd;
    tmp.fd = -1;
    if (::close(fd) != 0) throw Error(subject, "close failed: " + errno_text(errno));
    if (::rename(tmp.path.c_str(), out.c_str()) != 0) throw Error(subject, "cannot rename into place: " + errno_text(errno));
    tmp.path.clear();  // now it is the output

    // Make the rename itself durable; failure here cannot undo the write.
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
}

bool same_file(const fs::path& a, const fs::path& b) {
    struct stat sa, sb;
    if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace cbi
