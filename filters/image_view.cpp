#include "filters/image_view.hpp"

#include <stdexcept>

namespace cbi {

const char* depth_name(Depth d) {
    switch (d) {
        case Depth::u8: return "8u";
        case Depth::u16: return "16u";
        case Depth::f32: return "32f";
    }
    return "?";
}

std::string describe(const ImageView& v) {
    return std::to_string(v.width) + "x" + std::to_string(v.height) + " " + std::to_string(v.channels) + "-channel " +
           depth_name(v.depth);
}

void check_supported(const ImageView& v, const char* what) {
    if (v.channels != 1 && v.channels != 3 && v.channels != 4)
        throw std::invalid_argument(std::string(what) + ": " + std::to_string(v.channels) +
                                    " channels (cbi supports 1, 3 or 4)");
    if (v.empty()) throw std::invalid_argument(std::string(what) + ": empty image");
    if (v.stride < v.row_bytes()) throw std::invalid_argument(std::string(what) + ": row stride smaller than a row");
}

ImageView ImageView::crop(int x, int y, int w, int h) const {
    if (x < 0 || y < 0 || w < 0 || h < 0 || x + w > width || y + h > height)
        throw std::out_of_range("crop rectangle outside the image");
    ImageView v = *this;
    v.data = data + static_cast<std::size_t>(y) * stride + static_cast<std::size_t>(x) * channels * depth_bytes(depth);
    v.width = w;
    v.height = h;
    return v;
}

}  // namespace cbi
