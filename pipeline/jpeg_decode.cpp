#include "pipeline/jpeg_decode.hpp"

#include <cctype>
#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE
#include <cstring>
#include <string_view>

extern "C" {
#include <jpeglib.h>  // first: jerror.h reads its configuration

#include <jerror.h>
}

#include "pipeline/byte_order.hpp"
#include "pipeline/error.hpp"

namespace cbi {
namespace {

// libjpeg's state. Its errors longjmp back into the step that raised them
// (each step below sets `jump` and holds no C++ object with a destructor);
// its warnings about the compressed data are kept.
struct Decoder {
    struct Errors {
        jpeg_error_mgr pub;
        std::jmp_buf jump;
        char corrupt[JMSG_LENGTH_MAX];  // the first warning that the pixels lost data, or empty
    };
    jpeg_decompress_struct info;
    Errors err;
    bool created = false;

    Decoder() {
        std::memset(&info, 0, sizeof info);
        info.err = jpeg_std_error(&err.pub);
        err.pub.error_exit = [](j_common_ptr c) { std::longjmp(reinterpret_cast<Errors*>(c->err)->jump, 1); };
        err.pub.emit_message = on_message;
        err.corrupt[0] = '\0';
    }
    Decoder(const Decoder&) = delete;
    Decoder& operator=(const Decoder&) = delete;
    ~Decoder() {
        if (created) jpeg_destroy_decompress(&info);
    }

    // Level -1: a warning (others are trace messages). The ones that mean
    // decoded pixels are missing or wrong; the rest (extraneous bytes
    // between segments, an unknown JFIF revision) leave the image whole.
    static void on_message(j_common_ptr c, int level) {
        if (level != -1) return;
        ++c->err->num_warnings;
        auto* e = reinterpret_cast<Errors*>(c->err);
        switch (c->err->msg_code) {
            case JWRN_HIT_MARKER:
            case JWRN_HUFF_BAD_CODE:
#if JPEG_LIB_VERSION >= 70 || defined(D_ARITH_CODING_SUPPORTED)  // where jerror.h has it
            case JWRN_ARITH_BAD_CODE:
#endif
            case JWRN_JPEG_EOF:
            case JWRN_MUST_RESYNC:
            case JWRN_BOGUS_PROGRESSION:
            case JWRN_NOT_SEQUENTIAL:
                if (e->corrupt[0] == '\0') c->err->format_message(c, e->corrupt);
                break;
            default: break;
        }
    }
};

bool create(Decoder& d) {
    if (setjmp(d.err.jump)) return false;
    jpeg_create_decompress(&d.info);
    d.created = true;
    return true;
}

bool read_header(Decoder& d, const std::uint8_t* bytes, std::size_t size) {
    if (setjmp(d.err.jump)) return false;
    jpeg_mem_src(&d.info, bytes, static_cast<unsigned long>(size));
    jpeg_save_markers(&d.info, JPEG_APP0 + 1, 0xFFFF);
    jpeg_read_header(&d.info, TRUE);
    return true;
}

bool read_pixels(Decoder& d, std::uint8_t* data, std::size_t step) {
    if (setjmp(d.err.jump)) return false;
    jpeg_start_decompress(&d.info);
    while (d.info.output_scanline < d.info.output_height) {
        JSAMPROW row = data + d.info.output_scanline * step;
        jpeg_read_scanlines(&d.info, &row, 1);
    }
    jpeg_finish_decompress(&d.info);
    return true;
}

bool has_huffman_tables(const jpeg_decompress_struct& info) {
    for (int i = 0; i < NUM_HUFF_TBLS; ++i)
        if (info.dc_huff_tbl_ptrs[i] || info.ac_huff_tbl_ptrs[i]) return true;
    return false;
}

// As OpenCV's ApplyExifOrientation turns an image it decodes.
cv::Mat turned(const cv::Mat& m, int orientation) {
    cv::Mat out;
    switch (orientation) {
        case 2: cv::flip(m, out, 1); return out;
        case 3: cv::flip(m, out, -1); return out;
        case 4: cv::flip(m, out, 0); return out;
        case 5: cv::transpose(m, out); return out;
        case 6: cv::rotate(m, out, cv::ROTATE_90_CLOCKWISE); return out;  // transpose, then flip across
        case 7:
            cv::transpose(m, out);
            cv::flip(out, out, -1);
            return out;
        case 8: cv::rotate(m, out, cv::ROTATE_90_COUNTERCLOCKWISE); return out;  // transpose, then flip down
        default: return m;
    }
}

}  // namespace

int exif_orientation(std::span<const std::uint8_t> exif) {
    constexpr std::size_t kExifHeader = 6;  // "Exif\0\0"; the TIFF structure follows
    if (exif.size() < kExifHeader + 8) return 0;
    const std::span<const std::uint8_t> t = exif.subspan(kExifHeader);
    const bool little = t[0] == 'I' && t[1] == 'I';
    if (!little && !(t[0] == 'M' && t[1] == 'M')) return 0;
    const auto u16 = [&](std::uint64_t at) { return little ? le16(t.data() + at) : be16(t.data() + at); };
    const auto u32 = [&](std::uint64_t at) -> std::uint64_t {
        return little ? le32(t.data() + at) : be32(t.data() + at);
    };
    if (u16(2) != 42) return 0;
    const std::uint64_t ifd = u32(4);
    if (ifd + 2 > t.size()) return 0;
    const std::uint32_t entries = u16(ifd);
    for (std::uint32_t i = 0; i < entries; ++i) {
        const std::uint64_t e = ifd + 2 + 12 * std::uint64_t{i};
        if (e + 12 > t.size()) return 0;
        if (u16(e) == 0x0112) {
            const std::uint32_t v = u16(e + 8);
            return v >= 1 && v <= 8 ? static_cast<int>(v) : 0;
        }
    }
    return 0;
}

std::optional<cv::Mat> decode_jpeg(std::span<const std::uint8_t> bytes, const std::string& subject) {
    Decoder d;
    if (!create(d) || !read_header(d, bytes.data(), bytes.size())) return std::nullopt;
    jpeg_decompress_struct& info = d.info;
    if (info.num_components != 1 && info.num_components != 3) return std::nullopt;
    if (!info.arith_code && !has_huffman_tables(info)) return std::nullopt;
    const bool gray = info.num_components == 1;
    info.out_color_space = gray ? JCS_GRAYSCALE : JCS_EXT_BGR;
    // Read before the pixels: finishing the decode frees the saved markers.
    int orientation = 0;
    for (jpeg_saved_marker_ptr m = info.marker_list; m && !orientation; m = m->next)
        if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 && std::memcmp(m->data, "Exif\0\0", 6) == 0)
            orientation = exif_orientation({m->data, m->data_length});
    cv::Mat mat(static_cast<int>(info.image_height), static_cast<int>(info.image_width), gray ? CV_8UC1 : CV_8UC3);
    if (!read_pixels(d, mat.data, mat.step)) return std::nullopt;
    if (d.err.corrupt[0] != '\0') {
        std::string reason = d.err.corrupt;
        constexpr std::string_view prefix = "Corrupt JPEG data: ";
        if (reason.starts_with(prefix)) reason.erase(0, prefix.size());
        if (!reason.empty()) reason[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(reason[0])));
        throw Error(subject, "corrupt JPEG data (" + reason + ")");
    }
    return turned(mat, orientation);
}

}  // namespace cbi
