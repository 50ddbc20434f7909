#pragma once
// Images: Image (owning, contiguous) over the non-owning ImageView and
// Depth of the filters layer (filters/image_view.hpp). Zero-copy adapters
// to and from cv::Mat are in pipeline/opencv.hpp.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "filters/image_view.hpp"

namespace cbi {

class Image {
public:
    Image() = default;
    Image(int width, int height, int channels, Depth depth);
    const ImageView& view() const { return view_; }
    bool empty() const { return view_.empty(); }

private:
    struct FreeBytes {
        void operator()(std::byte* p) const;
    };
    std::unique_ptr<std::byte, FreeBytes> storage_;
    ImageView view_;
};

// Copies pixels between views of equal geometry (either may be strided).
void copy_pixels(const ImageView& src, const ImageView& dst);

}  // namespace cbi
