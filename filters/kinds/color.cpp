#include "filters/kinds/color.hpp"

#include <vector>

#include "filters/error.hpp"

namespace cbi {

using Kind = FilterKind<ColorFilter>;

ColorFilter Kind::parse(std::string_view a) {
    if (a == "gray") return {ColorPreset::gray, {}};
    if (a == "sepia") return {ColorPreset::sepia, {}};
    if (a == "ycrcb") return {ColorPreset::ycrcb, {}};
    // Rows may be separated by ';' (as filter2d's, and Python's 2-D matrices): three of equal length.
    std::vector<std::string_view> parts;
    const auto rows = args::split(a, ';');
    bool even = rows.size() == 1 || rows.size() == 3;
    const std::size_t width = args::split(rows[0], ',').size();
    for (const std::string_view row : rows) {
        const auto fields = args::split(row, ',');
        even = even && fields.size() == width;
        parts.insert(parts.end(), fields.begin(), fields.end());
    }
    if (!even || (parts.size() != 9 && parts.size() != 12))
        args::invalid("color '" + args::excerpt(a) +
                      "' must be gray, sepia, ycrcb or a matrix of 9 (3x3) or 12 (3x4) comma-separated numbers, rows "
                      "R',G',B' (rows may be separated by ';')");
    ColorFilter f{ColorPreset::custom, {}};
    const int cols = parts.size() == 9 ? 3 : 4;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        double v = 0;
        if (!args::parse_double(parts[i], v))
            args::invalid("color matrix entry '" + std::string(parts[i]) + "' is not a number");
        f.rgb_matrix[(i / cols) * 4 + i % cols] = v;
    }
    return f;
}

std::string Kind::print(const ColorFilter& f) {
    switch (f.preset) {
        case ColorPreset::gray: return "gray";
        case ColorPreset::sepia: return "sepia";
        case ColorPreset::ycrcb: return "ycrcb";
        case ColorPreset::custom: break;
    }
    std::string s;
    for (std::size_t i = 0; i < f.rgb_matrix.size(); ++i) s += (i ? "," : "") + args::number(f.rgb_matrix[i]);
    return s;
}

int Kind::output_channels(const ColorFilter& f, int channels) {
    if (channels != 1 && channels != 3 && channels != 4)
        throw Error("color:" + print(f), "needs a 1-, 3- or 4-channel image, this one has " + std::to_string(channels));
    if (f.preset == ColorPreset::gray) return 1;
    return channels == 1 ? 3 : channels;  // a 1-channel image is read as R = G = B
}

StorageMatrix storage_matrix(const ColorFilter& f, Depth depth, int input_channels) {
    StorageMatrix s{};
    s.step = color_step(input_channels);                         // 1 channel: R = G = B
    if (input_channels == 1 && f.preset == ColorPreset::gray) {  // gray of gray: the image itself
        s.rows = 1;
        s.m[0][0] = 1;
        s.copy = true;
        return s;
    }
    // Rows and columns below are in storage order: B, G, R. For 8/16-bit
    // images cv::cvtColor (4.6) uses fixed-point coefficients: BGR2GRAY
    // 3735, 19235, 9798 over 2^15; BGR2YCrCb 1868, 9617, 4899 and 11682,
    // 9241 over 2^14 (checked against cvtColor on 16-bit pixels). We use the
    // same values so 16-bit results stay within 1 of OpenCV; 0.114, 0.587,
    // 0.299 would differ by up to 2.
    const bool fixed = depth != Depth::f32;
    const double gray[3] = {fixed ? 3735 / 32768.0 : 0.114, fixed ? 19235 / 32768.0 : 0.587,
                            fixed ? 9798 / 32768.0 : 0.299};
    const double y[3] = {fixed ? 1868 / 16384.0 : 0.114, fixed ? 9617 / 16384.0 : 0.587,
                         fixed ? 4899 / 16384.0 : 0.299};
    const double cr = fixed ? 11682 / 16384.0 : 0.713, cb = fixed ? 9241 / 16384.0 : 0.564;
    switch (f.preset) {
        case ColorPreset::gray:  // cv::cvtColor COLOR_BGR2GRAY
            s.rows = 1;
            for (int c = 0; c < 3; ++c) s.m[0][c] = static_cast<float>(gray[c]);
            // OpenCV's 8-bit gray rounds half up ((sum + 2^14) >> 15), floats round halves to even: an
            // offset of half the weights' last bit lifts the ties and nothing else, exactly (a sum below 256
            // in multiples of 2^-15 plus 2^-16 fits a float's 24 bits). kGrayHalfUp.
            if (depth == Depth::u8) s.m[0][3] = kGrayHalfUp;
            if (depth == Depth::u16) {  // sums up to 2^31: in integers (StorageMatrix::fixed15)
                s.fixed15 = true;
                s.q15[0] = 3735, s.q15[1] = 19235, s.q15[2] = 9798;
            }
            return s;
        case ColorPreset::sepia: {
            const float m[3][4] = {{.131f, .534f, .272f, 0}, {.168f, .686f, .349f, 0}, {.189f, .769f, .393f, 0}};
            s.rows = 3;
            for (int r = 0; r < 3; ++r)
                for (int c = 0; c < 4; ++c) s.m[r][c] = m[r][c];
            return s;
        }
        case ColorPreset::ycrcb: {  // cv::cvtColor COLOR_BGR2YCrCb: Y, Cr, Cb
            const double delta = depth == Depth::u8 ? 128.0 : depth == Depth::u16 ? 32768.0 : 0.5;
            s.rows = 3;
            for (int c = 0; c < 3; ++c) {
                s.m[0][c] = static_cast<float>(y[c]);
                s.m[1][c] = static_cast<float>(cr * ((c == 2) - y[c]));  // Cr = (R - Y) * 0.713 + delta
                s.m[2][c] = static_cast<float>(cb * ((c == 0) - y[c]));  // Cb = (B - Y) * 0.564 + delta
            }
            s.m[1][3] = s.m[2][3] = static_cast<float>(delta);
            return s;
        }
        case ColorPreset::custom: break;
    }
    s.rows = 3;  // user rows R', G', B' and columns R, G, B become storage order
    for (int r = 0; r < 3; ++r) {
        for (int c = 0; c < 3; ++c) s.m[r][c] = static_cast<float>(f.rgb_matrix[(2 - r) * 4 + (2 - c)]);
        s.m[r][3] = static_cast<float>(f.rgb_matrix[(2 - r) * 4 + 3]);
    }
    return s;
}

}  // namespace cbi
