#include "pipeline/image.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "pipeline/opencv.hpp"

namespace cbi {

void Image::FreeBytes::operator()(std::byte* p) const {
    std::free(p);
}

Image::Image(int width, int height, int channels, Depth depth) {
    view_ = ImageView{nullptr, width, height, channels, depth, 0};
    view_.stride = view_.row_bytes();
    check_supported(view_, "image");
    // 64-byte alignment keeps rows friendly to vector loads and DMA.
    const std::size_t bytes = (view_.stride * static_cast<std::size_t>(height) + 63) / 64 * 64;
    auto* p = static_cast<std::byte*>(std::aligned_alloc(64, bytes));
    if (!p) throw std::bad_alloc();
    storage_.reset(p);
    view_.data = p;
}

void copy_pixels(const ImageView& src, const ImageView& dst) {
    if (src.width != dst.width || src.height != dst.height || src.channels != dst.channels || src.depth != dst.depth)
        throw std::invalid_argument("copy_pixels: " + describe(src) + " into " + describe(dst));
    for (int y = 0; y < src.height; ++y) std::memcpy(dst.row<std::byte>(y), src.row<std::byte>(y), src.row_bytes());
}

int cv_type(Depth depth, int channels) {
    const int d = depth == Depth::u8 ? CV_8U : depth == Depth::u16 ? CV_16U : CV_32F;
    return CV_MAKETYPE(d, channels);
}

ImageView view_of(const cv::Mat& mat) {
    if (mat.dims != 2) throw std::invalid_argument("cv::Mat with " + std::to_string(mat.dims) + " dimensions");
    Depth depth;
    switch (mat.depth()) {
        case CV_8U: depth = Depth::u8; break;
        case CV_16U: depth = Depth::u16; break;
        case CV_32F: depth = Depth::f32; break;
        default:
            throw std::invalid_argument("unsupported sample depth " + cv::typeToString(mat.type()) +
                                        " (cbi supports 8-bit unsigned, 16-bit unsigned and 32-bit float)");
    }
    // A const Mat may be read through the view; cbi never writes to an input.
    ImageView v{const_cast<std::byte*>(reinterpret_cast<const std::byte*>(mat.data)),
                mat.cols,
                mat.rows,
                mat.channels(),
                depth,
                mat.step[0]};
    check_supported(v, "image");
    return v;
}

cv::Mat as_mat(const ImageView& v) {
    return cv::Mat(v.height, v.width, cv_type(v.depth, v.channels), v.data, v.stride);
}

}  // namespace cbi
