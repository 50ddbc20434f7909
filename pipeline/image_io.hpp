#pragma once
// Image file I/O: size-limited decoding and atomic encoding. All errors are one line naming the file:
//   cbi::Error             unreadable, corrupt, truncated, too large, unsupported
//                          format or depth, failed write (apps: exit 1).
//
// Read: the file is read into memory once, its dimensions, channels and sample
// size are taken from the header *before* decoding (PNG, JPEG, TIFF/BigTIFF,
// BMP, WebP, PNM/PAM/PFM, OpenEXR, Radiance HDR, Sun raster), and images over
// `max_pixels`, or needing more than `max_bytes` to decode, are refused
// without allocating them; so are TIFF tiles or strips out of proportion to
// the image, and uncompressed (or bounded-ratio) data that the file is too
// short to hold. Files whose header cbi cannot read are refused rather than
// handed to a decoder unchecked. Decoding keeps 16-bit samples and alpha
// (cv::IMREAD_UNCHANGED); JPEGs (and TIFFs: OpenCV applies their orientation tag whatever the flags) are turned as their EXIF orientation says,
// as viewers show them (OpenCV 4.6 applies a PNG's eXIf orientation only in
// modes that drop alpha, so PNG orientation is not applied). Results
// are 8u, 16u or 32f with 1, 3 or 4 channels (BGR(A) order); 64-bit and
// 16-bit float samples are converted to 32f (the only lossy step: doubles are
// rounded to float); signed/32-bit integer samples and 2-channel images are
// refused.
//
// Write: the format comes from the extension; a depth or channel count the
// format cannot store exactly is an error (OpenCV itself would silently
// convert 16u/32f to 8u or drop alpha):
//   .png                 8u 16u      1 3 4
//   .jpg .jpeg .jpe      8u          1 3      (lossy, WriteOptions::quality, default 95)
//   .tif .tiff           8u 16u 32f  1 3 4
//   .bmp                 8u          1 3
//   .webp                8u          3 4      (lossless, except that the colour of
//                                             fully transparent pixels is not kept;
//                                             lossy with WriteOptions::quality)
//   .pgm / .ppm / .pnm   8u 16u      1 / 3 / 1 3
//   .pfm                 32f         1 3
//   .exr                 32f         1 3 4
//
// Metadata (EXIF, ICC profile, XMP) is read from JPEG, PNG, TIFF and WebP
// inputs and written into JPEG, PNG, TIFF and WebP outputs through exiv2,
// when cbi is built with it (metadata_supported()); other formats carry none.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <opencv2/core.hpp>

namespace cbi {

// The default limit on an image's pixels (--max-pixels): 2^28.
inline constexpr std::uint64_t default_max_pixels = std::uint64_t{1} << 28;
// The default limit on the memory one image may take to decode (--max-memory):
// 4 GiB, the decoded size of the largest image the default pixel limit admits
// in cbi's widest type (2^28 pixels x 4 channels x 4-byte float). So the
// default refuses no image of a type cbi processes that --max-pixels admits;
// it refuses what the header says needs more (64-bit samples, TIFF tiles or
// strips far larger than the image). Callers that hold several images at
// once (batches) or run on small machines pass a smaller budget.
inline constexpr std::uint64_t default_max_image_bytes = default_max_pixels * 4 * sizeof(float);
static_assert(default_max_image_bytes == std::uint64_t{4} << 30);

// What a file header says, read without decoding.
struct ImageHeader {
    const char* format = "";  // "PNG", "JPEG", ...
    std::uint64_t width = 0;
    std::uint64_t height = 0;
    // Channels and bytes per sample of the image OpenCV's decoder returns, as
    // the header gives them (PNG colour type, tRNS and bit depth; JPEG SOF
    // components and precision; TIFF SamplesPerPixel, BitsPerSample and
    // Photometric; BMP bit count; PNM/PAM type and maxval; WebP alpha flag;
    // OpenEXR channel list). An upper bound: where the header does not tell
    // (or a palette may turn out gray), the worst case cbi decodes, 4 x 4.
    std::uint32_t channels = 4;
    std::uint32_t bytes_per_sample = 4;
    // Buffers the decoder allocates besides the image: TIFF reads one tile or
    // strip at a time through a buffer of its own (0 for other formats).
    std::uint64_t scratch_bytes = 0;

    // width x height x channels x bytes_per_sample (the image as decoded,
    // before orientation); saturates at 2^64 - 1.
    std::uint64_t decoded_bytes() const;
};

// Reads the whole file, or its first `at_most` bytes. Errors: missing,
// dangling symlink, directory, not a regular file (a FIFO does not block),
// permission denied, empty, over 2 GiB (the decoder's limit), I/O error.
std::vector<std::uint8_t> read_file(const std::filesystem::path& path, std::size_t at_most = SIZE_MAX);

// The format and dimensions from the header. Throws cbi::Error(subject, ...)
// for unrecognized formats and malformed headers.
ImageHeader probe_image(std::span<const std::uint8_t> bytes, const std::string& subject);

// probe_image of a file, from its first 256 KiB where they hold the header
// (a batch sampling its photos' sizes need not read them whole), else from
// all of it (a TIFF's directory at the end, a JPEG with large segments
// before its frame header). Errors as read_file and probe_image.
ImageHeader probe_file(const std::filesystem::path& path);

// Probes, enforces max_pixels and max_bytes (decoded_bytes() plus
// scratch_bytes), checks for truncation (PNG IEND, JPEG EOI, WebP RIFF size)
// and for data shorter than the header's size needs (PNM/PAM/PFM, BMP and Sun
// raster: exact; PNG: deflate expands at most 1032:1): every check that
// decode_image makes before decoding, for decoders of other kinds (a JPEG
// decoded on the GPU). `subject` names the data in errors (usually the path).
ImageHeader check_image(std::span<const std::uint8_t> bytes, const std::string& subject,
                        std::uint64_t max_pixels = default_max_pixels,
                        std::uint64_t max_bytes = default_max_image_bytes);

// check_image, then decodes with OpenCV.
cv::Mat decode_image(std::span<const std::uint8_t> bytes, const std::string& subject,
                     std::uint64_t max_pixels = default_max_pixels, std::uint64_t max_bytes = default_max_image_bytes);

// read_file + decode_image.
cv::Mat read_image(const std::filesystem::path& path, std::uint64_t max_pixels = default_max_pixels,
                   std::uint64_t max_bytes = default_max_image_bytes);

// The metadata cbi carries from an input to its outputs, as bytes (so that
// this header does not depend on exiv2): empty parts are absent.
struct ImageMetadata {
    // TIFF-structured EXIF (what follows "Exif\0\0" in a JPEG's APP1), without
    // its thumbnail (it shows the unfiltered picture) and without the TIFF
    // layout tags of a TIFF input.
    std::vector<std::uint8_t> exif;
    std::vector<std::uint8_t> icc;  // the ICC profile
    std::string xmp;                // the XMP packet
    bool empty() const { return exif.empty() && icc.empty() && xmp.empty(); }
};

// True when cbi was built with exiv2 (CBI_WITH_EXIV2): read_metadata reads
// and write_image_atomic writes metadata. Without it neither does anything.
bool metadata_supported();

// The EXIF, ICC profile and XMP of a JPEG, PNG, TIFF or WebP file (other
// formats, and builds without exiv2: empty). Where decode_image turns the
// pixels as the orientation says (JPEG, and TIFF, whose orientation OpenCV's
// reader applies whatever the flags), the EXIF and XMP Orientation
// become 1 and the EXIF pixel dimensions follow the turn, so that viewers
// do not turn the output a second time. Throws cbi::Error(subject, ...) when
// the metadata cannot be read (corrupt, or too large to keep); callers
// write the pixels without metadata and warn.
ImageMetadata read_metadata(std::span<const std::uint8_t> bytes, const std::string& subject);

// How write_image_atomic encodes.
struct WriteOptions {
    // JPEG and WebP quality, 1..100 (lossy); 0: the defaults, JPEG 95 and
    // lossless WebP. Other formats ignore it.
    int quality = 0;
    // PNG zlib level 0 (none) .. 9 (smallest, slowest); -1: OpenCV's default
    // (fast, level 1). Other formats ignore it. Pixels are the same at every level.
    int png_compression = -1;
    // Write no metadata, whatever is passed (like ImageMagick's -strip).
    bool strip = false;
};

// Throws std::invalid_argument naming the field when a WriteOptions value is
// out of range.
void check_write_options(const WriteOptions& options);

// The format write_image_atomic writes for `out`'s extension ("PNG",
// "JPEG", "TIFF", "WebP", ...), or "" for an extension it does not know.
std::string_view output_format(const std::filesystem::path& out);

// The JPEG quality `options` ask for: 95 when they ask for none.
inline constexpr int default_jpeg_quality = 95;
inline int jpeg_quality(const WriteOptions& options) {
    return options.quality ? options.quality : default_jpeg_quality;
}

// Throws cbi::Error naming `out` unless its extension can store an image of
// this OpenCV type exactly. Cheap: apps call it before doing any work.
void check_output_format(const std::filesystem::path& out, int cv_type);

// An image encoded in memory, and the metadata warning (see write_image_atomic).
struct EncodedImage {
    std::vector<std::uint8_t> bytes;
    std::string warning;
};

// Encodes `image` in the format of `out`'s extension, with `metadata` where
// the format holds it (see write_image_atomic). Throws cbi::Error naming
// `out` when the format cannot store the image or encoding fails; metadata
// never throws.
EncodedImage encode_image(const std::filesystem::path& out, const cv::Mat& image, const WriteOptions& options = {},
                          const ImageMetadata& metadata = {});

// encode_image, then writes atomically: a temporary `.cbi-tmp-XXXXXX`
// in the target directory is written, fsync'ed, closed and renamed over
// `out`. On any failure the temporary is removed, `out` is untouched and
// cbi::Error names `out` and the reason. A replaced file keeps its mode;
// a new one gets 0666 & ~umask. If `out` is a symlink, the link itself is
// replaced by the new file (its target is not written through).
// `metadata` is added to the encoded bytes in memory, before the temporary
// is written, where the format can hold it (JPEG, PNG, TIFF, WebP; an ICC
// profile only where its colour space fits the channels: RGB for 3/4, gray
// for 1) and options.strip is false. Metadata never fails the write: when
// it cannot be added the image is written without it and the returned
// warning (one line naming `out`) says so; otherwise the result is empty.
std::string write_image_atomic(const std::filesystem::path& out, const cv::Mat& image, const WriteOptions& options = {},
                               const ImageMetadata& metadata = {});

// Writes an encoding made elsewhere (a JPEG of `channels` channels encoded
// on the GPU) atomically, with `metadata` added as encode_image adds it; the
// result as write_image_atomic's.
std::string write_encoded_atomic(const std::filesystem::path& out, std::vector<std::uint8_t> encoded, int channels,
                                 const WriteOptions& options = {}, const ImageMetadata& metadata = {});

// The name prefix of write_image_atomic's temporaries.
inline constexpr std::string_view temp_prefix = ".cbi-tmp-";

// Whether `name` (a file name, no folder) is one of write_image_atomic's
// temporaries: temp_prefix and the six letters or digits mkostemp puts
// after it. Folders walked for inputs skip such names; a user's
// `.cbi-tmp-photo.png` is not one.
bool is_temporary_name(std::string_view name);

// Removes the temporaries (is_temporary_name) in `dir` that no write holds
// (a write holds an flock on its temporary until the rename), i.e. those a
// killed run left behind, in this process or any other, but never a file
// that is one of `keep` (the run's inputs named like temporaries: an input
// may have any name). Best effort; returns how many.
std::size_t remove_stale_temporaries(const std::filesystem::path& dir,
                                     std::span<const std::filesystem::path> keep = {});

// For an app's signal handling, from an ordinary thread (it takes a mutex:
// not from a signal handler): removes the temporaries of the writes in
// progress, and every write_image_atomic from now on fails with
// "interrupted" before renaming anything into place.
void abandon_atomic_writes() noexcept;

// True when both paths exist and are the same file (device and inode, after
// following symlinks), so an output never overwrites an input.
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

}  // namespace cbi
