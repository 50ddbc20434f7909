#pragma once
// color:NAME|MATRIX: a 3x3 or 3x4 matrix on each pixel's (R, G, B) (values
// in the image's own units; the 4th column an offset), rounded and
// saturated to the depth; alpha kept. Presets: gray (1-channel result, as
// cv::cvtColor COLOR_BGR2GRAY), sepia, ycrcb (as COLOR_BGR2YCrCb: Y, Cr,
// Cb). A 1-channel input is read as R = G = B (gray of it: itself).
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "filters/kinds/args.hpp"
#include "filters/kinds/kind.hpp"
#include "filters/ops.hpp"

namespace cbi {

enum class ColorPreset : std::uint8_t { custom, gray, sepia, ycrcb };
struct ColorFilter {
    ColorPreset preset = ColorPreset::gray;
    // custom only: rows R', G', B'; columns R, G, B, offset (image units).
    std::array<double, 12> rgb_matrix{};
    friend bool operator==(const ColorFilter&, const ColorFilter&) = default;
};

// The colour matrix in storage order for a depth (presets with offsets,
// such as ycrcb's 128 for 8-bit, depend on it) and an input of
// `input_channels` (1, 3 or 4): a 1-channel input is read as R = G = B, and
// gray of it is a copy (StorageMatrix::step, copy).
StorageMatrix storage_matrix(const ColorFilter& f, Depth depth, int input_channels = 3);

template <>
struct FilterKind<ColorFilter> {
    static constexpr std::string_view name = "color", form = "color:gray|sepia|ycrcb|MATRIX", params = "spec";
    static constexpr std::string_view help =
        "colour matrix: a preset, or 9 (3x3) or 12 (3x4) comma-separated numbers, rows R',G',B' over (R,G,B[,1])";
    static constexpr std::string_view opencv = "cv::cvtColor (gray, ycrcb) / cv::transform";
    static constexpr Category category = Category::pointwise;
    static constexpr std::string_view examples[] = {"gray", "sepia", "ycrcb",
                                                    "0.5,0.25,0.25,10,-0.2,1.1,0.1,-5,0.3,0.3,0.3,0"};
    static constexpr KindDefault defaults[] = {
        // Runs of N pixels as whole words.
        {true, 0, static_cast<int>(Depth::u8), 0, "vec:8 vec:4 vec:16"},
        {true, 0, kAnyDepth, 0, "vec:4 vec:2 vec:8"},
        {false, 0, kAnyDepth, 0, "naive"},
    };

    static ColorFilter parse(std::string_view a);
    static std::string print(const ColorFilter& f);
    static Footprint footprint(const ColorFilter&) { return {}; }
    // gray: 1 channel; the others 3 from 1 or 3 channels, 4 from 4. Throws
    // cbi::Error for other channel counts.
    static int output_channels(const ColorFilter& f, int channels);
    template <class T>
    static ColorOp<T> op(const ColorFilter& f, const ImageView& src, const ImageView& dst) {
        return {src, dst, storage_matrix(f, src.depth, src.channels)};
    }
};

}  // namespace cbi
