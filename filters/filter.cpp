#include "filters/filter.hpp"

#include <climits>  // softfloat.hpp uses SHRT_MIN without including it

#include <opencv2/core/softfloat.hpp>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "filters/error.hpp"

namespace cbi {
namespace {

[[noreturn]] void invalid(const std::string& message) { throw std::invalid_argument(message); }

// Splits "a:b:c" at ':'.
std::vector<std::string_view> split(std::string_view text, char sep) {
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    while (true) {
        const auto pos = text.find(sep, start);
        parts.push_back(text.substr(start, pos - start));
        if (pos == std::string_view::npos) return parts;
        start = pos + 1;
    }
}

bool parse_int(std::string_view text, int& out) {
    const std::string s(text);
    if (s.empty() || s.size() > 9) return false;
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (*end != '\0' || std::isspace(static_cast<unsigned char>(s[0]))) return false;
    out = static_cast<int>(v);
    return true;
}

// A finite decimal number, the whole string, correctly rounded, as
// number() prints it (so every printed value reads back bit-identically).
// from_chars, unlike strtod, ignores the C locale (no decimal comma); a
// leading '+' is still taken, as strtod took it.
bool parse_double(std::string_view text, double& out) {
    if (text.size() > 1 && text[0] == '+' && text[1] != '-') text.remove_prefix(1);
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, out);
    return !text.empty() && ec == std::errc{} && ptr == end && std::isfinite(out);
}

int parse_ksize(std::string_view filter, std::string_view text) {
    int k = 0;
    if (!parse_int(text, k) || k < 1 || k > kMaxKernel || k % 2 == 0)
        invalid(std::string(filter) + " kernel size '" + std::string(text) + "' must be an odd integer from 1 to " +
                std::to_string(kMaxKernel));
    return k;
}

// The KSIZEs of OpenCV's Sobel kernels (Sobel and Laplacian).
bool is_sobel_ksize(int k) { return k == 1 || k == 3 || k == 5 || k == 7; }

// The shortest text that reads back as exactly v (to_chars' shortest
// round-trip form): "1.23456789", "0.1", "1e-07", "-0", "5e-324".
std::string number(double v) {
    char buf[32];  // the longest shortest form of a double is 24 characters
    const auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, ec == std::errc{} ? ptr : buf);
}

}  // namespace

BoxFilter parse_box(std::string_view arg) { return {parse_ksize("blur", arg)}; }

GaussianFilter parse_gaussian(std::string_view arg) {
    const auto parts = split(arg, ':');
    if (parts.size() > 2) invalid("gaussian '" + std::string(arg) + "' is not of the form K[:SIGMA]");
    GaussianFilter f{parse_ksize("gaussian", parts[0]), 0.0};
    if (parts.size() == 2 && (!parse_double(parts[1], f.sigma) || f.sigma < 0))
        invalid("gaussian sigma '" + std::string(parts[1]) + "' must be a number >= 0 (0: derived from K)");
    if (f.sigma == 0) f.sigma = 0;  // -0 means 0, which to_string leaves out: store +0 so it reads back the same
    return f;
}

SobelFilter parse_sobel(std::string_view arg) {
    const auto parts = split(arg, ':');
    SobelFilter f;
    if (parts.size() > 2) invalid("sobel '" + std::string(arg) + "' is not of the form x|y|mag[:KSIZE]");
    if (parts[0] == "x") f.mode = SobelMode::x;
    else if (parts[0] == "y") f.mode = SobelMode::y;
    else if (parts[0] == "mag" || parts[0].empty()) f.mode = SobelMode::mag;
    else invalid("sobel mode '" + std::string(parts[0]) + "' must be x, y or mag");
    if (parts.size() == 2 && (!parse_int(parts[1], f.ksize) || !is_sobel_ksize(f.ksize)))
        invalid("sobel ksize '" + std::string(parts[1]) + "' must be 1, 3, 5 or 7");
    return f;
}

LaplacianFilter parse_laplacian(std::string_view arg) {
    LaplacianFilter f;
    if (!arg.empty() && (!parse_int(arg, f.ksize) || !is_sobel_ksize(f.ksize)))
        invalid("laplacian ksize '" + std::string(arg) + "' must be 1, 3, 5 or 7");
    return f;
}

ColorFilter parse_color(std::string_view arg) {
    if (arg == "gray") return {ColorPreset::gray, {}};
    if (arg == "sepia") return {ColorPreset::sepia, {}};
    if (arg == "ycrcb") return {ColorPreset::ycrcb, {}};
    const auto parts = split(arg, ',');
    if (parts.size() != 9 && parts.size() != 12)
        invalid("color '" + std::string(arg) +
                "' must be gray, sepia, ycrcb or a matrix of 9 (3x3) or 12 (3x4) comma-separated numbers, rows R',G',B'");
    ColorFilter f{ColorPreset::custom, {}};
    const int cols = parts.size() == 9 ? 3 : 4;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        double v = 0;
        if (!parse_double(parts[i], v)) invalid("color matrix entry '" + std::string(parts[i]) + "' is not a number");
        f.rgb_matrix[(i / cols) * 4 + i % cols] = v;
    }
    return f;
}

Filter parse_filter(std::string_view spec) {
    const auto colon = spec.find(':');
    const auto name = spec.substr(0, colon);
    const auto arg = colon == std::string_view::npos ? std::string_view{} : spec.substr(colon + 1);
    if (name == "blur") return parse_box(arg);
    if (name == "gaussian") return parse_gaussian(arg);
    if (name == "sobel") return parse_sobel(arg.empty() ? "mag" : arg);
    if (name == "laplacian") return parse_laplacian(arg);
    if (name == "color") return parse_color(arg);
    invalid("unknown filter '" + std::string(name) + "' (blur, gaussian, sobel, laplacian or color)");
}

BlendFilter parse_blend(std::string_view arg) {
    const auto parts = split(arg, ':');
    BlendFilter b;
    double* fields[] = {&b.alpha, &b.beta, &b.gamma};
    if (parts.size() < 2 || parts.size() > 3) invalid("blend '" + std::string(arg) + "' is not of the form ALPHA:BETA[:GAMMA]");
    for (std::size_t i = 0; i < parts.size(); ++i)
        if (!parse_double(parts[i], *fields[i])) invalid("blend weight '" + std::string(parts[i]) + "' is not a number");
    return b;
}

std::string to_string(const BlendFilter& b) {
    return "blend:" + number(b.alpha) + ":" + number(b.beta) + ":" + number(b.gamma);
}

Border parse_border(std::string_view arg) {
    const auto parts = split(arg, ':');
    const auto name = parts[0];
    Border b;
    if (name == "reflect101") b.mode = BorderMode::reflect101;
    else if (name == "reflect") b.mode = BorderMode::reflect;
    else if (name == "replicate") b.mode = BorderMode::replicate;
    else if (name == "wrap") b.mode = BorderMode::wrap;
    else if (name == "constant") b.mode = BorderMode::constant;
    else invalid("border '" + std::string(arg) + "' must be reflect101, reflect, replicate, constant[:V] or wrap");
    if (parts.size() > 2 || (parts.size() == 2 && b.mode != BorderMode::constant))
        invalid("border '" + std::string(arg) + "': only constant takes a value (constant:V)");
    if (parts.size() == 2 && !parse_double(parts[1], b.value))
        invalid("border value '" + std::string(parts[1]) + "' is not a number");
    return b;
}

std::string to_string(const Border& b) {
    switch (b.mode) {
        case BorderMode::reflect101: return "reflect101";
        case BorderMode::reflect: return "reflect";
        case BorderMode::replicate: return "replicate";
        case BorderMode::wrap: return "wrap";
        case BorderMode::constant: return "constant:" + number(b.value);
    }
    return "?";
}

std::string to_string(const Filter& filter) {
    struct Printer {
        std::string operator()(const BoxFilter& f) const { return "blur:" + std::to_string(f.ksize); }
        std::string operator()(const GaussianFilter& f) const {
            return "gaussian:" + std::to_string(f.ksize) + (f.sigma > 0 ? ":" + number(f.sigma) : "");
        }
        std::string operator()(const SobelFilter& f) const {
            const char* mode = f.mode == SobelMode::x ? "x" : f.mode == SobelMode::y ? "y" : "mag";
            return std::string("sobel:") + mode + ":" + std::to_string(f.ksize);
        }
        std::string operator()(const LaplacianFilter& f) const { return "laplacian:" + std::to_string(f.ksize); }
        std::string operator()(const ColorFilter& f) const {
            switch (f.preset) {
                case ColorPreset::gray: return "color:gray";
                case ColorPreset::sepia: return "color:sepia";
                case ColorPreset::ycrcb: return "color:ycrcb";
                case ColorPreset::custom: break;
            }
            std::string s = "color:";
            for (std::size_t i = 0; i < f.rgb_matrix.size(); ++i) s += (i ? "," : "") + number(f.rgb_matrix[i]);
            return s;
        }
    };
    return std::visit(Printer{}, filter);
}

namespace {
// OpenCV's bit-exact Gaussian kernel (getGaussianKernelBitExact, OpenCV 4.x):
// the fixed tables for k <= 9 when sigma <= 0, otherwise exp(-x^2 / (2
// sigma^2)) normalised, all in cv::softdouble (software IEEE double, the
// same on every machine). cv::getGaussianKernel rounds these to the kernel
// type; GaussianBlur on 8-bit images takes them to 8 fractional bits.
// A fixed-size array: preparing a launch allocates nothing (tested).
using BitExactKernel = std::array<cv::softdouble, kMaxKernel>;
BitExactKernel compute_gaussian_bit_exact(int n, double sigma) {
    using cv::softdouble;
    static const double small_tables[5][9] = {
        {1.0},
        {0.25, 0.5, 0.25},
        {0.0625, 0.25, 0.375, 0.25, 0.0625},
        {0.03125, 0.109375, 0.21875, 0.28125, 0.21875, 0.109375, 0.03125},
        {4 / 256., 13 / 256., 30 / 256., 51 / 256., 60 / 256., 51 / 256., 30 / 256., 13 / 256., 4 / 256.}};
    BitExactKernel k{};
    if (sigma <= 0 && n % 2 == 1 && n <= 9) {
        for (int i = 0; i < n; ++i) k[i] = softdouble(small_tables[n >> 1][i]);
        return k;
    }
    // sigma from k: ((n - 1) * 0.5 - 1) * 0.3 + 0.8 = n * 0.15 + 0.35, in OpenCV's exact constants.
    const softdouble s = sigma > 0 ? softdouble(sigma)
                                   : cv::mulAdd(softdouble(n), softdouble::fromRaw(0x3fc3333333333333),
                                                softdouble::fromRaw(0x3fd6666666666666));
    const softdouble scale2 = softdouble::fromRaw(0xbfc0000000000000) / (s * s);  // -0.5 * 0.25 (x counts half steps)
    const int half = (n - 1) / 2;
    softdouble sum = softdouble::zero();
    for (int i = 0, x = 1 - n; i < half; ++i, x += 2) {
        k[i] = cv::exp(softdouble(x * x) * scale2);
        sum += k[i];
    }
    sum = sum * softdouble(2) + softdouble::one();
    const softdouble inverse = softdouble::one() / sum;
    for (int i = 0; i < half; ++i) k[n - 1 - i] = k[i] = k[i] * inverse;
    k[half] = inverse;
    return k;
}

// The kernel is asked for at every launch, and softdouble is slow (about
// 2.7 us at 31 taps, 22 us at 255): each thread keeps the last few it
// computed (no lock, no allocation). The reference stays valid until this
// thread's next call.
const BitExactKernel& gaussian_bit_exact(int n, double sigma) {
    struct Entry {
        int n = 0;
        double sigma = 0;
        BitExactKernel k{};
    };
    thread_local std::array<Entry, 4> recent{};
    thread_local int next = 0;
    for (const Entry& e : recent)
        if (e.n == n && e.sigma == sigma) return e.k;
    Entry& e = recent[next];
    next = (next + 1) % static_cast<int>(recent.size());
    e.n = n, e.sigma = sigma, e.k = compute_gaussian_bit_exact(n, sigma);
    return e.k;
}
}  // namespace

GaussianKernel1D gaussian_weights(int n, double sigma) {
    const BitExactKernel& exact = gaussian_bit_exact(n, sigma);
    GaussianKernel1D k{n, {}};
    for (int i = 0; i < n; ++i) k.w[i] = static_cast<double>(exact[i]);
    return k;
}

GaussianFixedKernel gaussian_fixed_weights(int n, double sigma) {
    // OpenCV's getGaussianKernelFixedPoint_ED: round each outer weight to
    // 1/256 carrying the rounding error to the next (error diffusion); the
    // centre takes what is left, so the weights sum to exactly 256.
    using cv::softdouble;
    const BitExactKernel& exact = gaussian_bit_exact(n, sigma);
    GaussianFixedKernel k{n, {}};
    const softdouble one(256.0);
    softdouble error = softdouble::zero();
    int sum = 0;
    for (int i = 0; i < n / 2; ++i) {
        const softdouble v = exact[i] * one + error;
        const int rounded = cvRound(v);
        error = v - softdouble(rounded);
        k.w[i] = k.w[n - 1 - i] = static_cast<std::uint16_t>(rounded);
        sum += 2 * rounded;
    }
    k.w[n / 2] = static_cast<std::uint16_t>(256 - sum);
    return k;
}

namespace {
// cv::getSobelKernel's construction of a 1-D kernel of a derivative order.
void sobel_kernel(int* k, int order, int size) {
    if (size == 1) {
        k[0] = 1;
        return;
    }
    if (size == 3) {
        const int tables[3][3] = {{1, 2, 1}, {-1, 0, 1}, {1, -2, 1}};
        for (int i = 0; i < 3; ++i) k[i] = tables[order][i];
        return;
    }
    int ker[8] = {1};
    for (int i = 0; i < size - order - 1; ++i) {  // smoothing: repeated [1 1]
        int old = ker[0];
        for (int j = 1; j <= size; ++j) {
            const int next = ker[j] + ker[j - 1];
            ker[j - 1] = old;
            old = next;
        }
    }
    for (int i = 0; i < order; ++i) {  // differencing: repeated [-1 1]
        int old = -ker[0];
        for (int j = 1; j <= size; ++j) {
            const int next = ker[j - 1] - ker[j];
            ker[j - 1] = old;
            old = next;
        }
    }
    for (int i = 0; i < size; ++i) k[i] = ker[i];
}
}  // namespace

SobelKernels sobel_kernels(int ksize) {
    SobelKernels k{};
    k.deriv_size = ksize == 1 ? 3 : ksize;  // OpenCV widens a 1st derivative of ksize 1 to [-1 0 1]
    k.smooth_size = ksize;
    sobel_kernel(k.deriv, 1, k.deriv_size);
    sobel_kernel(k.smooth, 0, k.smooth_size);
    return k;
}

SobelKernels laplacian_kernels(int ksize) {
    SobelKernels k{};
    k.deriv_size = ksize == 1 ? 3 : ksize;  // as cv::getSobelKernels for dx > 0
    k.smooth_size = ksize;
    sobel_kernel(k.deriv, 2, k.deriv_size);
    sobel_kernel(k.smooth, 0, k.smooth_size);
    return k;
}

StorageMatrix storage_matrix(const ColorFilter& f, Depth depth, int input_channels) {
    StorageMatrix s{};
    s.step = color_step(input_channels);  // 1 channel: R = G = B
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
    const double y[3] = {fixed ? 1868 / 16384.0 : 0.114, fixed ? 9617 / 16384.0 : 0.587, fixed ? 4899 / 16384.0 : 0.299};
    const double cr = fixed ? 11682 / 16384.0 : 0.713, cb = fixed ? 9241 / 16384.0 : 0.564;
    switch (f.preset) {
        case ColorPreset::gray:  // cv::cvtColor COLOR_BGR2GRAY
            s.rows = 1;
            for (int c = 0; c < 3; ++c) s.m[0][c] = static_cast<float>(gray[c]);
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

namespace {
// The forms of the registered schedules that `pick` accepts, for messages.
template <class Pick>
std::string forms_where(Pick pick) {
    std::string forms;
    for (const auto& e : schedule_registry())
        if (pick(e)) forms += (forms.empty() ? "" : ", ") + std::string(e.form);
    return forms;
}

std::string not_pointwise(const ScheduleSpec& schedule, const std::string& what) {
    if (schedule_entry(schedule).can.pointwise) return {};
    return "schedule " + schedule.to_string() + " runs stencil filters only (blur, gaussian, sobel, laplacian), not " + what +
           "; use " + forms_where([](const ScheduleEntry& e) { return e.can.pointwise; });
}

// The side of the square a stencil's schedule must cover (Sobel's and
// Laplacian's KSIZE 1 are 3x1 and 1x3: not square, counted as unbounded).
int stencil_size(const Filter& filter) {
    if (const auto* box = std::get_if<BoxFilter>(&filter)) return box->ksize;
    if (const auto* gauss = std::get_if<GaussianFilter>(&filter)) return gauss->ksize;
    const auto* laplacian = std::get_if<LaplacianFilter>(&filter);
    const int k = laplacian ? laplacian->ksize : std::get<SobelFilter>(filter).ksize;
    return k == 1 ? kMaxKernel + 1 : k;
}
}  // namespace

std::string why_unsupported(const ScheduleSpec& schedule, const Filter& filter, const Border& border, Fusion fusion) {
    if (std::holds_alternative<ColorFilter>(filter)) return not_pointwise(schedule, to_string(filter));
    const Capabilities& can = schedule_entry(schedule).can;
    const std::string name = "schedule " + schedule.to_string();
    if (!can.stencil)
        return name + " runs pointwise filters only (color, blend), not " + to_string(filter) + "; use " +
               forms_where([](const ScheduleEntry& e) { return e.can.stencil; });
    if (can.max_ksize > 0 && stencil_size(filter) > can.max_ksize)
        return name + " runs stencils up to " + std::to_string(can.max_ksize) + "x" + std::to_string(can.max_ksize) +
               " (sobel, laplacian KSIZE 3 and up), not " + to_string(filter) + "; use " +
               forms_where([](const ScheduleEntry& e) { return e.can.stencil && e.can.max_ksize == 0; });
    if (fusion.color && !can.fuses_color && !(fusion.stencil && can.fuses_stencil))
        return name + " reads stored images: it cannot compute a fused colour node; use " +
               forms_where([](const ScheduleEntry& e) { return e.can.fuses_color; });
    if (fusion.stencil && !can.fuses_stencil)
        return name + " cannot compute a fused stencil pair; use " +
               forms_where([](const ScheduleEntry& e) { return e.can.fuses_stencil; });
    if (fusion.stencil && border.mode == BorderMode::wrap)
        return "a fused stencil pair cannot take the wrap border";
    if (fusion.blend && !can.fuses_blend)
        return name + " cannot compute the blend that reads it; use " +
               forms_where([](const ScheduleEntry& e) { return e.can.fuses_blend; });
    return {};
}

std::string why_unsupported(const ScheduleSpec& schedule, const BlendFilter& blend) {
    return not_pointwise(schedule, to_string(blend));
}

void check_supports(const ScheduleSpec& schedule, const Filter& filter, const Border& border, Fusion fusion) {
    if (auto why = why_unsupported(schedule, filter, border, fusion); !why.empty()) throw Unsupported("", why);
}

void check_supports(const ScheduleSpec& schedule, const BlendFilter& blend) {
    if (auto why = why_unsupported(schedule, blend); !why.empty()) throw Unsupported("", why);
}

bool supports(const ScheduleSpec& schedule, const Filter& filter, const Border& border, Fusion fusion) {
    return why_unsupported(schedule, filter, border, fusion).empty();
}

bool supports(const ScheduleSpec& schedule, const BlendFilter& blend) { return why_unsupported(schedule, blend).empty(); }

int output_channels(const Filter& f, int channels) {
    const auto* color = std::get_if<ColorFilter>(&f);
    if (!color) return channels;
    if (channels != 1 && channels != 3 && channels != 4)
        throw Error(to_string(f), "needs a 1-, 3- or 4-channel image, this one has " + std::to_string(channels));
    if (color->preset == ColorPreset::gray) return 1;
    return channels == 1 ? 3 : channels;  // a 1-channel image is read as R = G = B
}

}  // namespace cbi
