#include "pipeline/image_io.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <system_error>
#include <utility>

#include <opencv2/imgcodecs.hpp>

#include "pipeline/byte_order.hpp"
#include "pipeline/error.hpp"
#include "pipeline/jpeg_bands.hpp"
#include "pipeline/jpeg_decode.hpp"
#include "pipeline/metadata.hpp"
#include "pipeline/png_bands.hpp"

namespace cbi {
namespace {

namespace fs = std::filesystem;
using Bytes = std::span<const std::uint8_t>;
using namespace std::string_view_literals;  // magics contain NUL bytes

std::string errno_text(int err) {
    return std::system_category().message(err);
}

// ---------------------------------------------------------------- reading

bool starts_with(Bytes b, std::string_view magic) {
    return b.size() >= magic.size() && std::memcmp(b.data(), magic.data(), magic.size()) == 0;
}

// Thrown inside the probes; the caller adds the subject.
struct Malformed {
    std::string reason;
};
[[noreturn]] void malformed(std::string reason) {
    throw Malformed{std::move(reason)};
}

// Products of header fields, which may be anything: saturate instead of wrapping.
std::uint64_t mul_sat(std::uint64_t a, std::uint64_t b) {
    std::uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? ~std::uint64_t{0} : r;
}
std::uint64_t add_sat(std::uint64_t a, std::uint64_t b) {
    return a + b < a ? ~std::uint64_t{0} : a + b;
}
std::uint64_t div_up(std::uint64_t a, std::uint64_t b) {
    return a / b + (a % b != 0);
}

// Bytes per sample OpenCV decodes a sample of `bits` into.
std::uint32_t sample_bytes(std::uint64_t bits) {
    return bits <= 8 ? 1 : bits <= 16 ? 2 : bits <= 32 ? 4 : 8;
}

// Calls f(offset, length, type) for each chunk after the signature, while f
// returns true and the chunk header is inside the file.
template <class F>
void for_each_png_chunk(Bytes b, F&& f) {
    for (std::uint64_t i = 8; i + 8 <= b.size(); i += 12 + std::uint64_t{be32(b.data() + i)})
        if (!f(i, std::uint64_t{be32(b.data() + i)},
               std::string_view(reinterpret_cast<const char*>(b.data() + i + 4), 4)))
            return;
}

ImageHeader probe_png(Bytes b) {
    // Signature, then IHDR must be the first chunk: length 13, "IHDR", width,
    // height, bit depth, colour type.
    if (b.size() < 26 || std::memcmp(b.data() + 12, "IHDR", 4) != 0)
        malformed("PNG header is incomplete or has no IHDR chunk");
    ImageHeader h{"PNG", be32(b.data() + 16), be32(b.data() + 20)};
    const unsigned depth = b[24], colour = b[25];
    // OpenCV: gray -> 1 channel; RGB or palette -> 3, or 4 with a tRNS chunk
    // (before IDAT); gray+alpha and RGBA -> 4. Depth 16 -> 16-bit samples.
    bool trns = false;
    if (colour == 2 || colour == 3)
        for_each_png_chunk(b, [&](std::uint64_t, std::uint64_t, std::string_view type) {
            trns = trns || type == "tRNS";
            return type != "IDAT" && type != "IEND";
        });
    if (colour == 0)
        h.channels = 1;
    else if ((colour == 2 || colour == 3) && !trns)
        h.channels = 3;
    else if (colour == 2 || colour == 3 || colour == 4 || colour == 6)
        h.channels = 4;
    if (depth <= 16) h.bytes_per_sample = sample_bytes(depth);
    return h;
}

// SOFn markers carry the frame size; C4 (DHT), C8 (JPG) and CC (DAC) are not SOFs.
bool is_sof(std::uint8_t m) {
    return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

ImageHeader probe_jpeg(Bytes b) {
    std::size_t i = 2;  // after SOI
    while (i + 4 <= b.size()) {
        if (b[i] != 0xFF) malformed("JPEG marker expected at byte " + std::to_string(i));
        const std::uint8_t m = b[i + 1];
        if (m == 0xFF) {
            ++i;
            continue;
        }  // fill byte
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {
            i += 2;
            continue;
        }                                   // no length
        if (m == 0xD9 || m == 0xDA) break;  // EOI or SOS before any SOF
        const std::size_t len = be16(b.data() + i + 2);
        if (len < 2) malformed("JPEG segment with invalid length");
        if (is_sof(m)) {
            // Length, precision, height, width, number of components.
            if (len < 8 || i + 10 > b.size()) malformed("JPEG frame header is incomplete");
            const std::uint32_t h = be16(b.data() + i + 5), w = be16(b.data() + i + 7);
            if (h == 0) malformed("JPEG height defined by a DNL marker is not supported");
            // OpenCV decodes 1 component as gray, 3 (YCbCr) and 4 (CMYK) as BGR.
            ImageHeader hd{"JPEG", w, h};
            hd.channels = b[i + 9] == 1 ? 1 : 3;
            hd.bytes_per_sample = sample_bytes(b[i + 4]);
            return hd;
        }
        i += 2 + len;
    }
    malformed("JPEG has no frame header (SOF marker)");
}

// A TIFF tile or strip may cover the image rounded up to 16 on each side, or
// this many pixels, whichever is more: 2048x2048, at most 16 MiB of RGBA.
constexpr std::uint64_t max_tiff_chunk_pixels_floor = std::uint64_t{1} << 22;

ImageHeader probe_tiff(Bytes b) {
    const bool le = b[0] == 'I';
    auto u16 = [&](std::uint64_t at) { return le ? le16(b.data() + at) : be16(b.data() + at); };
    auto u32 = [&](std::uint64_t at) { return le ? le32(b.data() + at) : be32(b.data() + at); };
    auto u64 = [&](std::uint64_t at) { return le ? le64(b.data() + at) : be64(b.data() + at); };
    const bool big = u16(2) == 43;  // BigTIFF: 64-bit offsets and counts
    if (big && b.size() < 16) malformed("BigTIFF header is incomplete");
    const std::uint64_t ifd = big ? u64(8) : u32(4);
    const std::uint64_t count_size = big ? 8 : 2, entry_size = big ? 20 : 12;
    if (ifd < 8 || ifd > b.size() || b.size() - ifd < count_size)
        malformed("TIFF first IFD offset is outside the file");
    const std::uint64_t n = big ? u64(ifd) : u16(ifd);
    if (n > (b.size() - ifd - count_size) / entry_size) malformed("TIFF first IFD is truncated");
    // The first value of an entry: inline when it fits, else at its offset;
    // nullopt for a non-integer type or an offset outside. libtiff reads a
    // size tag stored as any integer type (a TileLength as SSHORT too) and
    // refuses a negative one, so the probe reads them all alike.
    auto first_value = [&](std::uint64_t e) -> std::optional<std::uint64_t> {
        const unsigned type = u16(e + 2);
        const bool is_signed = type == 6 || type == 8 || type == 9 || type == 17;
        const unsigned size = (type == 1 || type == 6)                   ? 1
                              : (type == 3 || type == 8)                 ? 2
                              : (type == 4 || type == 9 || type == 13)   ? 4
                              : (type == 16 || type == 17 || type == 18) ? 8
                                                                         : 0;
        const std::uint64_t count = big ? u64(e + 4) : u32(e + 4);
        if (size == 0 || count == 0) return std::nullopt;
        std::uint64_t at = e + (big ? 12 : 8);
        if (count > (big ? 8u : 4u) / size) {
            at = big ? u64(at) : u32(at);
            if (at > b.size() || b.size() - at < size) return std::nullopt;
        }
        const std::uint64_t v = size == 1 ? b[at] : size == 2 ? u16(at) : size == 4 ? u32(at) : u64(at);
        const std::uint64_t sign_bit = std::uint64_t{1} << (8 * size - 1);
        if (is_signed && (v & sign_bit)) malformed("TIFF tag " + std::to_string(u16(e)) + " is negative");
        return v;
    };
    std::optional<std::uint64_t> width, height, bits, photometric, samples, rows_per_strip, tile_width, tile_length;
    std::set<const std::optional<std::uint64_t>*> seen;
    for (std::uint64_t k = 0; k < n; ++k) {
        const std::uint64_t e = ifd + count_size + k * entry_size;
        std::optional<std::uint64_t>* field = nullptr;
        switch (u16(e)) {
            case 256: field = &width; break;
            case 257: field = &height; break;
            case 258: field = &bits; break;  // per sample; OpenCV reads the first
            case 262: field = &photometric; break;
            case 277: field = &samples; break;
            case 278: field = &rows_per_strip; break;
            case 322: field = &tile_width; break;
            case 323: field = &tile_length; break;
            default: continue;
        }
        // libtiff keeps a tag's first entry and ignores repeats: so does the probe.
        if (seen.contains(field)) continue;
        seen.insert(field);
        *field = first_value(e);
        if ((field == &width || field == &height) && !*field) malformed("TIFF image size tag has an unexpected type");
    }
    if (!width || !height) malformed("TIFF first IFD has no ImageWidth/ImageLength");
    ImageHeader h{"TIFF", *width, *height};

    // What OpenCV decodes: 1 channel for one gray sample; 3 for a palette,
    // for 3 samples and for LogLuv (which it decodes as float); else 4.
    const std::uint64_t spp = samples.value_or(1);
    const bool logluv = photometric == 32844 || photometric == 32845;
    h.channels = spp == 1 && photometric != 3 && !logluv                ? 1
                 : spp == 3 || (spp == 1 && photometric == 3) || logluv ? 3
                                                                        : 4;
    h.bytes_per_sample = logluv ? 4 : sample_bytes(bits.value_or(1));

    // OpenCV reads a tile or strip at a time into a buffer of the declared
    // tile size (a strip: the image width x RowsPerStrip, even past the
    // image's height), after libtiff decodes it into one of its own; 8-bit
    // images pass through RGBA. A 1x1 image declaring 16384x16384 tiles took
    // 1.1 GB and seconds: refuse tiles and strips far larger than the image.
    const bool tiled = tile_width || tile_length;
    std::uint64_t cw = tiled ? tile_width.value_or(0) : *width;
    std::uint64_t ch = tiled ? tile_length.value_or(0) : rows_per_strip.value_or(0);
    if (cw == 0) cw = *width;
    if (ch == 0 || (!tiled && ch == 0xFFFFFFFFu)) ch = *height;
    // TIFF tiles are multiples of 16 on a side, so an image's tiles may cover
    // its size rounded up to 16; small images may use ordinary tile sizes.
    auto round16 = [](std::uint64_t v) { return add_sat(v, 15) & ~std::uint64_t{15}; };
    const std::uint64_t chunk_pixels = mul_sat(cw, ch);
    const std::uint64_t allowed = std::max(mul_sat(round16(*width), round16(*height)), max_tiff_chunk_pixels_floor);
    if (chunk_pixels > allowed)
        malformed((tiled ? "TIFF tiles of " + std::to_string(cw) + "x" + std::to_string(ch)
                         : "TIFF strips of " + std::to_string(ch) + " rows") +
                  " are out of proportion to the " + std::to_string(*width) + "x" + std::to_string(*height) +
                  " image (cbi allows the image rounded up to 16 pixels a side, or 2^22 pixels)");
    const std::uint64_t decoded_spp = std::min<std::uint64_t>(spp, 4);  // OpenCV refuses more
    const std::uint64_t opencv_per_pixel = h.bytes_per_sample == 1 ? 4 : decoded_spp * h.bytes_per_sample;
    h.scratch_bytes = mul_sat(chunk_pixels, opencv_per_pixel + decoded_spp * h.bytes_per_sample);
    return h;
}

// BMP fields past the file and info header sizes (offset 14).
struct BmpLayout {
    std::uint64_t data_offset, bit_count, compression;
};
BmpLayout bmp_layout(Bytes b) {
    const std::uint32_t dib = le32(b.data() + 14);
    if (dib == 12) return {le32(b.data() + 10), le16(b.data() + 24), 0};  // OS/2 core header: never compressed
    if (b.size() < 34) malformed("BMP header is incomplete");
    return {le32(b.data() + 10), le16(b.data() + 28), le32(b.data() + 30)};
}

ImageHeader probe_bmp(Bytes b) {
    if (b.size() < 26) malformed("BMP header is incomplete");
    const std::uint32_t dib = le32(b.data() + 14);
    ImageHeader hd{"BMP"};
    if (dib == 12) {  // OS/2 core header
        hd.width = le16(b.data() + 18), hd.height = le16(b.data() + 20);
    } else {
        if (dib != 40 && dib != 52 && dib != 56 && dib != 64 && dib != 108 && dib != 124)
            malformed("BMP has an unknown header size " + std::to_string(dib));
        const auto w = static_cast<std::int32_t>(le32(b.data() + 18)),
                   h = static_cast<std::int32_t>(le32(b.data() + 22));
        if (w < 0) malformed("BMP has a negative width");
        hd.width = static_cast<std::uint64_t>(w);
        hd.height = h < 0 ? 0 - static_cast<std::uint64_t>(std::int64_t{h}) : static_cast<std::uint64_t>(h);
    }
    // OpenCV: 32 bits per pixel -> BGRA; fewer -> BGR (or gray for a gray palette).
    hd.channels = bmp_layout(b).bit_count == 32 ? 4 : 3;
    hd.bytes_per_sample = 1;
    return hd;
}

ImageHeader probe_webp(Bytes b) {
    if (b.size() < 30) malformed("WebP header is incomplete");
    const std::uint8_t* c = b.data() + 12;
    // OpenCV decodes WebP as 8-bit BGR, or BGRA when the header flags alpha.
    auto header = [](std::uint64_t w, std::uint64_t h, bool alpha) {
        ImageHeader hd{"WebP", w, h};
        hd.channels = alpha ? 4 : 3;
        hd.bytes_per_sample = 1;
        return hd;
    };
    if (std::memcmp(c, "VP8X", 4) == 0)  // extended: flags (alpha 0x10), 24-bit canvas size minus one
        return header(1 + (c[12] | (c[13] << 8) | (std::uint32_t{c[14]} << 16)),
                      1 + (c[15] | (c[16] << 8) | (std::uint32_t{c[17]} << 16)), (c[8] & 0x10) != 0);
    if (std::memcmp(c, "VP8L", 4) == 0) {  // lossless: signature 0x2F, then 14+14 bits minus one, alpha bit
        if (c[8] != 0x2F) malformed("WebP lossless signature missing");
        const std::uint32_t bits = le32(c + 9);
        return header(1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF), ((bits >> 28) & 1) != 0);
    }
    if (std::memcmp(c, "VP8 ", 4) == 0) {  // lossy: frame tag (3), start code 9D 01 2A, 14-bit sizes
        if (c[11] != 0x9D || c[12] != 0x01 || c[13] != 0x2A) malformed("WebP VP8 start code missing");
        return header(le16(c + 14) & 0x3FFF, le16(c + 16) & 0x3FFF, false);
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

// A Netpbm header (P1-P7, PFM) and where its samples start.
struct NetpbmLayout {
    char kind;  // '1'..'7', 'f' (PFM gray) or 'F' (PFM colour)
    std::uint64_t width, height;
    std::uint64_t depth;   // samples per pixel
    std::uint64_t maxval;  // 1 for P1/P4; 0 for PFM (float samples)
    std::uint64_t data;    // offset just after the last header token
};

NetpbmLayout netpbm_layout(Bytes b) {
    TextScanner s{b, 2};
    NetpbmLayout l{static_cast<char>(b[1]), 0, 0, 1, 1, 0};
    if (l.kind == '7') {
        std::optional<std::uint64_t> w, h;
        for (int tokens = 0; tokens < 64; ++tokens) {
            const std::string t = s.word();
            if (t == "WIDTH")
                w = s.number("width");
            else if (t == "HEIGHT")
                h = s.number("height");
            else if (t == "DEPTH")
                l.depth = s.number("depth");
            else if (t == "MAXVAL")
                l.maxval = s.number("maxval");
            else if (t == "ENDHDR" || t.empty())
                break;
        }
        if (!w || !h) malformed("PAM header has no WIDTH/HEIGHT");
        l.width = *w, l.height = *h;
    } else {
        l.width = s.number("width");
        l.height = s.number("height");
        if (l.kind == '3' || l.kind == '6') l.depth = 3;
        if (l.kind == 'F') l.depth = 3;
        if (l.kind == 'f' || l.kind == 'F') {
            l.maxval = 0;
            s.word();  // the scale, e.g. -1.0
        } else if (l.kind != '1' && l.kind != '4') {
            l.maxval = s.number("maxval");
        }
    }
    l.data = s.i;
    return l;
}

ImageHeader probe_pnm(Bytes b) {
    const NetpbmLayout l = netpbm_layout(b);
    ImageHeader h{l.kind == 'f' || l.kind == 'F' ? "PFM" : l.kind == '7' ? "PAM" : "PNM", l.width, l.height};
    h.channels = l.depth <= 1 ? 1 : l.depth == 3 ? 3 : 4;
    h.bytes_per_sample = l.maxval == 0 ? 4 : l.maxval > 255 ? 2 : 1;
    return h;
}

// The value sizes of OpenEXR's fixed-size attribute types. OpenEXR reads
// these types by their own size, whatever size the file declares: a file
// declaring another one would have OpenEXR read on from a different byte
// than the probe, into values the probe never checked.
std::optional<std::uint32_t> exr_fixed_size(std::string_view type) {
    static constexpr std::pair<std::string_view, std::uint32_t> sizes[] = {{"box2i", 16},
                                                                           {"box2f", 16},
                                                                           {"v2i", 8},
                                                                           {"v2f", 8},
                                                                           {"v2d", 16},
                                                                           {"v3i", 12},
                                                                           {"v3f", 12},
                                                                           {"v3d", 24},
                                                                           {"m33f", 36},
                                                                           {"m33d", 72},
                                                                           {"m44f", 64},
                                                                           {"m44d", 128},
                                                                           {"int", 4},
                                                                           {"float", 4},
                                                                           {"double", 8},
                                                                           {"compression", 1},
                                                                           {"lineOrder", 1},
                                                                           {"envmap", 1},
                                                                           {"deepImageState", 1},
                                                                           {"chromaticities", 32},
                                                                           {"keycode", 28},
                                                                           {"timecode", 8},
                                                                           {"rational", 8},
                                                                           {"tiledesc", 9}};
    for (const auto& [name, size] : sizes)
        if (name == type) return size;
    return std::nullopt;
}

// Checks that OpenEXR reads exactly the declared bytes `v` of an attribute
// of `type` and allocates no more than the file holds; returns a chlist's
// channels (nothing for other types). The variable-size types OpenEXR parses itself
// (chlist, preview, floatvector, stringvector, idmanifest) are walked here as
// OpenEXR walks them: a channel list ends at its empty name and a string
// vector at its declared size, whatever the size says, and either read past
// the attribute would have OpenEXR read the next one from another byte
// (fuzz/regressions/fuzz_image).
struct ExrChannelList {
    std::uint32_t count = 0;
    bool alpha = false;  // a channel named "A"
};
ExrChannelList check_exr_value(const std::string& name, const std::string& type, Bytes v) {
    const auto refuse = [&](const std::string& why) {
        malformed("OpenEXR attribute '" + name + "' (" + type + "): " + why);
    };
    if (const auto fixed = exr_fixed_size(type); fixed && v.size() != *fixed)
        refuse("declares " + std::to_string(v.size()) + " bytes, not " + std::to_string(*fixed));
    if (type == "preview" && (v.size() < 8 || std::uint64_t{le32(v.data())} * le32(v.data() + 4) * 4 != v.size() - 8))
        refuse("its size does not match its pixels");
    if (type == "floatvector" && v.size() % 4 != 0) refuse("its size is not a whole number of floats");
    if (type == "idmanifest" && v.size() < 4) refuse("it is shorter than its 4-byte length");
    if (type == "stringvector") {
        // Entries: int32 length, then that many bytes, up to the declared size.
        for (std::size_t j = 0; j < v.size();) {
            if (v.size() - j < 4) refuse("a string's length runs past the attribute");
            const std::uint32_t n = le32(v.data() + j);
            j += 4;
            if (n > v.size() - j) refuse("a string runs past the attribute");
            j += n;
        }
    }
    ExrChannelList list;
    if (type == "chlist") {
        // Entries: name\0 (at most 255 bytes), then 16 bytes (type, linear,
        // reserved, sampling); an empty name ends it, exactly at the size.
        std::size_t j = 0;
        for (; j < v.size() && v[j] != 0; ++list.count) {
            const auto* z = static_cast<const std::uint8_t*>(std::memchr(v.data() + j, 0, v.size() - j));
            if (!z || z - (v.data() + j) > 255) refuse("a channel name runs past the list");
            list.alpha = list.alpha || (z - (v.data() + j) == 1 && v[j] == 'A');
            j = z - v.data() + 1 + 16;
        }
        if (j + 1 != v.size() || v[j] != 0) refuse("the channel list does not end where its size says");
    }
    return list;
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
    std::optional<ImageHeader> found;
    std::optional<std::uint32_t> channels;
    // Every attribute to the header's end, and in a multi-part file every
    // part's header: OpenEXR allocates each attribute's declared size (and a
    // preview's declared pixels) before reading it, so a size beyond the file
    // must be refused here (a 474-byte file made it allocate 1.6 GB, and a
    // second part's header 1.9 GB; fuzz/regressions/fuzz_image).
    if (b.size() < 8) malformed("OpenEXR header is truncated");
    const bool multipart = (le32(b.data() + 4) & 0x1000) != 0;
    bool ended = false;
    for (int part = 0; !ended && i < b.size(); ++part) {
        bool empty = true, closed = false;  // a multi-part file's headers end with an empty one
        // OpenEXR reads a repeated attribute into the first (a repeated
        // channel list adds its channels to the first's): refused, as no
        // writer repeats one.
        std::set<std::string> names;
        while (i < b.size()) {
            const std::string name = cstr();
            if (name.empty()) {
                closed = true;
                break;
            }
            if (!names.insert(name).second) malformed("OpenEXR header repeats its attribute '" + name + "'");
            empty = false;
            const std::string type = cstr();
            if (i + 4 > b.size()) malformed("OpenEXR header is truncated");
            const std::uint32_t size = le32(b.data() + i);
            i += 4;
            if (size > b.size() - i) malformed("OpenEXR header is truncated (an attribute is larger than the file)");
            const Bytes value = b.subspan(i, size);
            const ExrChannelList listed = check_exr_value(name, type, value);
            if (part == 0 && name == "dataWindow" && type == "box2i") {
                const auto x0 = static_cast<std::int32_t>(le32(value.data())),
                           y0 = static_cast<std::int32_t>(le32(value.data() + 4));
                const auto x1 = static_cast<std::int32_t>(le32(value.data() + 8)),
                           y1 = static_cast<std::int32_t>(le32(value.data() + 12));
                const std::int64_t w = std::int64_t{x1} - x0 + 1, h = std::int64_t{y1} - y0 + 1;
                found = ImageHeader{"OpenEXR", static_cast<std::uint64_t>(std::max<std::int64_t>(w, 0)),
                                    static_cast<std::uint64_t>(std::max<std::int64_t>(h, 0))};
            } else if (part == 0 && name == "channels" && type == "chlist") {
                // OpenCV decodes one channel as gray, luminance/chroma or RGB as BGR, and adds alpha if present.
                channels = listed.count == 1 ? 1 : listed.count == 3 && !listed.alpha ? 3 : 4;
            }
            i += size;
        }
        if (!closed) break;
        ended = !multipart || (empty && part > 0);
    }
    if (!ended) malformed("OpenEXR header is truncated (no end of header)");
    if (!found) malformed("OpenEXR header has no dataWindow");
    found->channels = channels.value_or(4);
    found->bytes_per_sample = 4;  // half and float samples both decode to float
    return *found;
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
    ImageHeader h = a1[1] == 'Y' ? ImageHeader{"Radiance HDR", n2, n1} : ImageHeader{"Radiance HDR", n1, n2};
    h.channels = 3;  // RGBE decodes to 3 floats
    return h;
}

const char* const known_formats = "PNG, JPEG, TIFF, BMP, WebP, PNM/PAM/PFM, OpenEXR, Radiance HDR, Sun raster";

// Throws Malformed; returns nullopt for an unrecognized signature.
std::optional<ImageHeader> probe(Bytes b) {
    if (starts_with(b, "\x89PNG\r\n\x1a\n"sv)) return probe_png(b);
    if (starts_with(b, "\xFF\xD8\xFF"sv)) return probe_jpeg(b);
    if (starts_with(b, "II*\0"sv) || starts_with(b, "MM\0*"sv) || starts_with(b, "II+\0"sv) ||
        starts_with(b, "MM\0+"sv)) {
        if (b.size() < 8) malformed("TIFF header is incomplete");
        return probe_tiff(b);
    }
    if (starts_with(b, "BM"sv)) return probe_bmp(b);
    if (b.size() >= 12 && starts_with(b, "RIFF"sv) && std::memcmp(b.data() + 8, "WEBP", 4) == 0) return probe_webp(b);
    if (b.size() >= 3 && b[0] == 'P' && ((b[1] >= '1' && b[1] <= '6') || b[1] == 'f' || b[1] == 'F') &&
        std::isspace(b[2]))
        return probe_pnm(b);
    if (starts_with(b, "P7\n"sv)) return probe_pnm(b);
    if (starts_with(b, "\x76\x2f\x31\x01"sv)) return probe_exr(b);
    if (starts_with(b, "#?RADIANCE"sv) || starts_with(b, "#?RGBE"sv)) return probe_hdr(b);
    if (starts_with(b, "\x59\xa6\x6a\x95"sv)) {
        if (b.size() < 12) malformed("Sun raster header is incomplete");
        ImageHeader h{"Sun raster", be32(b.data() + 4), be32(b.data() + 8)};
        h.channels = 3;  // OpenCV: BGR, or gray for a gray palette or none
        h.bytes_per_sample = 1;
        return h;
    }
    return std::nullopt;
}

// Truncation checks for formats whose decoders accept (JPEG) or complain
// noisily about (PNG) cut files, and checks that the data can hold the
// image the header declares, before a decoder allocates it. Each returns
// the reason, or empty.

// The reason for data shorter than the header's size needs.
std::string too_short(const ImageHeader& h, std::uint64_t need, std::uint64_t have, const char* what = "bytes") {
    return "truncated " + std::string(h.format) + " data (" + std::to_string(h.width) + "x" + std::to_string(h.height) +
           " needs at least " + std::to_string(need) + " " + what + ", the file has " + std::to_string(have) + ")";
}

std::string png_truncated(Bytes b, const ImageHeader& h) {
    std::uint64_t idat = 0;
    bool iend = false;
    for_each_png_chunk(b, [&](std::uint64_t at, std::uint64_t len, std::string_view type) {
        if (type == "IDAT") idat = add_sat(idat, len);
        iend = type == "IEND" && at + 12 <= b.size();  // with its CRC
        return type != "IEND";
    });
    if (!iend) return "truncated PNG data (no IEND chunk)";
    // Deflate spends at least 2 bits (a length and a distance code) on at
    // most 258 bytes, so the compressed data is at least 1/1032 of the raw
    // samples (w x h x bits per pixel, less than the filtered rows). A PNG
    // of 16384x16384 zeros is 261 KB; one declaring that with 100 bytes is cut.
    const unsigned depth = b[24], colour = b[25];
    const unsigned samples = colour == 2 ? 3 : colour == 4 ? 2 : colour == 6 ? 4 : 1;
    const std::uint64_t raw_bits = mul_sat(mul_sat(h.width, h.height), std::uint64_t{depth} * samples);
    const std::uint64_t need = raw_bits / 8 / 1032;
    if (idat < need) return too_short(h, need, idat, "bytes of compressed data");
    return {};
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
            if (m == 0x00 || (m >= 0xD0 && m <= 0xD7) || m == 0xFF) {
                i += (m == 0xFF ? 1 : 2);
                continue;
            }
            in_scan = false;
            continue;
        }
        if (i + 2 > n) break;
        if (p[i] != 0xFF) return "corrupt JPEG data (marker expected at byte " + std::to_string(i) + ")";
        const std::uint8_t m = p[i + 1];
        if (m == 0xFF) {
            ++i;
            continue;
        }
        if (m == 0xD9) return {};
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {
            i += 2;
            continue;
        }
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

std::string netpbm_truncated(Bytes b, const ImageHeader& h) {
    const NetpbmLayout l = netpbm_layout(b);
    const std::uint64_t pixels = mul_sat(l.width, l.height), samples = mul_sat(pixels, l.depth);
    std::uint64_t need;
    std::uint64_t data = l.data + 1;  // binary: one whitespace byte after the header, then the samples
    switch (l.kind) {
        case '1': need = add_sat(pixels, 1), data = l.data; break;  // ASCII bits: at least one character each
        case '2':
        case '3': need = mul_sat(samples, 2), data = l.data; break;     // ASCII: a separator and a digit each
        case '4': need = mul_sat(div_up(l.width, 8), l.height); break;  // bits, rows padded to bytes
        default: need = mul_sat(samples, h.bytes_per_sample); break;    // P5, P6, PAM, PFM
    }
    const std::uint64_t have = data > b.size() ? 0 : b.size() - data;
    if (have < need) return too_short(h, need, have);
    return {};
}

// Uncompressed BMP rows are padded to 4 bytes (OpenCV reads whole padded rows,
// the last one too); RLE and embedded JPEG/PNG data have no lower bound.
std::string bmp_truncated(Bytes b, const ImageHeader& h) {
    const BmpLayout l = bmp_layout(b);
    if (l.compression != 0 && l.compression != 3 && l.compression != 6) return {};  // RGB, BITFIELDS, ALPHABITFIELDS
    if (l.bit_count == 0) return {};
    const std::uint64_t row_bits = mul_sat(h.width, l.bit_count);
    const std::uint64_t need = mul_sat(div_up(row_bits, 32) * 4, h.height);
    const std::uint64_t have = l.data_offset > b.size() ? 0 : b.size() - l.data_offset;
    if (have < need) return too_short(h, need, have);
    return {};
}

// Sun raster: a 32-byte header, a colour map, rows padded to 16 bits;
// type 2 is run-length coded, 3 bytes for at most 256.
std::string sun_raster_truncated(Bytes b, const ImageHeader& h) {
    if (b.size() < 32) return "Sun raster header is incomplete";
    const std::uint64_t depth = be32(b.data() + 12), type = be32(b.data() + 20), map_length = be32(b.data() + 28);
    if (type > 3) return {};
    const std::uint64_t row_bits = mul_sat(h.width, depth);
    std::uint64_t need =
        h.height == 0 ? 0 : add_sat(mul_sat(div_up(row_bits, 16) * 2, h.height - 1), div_up(row_bits, 8));
    if (type == 2) need = need / 256 * 3;
    const std::uint64_t data = 32 + map_length;
    const std::uint64_t have = data > b.size() ? 0 : b.size() - data;
    if (have < need) return too_short(h, need, have);
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
    bool stores(int depth, int ch) const {
        return ((depth == CV_8U && u8) || (depth == CV_16U && u16) || (depth == CV_32F && f32)) &&
               ((ch == 1 && ch1) || (ch == 3 && ch3) || (ch == 4 && ch4));
    }
};

constexpr FormatRule format_rules[] = {
    {".png", "PNG", true, true, false, true, true, true},
    {".jpg .jpeg .jpe", "JPEG", true, false, false, true, true, false},
    {".tiff .tif", "TIFF", true, true, true, true, true, true},
    {".bmp", "BMP", true, false, false, true, true, false},
    {".webp", "WebP", true, false, false, false, true, true},
    {".pgm", "PGM", true, true, false, true, false, false},
    {".ppm", "PPM", true, true, false, false, true, false},
    {".pnm", "PNM", true, true, false, true, true, false},
    {".pfm", "PFM", false, false, true, true, true, false},
    {".exr", "OpenEXR", false, false, true, true, true, true},
};

// "use .tiff, .pfm or .exr": the formats that can store this depth and
// channel count (the first extension of each).
std::string formats_for(int depth, int ch) {
    std::vector<std::string> exts;
    for (const auto& r : format_rules)
        if (r.stores(depth, ch))
            exts.emplace_back(std::string_view(r.exts).substr(0, std::string_view(r.exts).find(' ')));
    std::string out = "use ";
    for (std::size_t i = 0; i < exts.size(); ++i) out += (i == 0 ? "" : i + 1 == exts.size() ? " or " : ", ") + exts[i];
    return out;
}

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

// The temporaries of writes in progress in this process, so that
// abandon_atomic_writes can remove them; once abandoned, no write renames.
struct LiveTemporaries {
    std::mutex mutex;
    std::set<std::string> paths;
    bool abandoned = false;
};
LiveTemporaries& live_temporaries() {
    static LiveTemporaries live;
    return live;
}

// A `.cbi-tmp-XXXXXX` file in `dir`, flock'ed for as long as it exists (the
// lock tells remove_stale_temporaries that a live write owns it), removed
// unless `path` is cleared after the rename.
struct TempFile {
    std::string path;
    int fd = -1;

    TempFile(const fs::path& dir, const std::string& subject) {
        for (;;) {
            std::string templ = (dir / (std::string(temp_prefix) + "XXXXXX")).string();
            fd = ::mkostemp(templ.data(), O_CLOEXEC);
            if (fd < 0)
                throw Error(subject, "cannot create a temporary file in " + dir.string() + ": " + errno_text(errno));
            struct stat st;
            // A cleaner may have taken the file between mkostemp and flock:
            // then it is unlinked (no links left) and we start over.
            if (::flock(fd, LOCK_EX) == 0 && ::fstat(fd, &st) == 0 && st.st_nlink > 0) {
                path = templ;
                break;
            }
            ::close(fd);
        }
        LiveTemporaries& live = live_temporaries();
        std::lock_guard lock(live.mutex);
        if (live.abandoned) {  // no destructor runs for a constructor that throws
            ::unlink(path.c_str());
            ::close(fd);
            throw Error(subject, "interrupted");
        }
        live.paths.insert(path);
    }
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;
    ~TempFile() {
        if (!path.empty()) {
            LiveTemporaries& live = live_temporaries();
            std::lock_guard lock(live.mutex);
            ::unlink(path.c_str());
            live.paths.erase(path);
        }
        if (fd >= 0) ::close(fd);  // after the unlink: the lock is held until the file is gone
    }

    // Renames the file to `out` unless the writes were abandoned.
    void commit(const fs::path& out, const std::string& subject) {
        LiveTemporaries& live = live_temporaries();
        std::lock_guard lock(live.mutex);
        if (live.abandoned) throw Error(subject, "interrupted");
        if (::rename(path.c_str(), out.c_str()) != 0)
            throw Error(subject, "cannot rename into place: " + errno_text(errno));
        live.paths.erase(path);
        path.clear();  // now it is the output
    }
};

}  // namespace

// ---------------------------------------------------------------- public

std::vector<std::uint8_t> read_file(const fs::path& path, std::size_t at_most) {
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

    std::vector<std::uint8_t> bytes(std::min(static_cast<std::size_t>(st.st_size), at_most));
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

std::uint64_t ImageHeader::decoded_bytes() const {
    return mul_sat(mul_sat(width, height), std::uint64_t{channels} * bytes_per_sample);
}

ImageHeader probe_image(Bytes bytes, const std::string& subject) {
    try {
        if (auto h = probe(bytes)) return *h;
    } catch (const Malformed& m) {
        throw Error(subject, m.reason);
    }
    throw Error(subject, std::string("not a recognized image format (cbi reads ") + known_formats + ")");
}

ImageHeader probe_file(const fs::path& path) {
    constexpr std::size_t kHead = 256 * 1024;
    const std::vector<std::uint8_t> head = read_file(path, kHead);
    if (head.size() < kHead) return probe_image(head, path.string());  // the whole file
    try {
        return probe_image(head, path.string());
    } catch (const Error&) {
        return probe_image(read_file(path), path.string());
    }
}

ImageHeader check_image(Bytes bytes, const std::string& subject, std::uint64_t max_pixels, std::uint64_t max_bytes) {
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
    // From the header's size (EXIF orientation only swaps it). Not counted:
    // a JPEG that is turned briefly holds a second copy.
    const std::uint64_t decoded = h.decoded_bytes(), needed = add_sat(decoded, h.scratch_bytes);
    if (needed > max_bytes) {
        auto number = [](std::uint64_t v) {
            return v == ~std::uint64_t{0} ? std::string("more than 2^64") : std::to_string(v);
        };
        throw Error(
            subject,
            "image is " + std::to_string(h.width) + "x" + std::to_string(h.height) + " x " +
                std::to_string(h.channels) + (h.channels == 1 ? " channel x " : " channels x ") +
                std::to_string(h.bytes_per_sample) + (h.bytes_per_sample == 1 ? " byte = " : " bytes = ") +
                number(decoded) + " bytes decoded" +
                (h.scratch_bytes ? " + " + number(h.scratch_bytes) + " bytes of " + h.format + " tile/strip buffers"
                                 : "") +
                ", larger than --max-memory " + std::to_string(max_bytes));
    }

    std::string cut;
    const std::string_view format = h.format;
    try {
        if (format == "PNG")
            cut = png_truncated(bytes, h);
        else if (format == "JPEG")
            cut = jpeg_truncated(bytes);
        else if (format == "WebP")
            cut = webp_truncated(bytes);
        else if (format == "PNM" || format == "PAM" || format == "PFM")
            cut = netpbm_truncated(bytes, h);
        else if (format == "BMP")
            cut = bmp_truncated(bytes, h);
        else if (format == "Sun raster")
            cut = sun_raster_truncated(bytes, h);
    } catch (const Malformed& m) {
        throw Error(subject, m.reason);
    }
    if (!cut.empty()) throw Error(subject, cut);
    return h;
}

cv::Mat decode_image(Bytes bytes, const std::string& subject, std::uint64_t max_pixels, std::uint64_t max_bytes) {
    const ImageHeader h = check_image(bytes, subject, max_pixels, max_bytes);
    const std::string_view format = h.format;
    const std::uint64_t pixels = h.width * h.height;  // checked: at most max_pixels

    // OpenCV refuses sizes over its own limits (read once at load from
    // OPENCV_IO_MAX_IMAGE_PIXELS/_WIDTH/_HEIGHT), by exception or empty Mat.
    const bool over_opencv_limits = pixels > (std::uint64_t{1} << 30) || h.width > (1u << 20) || h.height > (1u << 20);
    const std::string opencv_limits = "image is " + std::to_string(h.width) + "x" + std::to_string(h.height) +
                                      ", over OpenCV's decoder limits (OPENCV_IO_MAX_IMAGE_PIXELS, default 2^30 "
                                      "pixels, and 2^20 per side)";
    cv::Mat mat;
    try {
        if (bytes.size() > INT32_MAX) throw Error(subject, "files over 2 GiB are not supported by the decoder");
        // JPEG by libjpeg-turbo directly (the same pixels; corrupt data is
        // an error), OpenCV for what it leaves.
        if (format == "JPEG" && !over_opencv_limits)
            if (auto jpeg = decode_jpeg(bytes, subject)) mat = std::move(*jpeg);
        if (mat.empty()) {
            // A Mat header over the bytes (no copy): imdecode only reads them.
            const cv::Mat buf(1, static_cast<int>(bytes.size()), CV_8U, const_cast<std::uint8_t*>(bytes.data()));
            // IMREAD_UNCHANGED keeps alpha and 16 bits but ignores EXIF
            // orientation; for JPEG (no alpha, 8 bits, gray or BGR)
            // ANYCOLOR|ANYDEPTH gives the same Mat, turned as EXIF says.
            mat =
                cv::imdecode(buf, format == "JPEG" ? cv::IMREAD_ANYCOLOR | cv::IMREAD_ANYDEPTH : cv::IMREAD_UNCHANGED);
        }
    } catch (const cv::Exception& e) {
        if (over_opencv_limits) throw Error(subject, opencv_limits);
        throw Error(subject, "cannot decode " + std::string(h.format) + ": " + cv_reason(e));
    }
    if (mat.empty()) {
        if (over_opencv_limits) throw Error(subject, opencv_limits);
        throw Error(subject, "corrupt or unsupported image data (" + std::string(h.format) + ")");
    }
    // Another size is not an error by itself (a JPEG turned by its EXIF
    // orientation, a TIFF whose first IFD is a thumbnail), but the limits
    // must still hold for what was decoded.
    if (static_cast<std::uint64_t>(mat.total()) > max_pixels)
        throw Error(subject, "decoded image is " + std::to_string(mat.cols) + "x" + std::to_string(mat.rows) +
                                 ", larger than --max-pixels " + std::to_string(max_pixels));
    if (static_cast<std::uint64_t>(mat.total() * mat.elemSize()) > max_bytes)
        throw Error(subject, "decoded image is " + std::to_string(mat.total() * mat.elemSize()) +
                                 " bytes, larger than --max-memory " + std::to_string(max_bytes));

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

cv::Mat read_image(const fs::path& path, std::uint64_t max_pixels, std::uint64_t max_bytes) {
    const std::vector<std::uint8_t> bytes = read_file(path);
    return decode_image(bytes, path.string(), max_pixels, max_bytes);
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
        const char* d = depth == CV_8U    ? "8-bit"
                        : depth == CV_16U ? "16-bit"
                        : depth == CV_32F ? "32-bit float"
                                          : nullptr;
        throw Error(subject, std::string(r->name) + " cannot store " + (d ? d : cv::typeToString(cv_type).c_str()) +
                                 " images; " + formats_for(depth, ch));
    }
    const bool ch_ok = (ch == 1 && r->ch1) || (ch == 3 && r->ch3) || (ch == 4 && r->ch4);
    if (!ch_ok)
        throw Error(subject, std::string(r->name) + " cannot store " + std::to_string(ch) + "-channel images" +
                                 (ch == 4 ? " (alpha would be lost); " : "; ") + formats_for(depth, ch));
}

std::string_view output_format(const fs::path& out) {
    const FormatRule* r = rule_for(lower_extension(out));
    return r ? r->name : "";
}

void check_write_options(const WriteOptions& options) {
    if (options.quality != 0 && (options.quality < 1 || options.quality > 100))
        throw std::invalid_argument("quality " + std::to_string(options.quality) + " is outside 1..100");
    if (options.png_compression < -1 || options.png_compression > 9)
        throw std::invalid_argument("PNG compression " + std::to_string(options.png_compression) + " is outside 0..9");
}

namespace {

// The bytes written to a temporary beside `out`, fsync'ed and renamed over it.
void write_bytes_atomic(const fs::path& out, std::span<const std::uint8_t> encoded) {
    const std::string subject = out.string();
    struct stat st;
    mode_t mode;
    if (::stat(out.c_str(), &st) == 0) {
        if (S_ISDIR(st.st_mode)) throw Error(subject, "is a directory");
        mode = st.st_mode & 07777;  // replacing: keep the old file's permissions
    } else {
        mode = new_file_mode();
    }

    const fs::path dir = out.has_parent_path() ? out.parent_path() : fs::path(".");
    TempFile tmp(dir, subject);

    if (::fchmod(tmp.fd, mode) != 0) throw Error(subject, "cannot set permissions: " + errno_text(errno));
    std::size_t done = 0;
    while (done < encoded.size()) {
        const ssize_t w = ::write(tmp.fd, encoded.data() + done, encoded.size() - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) throw Error(subject, "write failed: " + errno_text(errno));
        done += static_cast<std::size_t>(w);
    }
    // Closed (and unlocked) only after the rename; fsync has reported any
    // write error, so a close error can no longer lose data.
    if (::fsync(tmp.fd) != 0) throw Error(subject, "fsync failed: " + errno_text(errno));
    tmp.commit(out, subject);

    // Make the rename itself durable; failure here cannot undo the write.
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
}

}  // namespace

EncodedImage encode_image(const fs::path& out, const cv::Mat& image, const WriteOptions& options,
                          const ImageMetadata& metadata) {
    const std::string subject = out.string();
    if (image.empty()) throw Error(subject, "cannot write an empty image");
    check_output_format(out, image.type());
    try {
        check_write_options(options);
    } catch (const std::invalid_argument& e) {
        throw Error(subject, e.what());
    }

    std::vector<int> params;
    const std::string ext = lower_extension(out);
    const std::string_view format = rule_for(ext)->name;
    if (format == "JPEG") params = {cv::IMWRITE_JPEG_QUALITY, jpeg_quality(options)};
    // Without a quality OpenCV writes lossless WebP.
    if (format == "WebP" && options.quality) params = {cv::IMWRITE_WEBP_QUALITY, options.quality};
    if (format == "PNG" && options.png_compression >= 0)
        params = {cv::IMWRITE_PNG_COMPRESSION, options.png_compression};
    // OpenCV 4.6 writes 3-channel float TIFF as lossy SGILOG (LogLuv) unless a
    // compression is given (1.0 came back as 1.0268); any explicit one is exact.
    if (format == "TIFF") params = {cv::IMWRITE_TIFF_COMPRESSION, 5 /* LZW */};
    std::vector<std::uint8_t> encoded;
    try {
        // A JPEG, or a PNG at the default level, of more than one band is
        // encoded on all cores (pipeline/jpeg_bands.hpp, png_bands.hpp).
        if (auto bands = format == "JPEG" ? encode_jpeg_bands(image, jpeg_quality(options)) : std::nullopt)
            encoded = std::move(*bands);
        else if (auto png = format == "PNG" && options.png_compression < 0 ? encode_png_bands(image) : std::nullopt)
            encoded = std::move(*png);
        else if (!cv::imencode(ext, image, encoded, params))
            throw Error(subject, "encoding failed");
    } catch (const cv::Exception& e) {
        throw Error(subject, "encoding failed: " + cv_reason(e));
    }
    // A failure leaves the plain encoding.
    std::string warning;
    if (!options.strip && !metadata.empty())
        warning = detail::embed_metadata(encoded, format, image.channels(), metadata, subject);
    return {std::move(encoded), std::move(warning)};
}

std::string write_image_atomic(const fs::path& out, const cv::Mat& image, const WriteOptions& options,
                               const ImageMetadata& metadata) {
    const std::string subject = out.string();
    // In memory, before the temporary exists: no file ever holds a half-written image.
    EncodedImage encoded_image = encode_image(out, image, options, metadata);
    write_bytes_atomic(out, encoded_image.bytes);
    return std::move(encoded_image.warning);
}

std::string write_encoded_atomic(const fs::path& out, std::vector<std::uint8_t> encoded, int channels,
                                 const WriteOptions& options, const ImageMetadata& metadata) {
    std::string warning;
    if (!options.strip && !metadata.empty())
        warning = detail::embed_metadata(encoded, output_format(out), channels, metadata, out.string());
    write_bytes_atomic(out, encoded);
    return warning;
}

bool is_temporary_name(std::string_view name) {
    if (name.size() != temp_prefix.size() + 6 || !name.starts_with(temp_prefix)) return false;
    return std::all_of(name.begin() + temp_prefix.size(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    });
}

std::size_t remove_stale_temporaries(const fs::path& dir, std::span<const fs::path> keep) {
    std::size_t removed = 0;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const fs::path& p = it->path();
        if (!is_temporary_name(p.filename().string())) continue;
        const int fd = ::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat held, named;
        // Unlocked: no write owns it. Still the same file under that name:
        // not one that a new write created meanwhile. Not an input.
        if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::fstat(fd, &held) == 0 && S_ISREG(held.st_mode) &&
            ::lstat(p.c_str(), &named) == 0 && held.st_dev == named.st_dev && held.st_ino == named.st_ino &&
            std::none_of(keep.begin(), keep.end(), [&](const fs::path& k) { return same_file(k, p); }) &&
            ::unlink(p.c_str()) == 0)
            ++removed;
        ::close(fd);
    }
    return removed;
}

void abandon_atomic_writes() noexcept {
    LiveTemporaries& live = live_temporaries();
    std::lock_guard lock(live.mutex);
    live.abandoned = true;
    for (const std::string& p : live.paths) ::unlink(p.c_str());
}

bool same_file(const fs::path& a, const fs::path& b) {
    struct stat sa, sb;
    if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace cbi
