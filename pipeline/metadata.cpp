// EXIF, ICC and XMP carried from inputs to outputs through exiv2 (OpenCV
// reads none of it and writes none). Built without exiv2, no metadata is
// read or written.
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/byte_order.hpp"
#include "pipeline/error.hpp"
#include "pipeline/image_io.hpp"
#include "pipeline/metadata.hpp"

#if CBI_HAVE_EXIV2
#include <mutex>
// exiv2 0.27's headers use std::auto_ptr.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <exiv2/exiv2.hpp>
#pragma GCC diagnostic pop
#endif

namespace cbi {

namespace {

using Bytes = std::span<const std::uint8_t>;

#if CBI_HAVE_EXIV2

// Each part is refused above this size: no camera or editor writes more, and
// a batch holds the metadata of every image in flight.
constexpr std::size_t max_part_bytes = std::size_t{16} << 20;

// The formats whose metadata exiv2 reads and writes, by their magic; "" for
// others (BigTIFF included: exiv2 0.27 does not read it).
std::string_view metadata_format(Bytes b) {
    auto starts = [&](std::string_view m) {
        return b.size() >= m.size() && std::memcmp(b.data(), m.data(), m.size()) == 0;
    };
    using namespace std::string_view_literals;
    if (starts("\xFF\xD8\xFF"sv)) return "JPEG";
    if (starts("\x89PNG\r\n\x1A\n"sv)) return "PNG";
    if (starts("II*\0"sv) || starts("MM\0*"sv)) return "TIFF";
    if (starts("RIFF"sv) && b.size() >= 12 && std::memcmp(b.data() + 8, "WEBP", 4) == 0) return "WebP";
    return "";
}

// Whether the file has an EXIF block where exiv2 looks for one: exiv2 drops
// an EXIF block it cannot parse without telling, and a dropped block must
// be reported.
bool has_exif_block(Bytes b, std::string_view format) {
    using namespace std::string_view_literals;
    auto at = [&](std::uint64_t i, std::string_view s) {
        return i <= b.size() && b.size() - i >= s.size() && std::memcmp(b.data() + i, s.data(), s.size()) == 0;
    };
    if (format == "JPEG") {
        for (std::uint64_t i = 2; i + 4 <= b.size();) {
            if (b[i] != 0xFF) return false;
            const std::uint8_t m = b[i + 1];
            if (m == 0xFF) {
                ++i;
                continue;
            }
            if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {
                i += 2;
                continue;
            }
            if (m == 0xD9 || m == 0xDA) return false;  // EOI, SOS: no metadata after them
            if (m == 0xE1 && at(i + 4, "Exif\0\0"sv)) return true;
            i += 2 + std::uint64_t{be16(b.data() + i + 2)};
        }
    } else if (format == "PNG") {
        for (std::uint64_t i = 8; i + 8 <= b.size(); i += 12 + std::uint64_t{be32(b.data() + i)}) {
            if (at(i + 4, "eXIf"sv)) return true;
            if ((at(i + 4, "zTXt"sv) || at(i + 4, "tEXt"sv) || at(i + 4, "iTXt"sv)) &&
                (at(i + 8, "Raw profile type exif\0"sv) || at(i + 8, "Raw profile type APP1\0"sv)))
                return true;
        }
    } else if (format == "WebP") {
        for (std::uint64_t i = 12; i + 8 <= b.size(); i += 8 + (std::uint64_t{le32(b.data() + i + 4)} + 1) / 2 * 2)
            if (at(i, "EXIF"sv)) return true;
    }
    return false;
}

// exiv2 inflates a PNG's compressed text and iCCP chunks whole, and deflate
// expands up to 1032:1: larger compressed chunks are refused unread.
constexpr std::uint64_t max_png_compressed_chunk = std::uint64_t{256} << 10;

bool png_has_large_compressed_chunk(Bytes b) {
    for (std::uint64_t i = 8; i + 8 <= b.size(); i += 12 + std::uint64_t{be32(b.data() + i)}) {
        const std::uint64_t len = be32(b.data() + i);
        const bool compressed = std::memcmp(b.data() + i + 4, "zTXt", 4) == 0 ||
                                std::memcmp(b.data() + i + 4, "iCCP", 4) == 0 ||
                                std::memcmp(b.data() + i + 4, "iTXt", 4) == 0;
        if (compressed && len > max_png_compressed_chunk) return true;
    }
    return false;
}

// The XMP toolkit is thread-safe only with a lock, and batches read and
// write metadata on several threads at once.
std::recursive_mutex xmp_mutex;
void xmp_lock(void*, bool lock) {
    if (lock)
        xmp_mutex.lock();
    else
        xmp_mutex.unlock();
}
void init_exiv2() {
    static std::once_flag once;
    std::call_once(once, [] { Exiv2::XmpParser::initialize(xmp_lock, nullptr); });
}

// ICC header: the data colour space at byte 16.
bool icc_fits(const std::vector<std::uint8_t>& icc, int channels) {
    if (icc.size() < 20) return false;
    const std::string_view space(reinterpret_cast<const char*>(icc.data() + 16), 4);
    return channels == 1 ? space == "GRAY" : space == "RGB ";
}

// JPEG pixels come out of decode_image already turned: say so in the EXIF.
// Orientation outside 1..8 means nothing; readers differ on what they do with it.
void drop_bad_orientation(Exiv2::ExifData& exif) {
    const auto o = exif.findKey(Exiv2::ExifKey("Exif.Image.Orientation"));
    if (o == exif.end()) return;
    const long v = o->count() == 1 && o->typeId() == Exiv2::unsignedShort ? o->toLong() : 0;
    if (v < 1 || v > 8) exif.erase(o);
}

void mark_turned(Exiv2::ExifData& exif) {
    const auto o = exif.findKey(Exiv2::ExifKey("Exif.Image.Orientation"));
    if (o == exif.end()) return;
    const long turn = o->count() > 0 ? o->toLong() : 1;
    o->setValue("1");
    if (turn < 5 || turn > 8) return;  // 5-8 swap width and height
    const auto x = exif.findKey(Exiv2::ExifKey("Exif.Photo.PixelXDimension"));
    const auto y = exif.findKey(Exiv2::ExifKey("Exif.Photo.PixelYDimension"));
    if (x == exif.end() || y == exif.end()) return;
    const std::string w = x->toString(), h = y->toString();
    x->setValue(h);
    y->setValue(w);
}

void put_be32(std::uint8_t* p, std::uint32_t v) {
    p[0] = static_cast<std::uint8_t>(v >> 24), p[1] = static_cast<std::uint8_t>(v >> 16);
    p[2] = static_cast<std::uint8_t>(v >> 8), p[3] = static_cast<std::uint8_t>(v);
}

std::uint32_t crc32(const std::uint8_t* p, std::size_t n) {
    std::uint32_t c = 0xFFFFFFFFu;
    for (std::size_t i = 0; i < n; ++i) {
        c ^= p[i];
        for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
    }
    return ~c;
}

// exiv2 0.27 writes a PNG's iCCP chunk with an empty profile name, which
// PNG forbids and libpng rejects (the profile is then ignored): name it.
void name_png_icc(std::vector<std::uint8_t>& png) {
    for (std::size_t i = 8; i + 12 <= png.size();) {
        const std::size_t len = be32(png.data() + i);
        if (len > png.size() - i - 12) return;
        if (std::memcmp(png.data() + i + 4, "iCCP", 4) == 0) {
            if (len == 0 || png[i + 8] != 0) return;
            static constexpr std::string_view name = "ICC profile";
            png.insert(png.begin() + static_cast<std::ptrdiff_t>(i + 8), name.begin(), name.end());
            put_be32(png.data() + i, static_cast<std::uint32_t>(len + name.size()));
            put_be32(png.data() + i + 8 + len + name.size(), crc32(png.data() + i + 4, 4 + len + name.size()));
            return;
        }
        if (std::memcmp(png.data() + i + 4, "IDAT", 4) == 0) return;
        i += 12 + len;
    }
}

// exiv2 0.27 writes a WebP's ICC profile under the chunk name VP8X instead
// of ICCP (readers then skip it, and libwebp may reject the file): the
// chunk after the real VP8X holding exactly the profile is renamed.
void name_webp_icc(std::vector<std::uint8_t>& webp, const std::vector<std::uint8_t>& icc) {
    constexpr std::size_t second = 12 + 8 + 10;  // after RIFF header and a 10-byte VP8X
    if (webp.size() < second + 8 + icc.size() || std::memcmp(webp.data() + 12, "VP8X", 4) != 0) return;
    if (std::memcmp(webp.data() + second, "VP8X", 4) == 0 && le32(webp.data() + second + 4) == icc.size() &&
        std::memcmp(webp.data() + second + 8, icc.data(), icc.size()) == 0)
        std::memcpy(webp.data() + second, "ICCP", 4);
}

// The IFD0 tags carried into a TIFF output, with the type each must have:
// libtiff reads IFD0 as the image's own, so anything else there (a layout
// tag, a known tag of another type) could make the output unreadable.
bool tiff_ifd0_tag_ok(const Exiv2::Exifdatum& d) {
    struct Allowed {
        std::uint16_t tag;
        Exiv2::TypeId type;
    };
    static constexpr Allowed allowed[] = {
        {0x010E, Exiv2::asciiString},       // ImageDescription
        {0x010F, Exiv2::asciiString},       // Make
        {0x0110, Exiv2::asciiString},       // Model
        {0x0112, Exiv2::unsignedShort},     // Orientation
        {0x011A, Exiv2::unsignedRational},  // XResolution
        {0x011B, Exiv2::unsignedRational},  // YResolution
        {0x0128, Exiv2::unsignedShort},     // ResolutionUnit
        {0x0131, Exiv2::asciiString},       // Software
        {0x0132, Exiv2::asciiString},       // DateTime
        {0x013B, Exiv2::asciiString},       // Artist
        {0x8298, Exiv2::asciiString},       // Copyright
        {0x8769, Exiv2::unsignedLong},      // ExifTag (the Photo sub-IFD)
        {0x8825, Exiv2::unsignedLong},      // GPSTag
    };
    if (d.groupName() != "Image") return true;  // sub-IFDs: not read as the image's
    for (const Allowed& a : allowed)
        if (d.tag() == a.tag)
            return d.typeId() == a.type && d.count() >= 1 && (a.type == Exiv2::asciiString || d.count() == 1);
    return false;
}

std::string what_of(const std::exception& e) {
    std::string w = e.what();
    // exiv2 ends some messages with a newline: one line each.
    while (!w.empty() && (w.back() == '\n' || w.back() == '.')) w.pop_back();
    return w.empty() ? "exiv2 error" : w;
}

#endif

}  // namespace

bool metadata_supported() {
    return CBI_HAVE_EXIV2 != 0;
}

#if CBI_HAVE_EXIV2

ImageMetadata read_metadata(Bytes bytes, const std::string& subject) {
    const std::string_view format = metadata_format(bytes);
    if (format.empty() || bytes.size() > static_cast<std::size_t>(INT32_MAX)) return {};
    if (format == "PNG" && png_has_large_compressed_chunk(bytes))
        throw Error(subject, "metadata not kept: a compressed PNG metadata chunk is over 256 KiB");
    // The pixels decode_image turns as the orientation says: JPEG's and
    // TIFF's (OpenCV's TIFF reader applies it whatever the read flags).
    const bool turned = format == "JPEG" || format == "TIFF";
    ImageMetadata m;
    try {
        init_exiv2();
        auto image = Exiv2::ImageFactory::open(bytes.data(), static_cast<long>(bytes.size()));
        if (!image.get()) throw Error(subject, "metadata not kept: exiv2 cannot open it");
        image->readMetadata();

        Exiv2::ExifData exif = image->exifData();
        if (exif.empty() && has_exif_block(bytes, format))
            throw Error(subject, "metadata not kept: its EXIF block is corrupt");
        if (!exif.empty()) {
            Exiv2::ExifThumb(exif).erase();  // the unfiltered picture, in the old orientation
            // Carried separately.
            for (const char* key : {"Exif.Image.InterColorProfile", "Exif.Image.XMLPacket"}) {
                const auto it = exif.findKey(Exiv2::ExifKey(key));
                if (it != exif.end()) exif.erase(it);
            }
            drop_bad_orientation(exif);
            if (turned) mark_turned(exif);
            // Leaves out the TIFF layout tags (strips, tiles, sample format) a
            // TIFF input has among its EXIF: the output has its own.
            Exiv2::Blob blob;
            Exiv2::ExifParser::encode(
                blob, image->byteOrder() == Exiv2::invalidByteOrder ? Exiv2::littleEndian : image->byteOrder(), exif);
            if (blob.size() > max_part_bytes)
                throw Error(subject,
                            "metadata not kept: EXIF of " + std::to_string(blob.size()) + " bytes is too large");
            // A header alone carries nothing.
            Exiv2::ExifData check;
            if (!blob.empty() &&
                (Exiv2::ExifParser::decode(check, blob.data(), static_cast<std::uint32_t>(blob.size())),
                 !check.empty()))
                m.exif.assign(blob.begin(), blob.end());
        }

        if (image->iccProfileDefined()) {
            const Exiv2::DataBuf* icc = image->iccProfile();
            if (static_cast<std::size_t>(icc->size_) > max_part_bytes)
                throw Error(subject,
                            "metadata not kept: ICC profile of " + std::to_string(icc->size_) + " bytes is too large");
            // An ICC profile starts with its own size.
            if (icc->size_ < 128 || be32(icc->pData_) != static_cast<std::uint32_t>(icc->size_))
                throw Error(subject, "metadata not kept: its ICC profile is corrupt");
            m.icc.assign(icc->pData_, icc->pData_ + icc->size_);
        }

        std::string xmp = image->xmpPacket();
        if (!xmp.empty() && turned) {
            Exiv2::XmpData& data = image->xmpData();
            const auto o = data.findKey(Exiv2::XmpKey("Xmp.tiff.Orientation"));
            if (o != data.end()) {
                o->setValue("1");
                if (Exiv2::XmpParser::encode(xmp, data, Exiv2::XmpParser::useCompactFormat) != 0)
                    throw Error(subject, "metadata not kept: its XMP cannot be rewritten");
            }
        }
        if (xmp.size() > max_part_bytes)
            throw Error(subject, "metadata not kept: XMP of " + std::to_string(xmp.size()) + " bytes is too large");
        m.xmp = std::move(xmp);
    } catch (const Error&) {
        throw;
    } catch (const std::exception& e) {  // Exiv2::Error, std::bad_alloc, ...
        throw Error(subject, "metadata not kept: " + what_of(e));
    }
    return m;
}

namespace detail {

std::string embed_metadata(std::vector<std::uint8_t>& encoded, std::string_view format, int channels,
                           const ImageMetadata& metadata, const std::string& subject) {
    if (format != "JPEG" && format != "PNG" && format != "TIFF" && format != "WebP") return {};
    const bool icc = !metadata.icc.empty() && icc_fits(metadata.icc, channels);
    if (metadata.exif.empty() && metadata.xmp.empty() && !icc) return {};
    if (encoded.size() > static_cast<std::size_t>(INT32_MAX))
        return subject + ": metadata not kept: the image is too large for exiv2";
    try {
        init_exiv2();
        auto image = Exiv2::ImageFactory::open(encoded.data(), static_cast<long>(encoded.size()));
        if (!image.get()) return subject + ": metadata not kept: exiv2 cannot open the encoded image";
        image->readMetadata();
        if (!metadata.exif.empty()) {
            Exiv2::ExifData carried;
            Exiv2::ExifParser::decode(carried, metadata.exif.data(), static_cast<std::uint32_t>(metadata.exif.size()));
            // A TIFF's own tags (its layout) stay as the encoder wrote them.
            Exiv2::ExifData exif = format == "TIFF" ? image->exifData() : Exiv2::ExifData();
            for (const auto& d : carried)
                if (exif.findKey(Exiv2::ExifKey(d.key())) == exif.end() && (format != "TIFF" || tiff_ifd0_tag_ok(d)))
                    exif.add(d);
            image->setExifData(exif);
        }
        if (icc) {
            Exiv2::DataBuf buf(metadata.icc.data(), static_cast<long>(metadata.icc.size()));
            image->setIccProfile(buf, true);
        }
        if (!metadata.xmp.empty()) {
            image->setXmpPacket(metadata.xmp);
            image->writeXmpFromPacket(true);
        }
        image->writeMetadata();
        Exiv2::BasicIo& io = image->io();
        io.open();
        io.seek(0, Exiv2::BasicIo::beg);
        const Exiv2::DataBuf out = io.read(static_cast<long>(io.size()));
        io.close();
        if (out.size_ <= 0) return subject + ": metadata not kept: exiv2 wrote nothing";
        std::vector<std::uint8_t> result(out.pData_, out.pData_ + out.size_);
        if (icc && format == "PNG") name_png_icc(result);
        if (icc && format == "WebP") name_webp_icc(result, metadata.icc);
        // The pixels must be untouched: the header must still say the same image.
        const ImageHeader before = probe_image(encoded, subject), after = probe_image(result, subject);
        if (std::string_view(before.format) != after.format || before.width != after.width ||
            before.height != after.height || before.channels != after.channels ||
            before.bytes_per_sample != after.bytes_per_sample)
            return subject + ": metadata not kept: exiv2 changed the image's header";
        encoded = std::move(result);
    } catch (const Error& e) {
        return subject + ": metadata not kept: " + e.what();
    } catch (const std::exception& e) {
        return subject + ": metadata not kept: " + what_of(e);
    }
    return {};
}

}  // namespace detail

#else

ImageMetadata read_metadata(Bytes, const std::string&) {
    return {};
}

namespace detail {
std::string embed_metadata(std::vector<std::uint8_t>&, std::string_view, int, const ImageMetadata&,
                           const std::string&) {
    return {};
}
}  // namespace detail

#endif

}  // namespace cbi
