#pragma once
// The non-owning image view the filters compute on (host and device code)
// and its sample depth. Supported: 8-bit unsigned, 16-bit unsigned and
// 32-bit float samples; 1, 3 or 4 interleaved channels (OpenCV's BGR(A)
// order). The owning Image and the cv::Mat adapters are in the pipeline
// layer (pipeline/image.hpp, pipeline/opencv.hpp).
#include <cstddef>
#include <cstdint>
#include <string>

#include "schedules/host_device.hpp"

namespace cbi {

enum class Depth : std::uint8_t { u8, u16, f32 };

CBI_HOST_DEVICE constexpr std::size_t depth_bytes(Depth d) {
    return d == Depth::u8 ? 1 : d == Depth::u16 ? 2 : 4;
}
const char* depth_name(Depth d);  // "8u", "16u", "32f"

struct ImageView {
    std::byte* data = nullptr;
    int width = 0;
    int height = 0;
    int channels = 0;
    Depth depth = Depth::u8;
    std::size_t stride = 0;  // bytes from one row to the next

    CBI_HOST_DEVICE std::size_t row_bytes() const {
        return static_cast<std::size_t>(width) * channels * depth_bytes(depth);
    }
    CBI_HOST_DEVICE std::size_t pixels() const { return static_cast<std::size_t>(width) * height; }
    CBI_HOST_DEVICE bool empty() const { return width <= 0 || height <= 0; }
    template <class T>
    CBI_HOST_DEVICE T* row(int y) const {
        return reinterpret_cast<T*>(data + static_cast<std::size_t>(y) * stride);
    }
    // A rectangle of this view (no copy), like a cv::Mat ROI.
    ImageView crop(int x, int y, int w, int h) const;
};

// "640x480 3-channel 8u" for messages.
std::string describe(const ImageView& v);

// Throws std::invalid_argument unless the geometry is one cbi supports.
void check_supported(const ImageView& v, const char* what);

}  // namespace cbi
