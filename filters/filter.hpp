#pragma once
// What a filter node is: the filter and its parameters, the border rule and
// the thread schedule. Semantics follow OpenCV:
//   BoxFilter       cv::blur(src, dst, {k,k}, {-1,-1}, border)
//   GaussianFilter  cv::GaussianBlur(src, dst, {k,k}, sigma, sigma, border)
//   SobelFilter     |gx|, |gy| or sqrt(gx^2+gy^2) of cv::Sobel(src, CV_32F, ...)
//   LaplacianFilter |cv::Laplacian(src, CV_32F, ksize, 1, 0, border)|
//   ColorFilter     3x3/3x4 matrix on (R,G,B); alpha kept; gray gives 1 channel;
//                   a 1-channel input is read as R = G = B (gray of it: itself)
// Kernel sizes: odd, 1..kMaxKernel (Sobel, Laplacian: 1, 3, 5, 7).
// Sobel and Laplacian results are converted to the input depth with
// rounding and saturation (float stays float).
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "filters/ops.hpp"
#include "schedules/registry.hpp"

namespace cbi {

// Equality compares values (graphs compare nodes by them, not by text).
struct BoxFilter {
    int ksize = 3;
    friend bool operator==(const BoxFilter&, const BoxFilter&) = default;
};
struct GaussianFilter {
    int ksize = 3;
    double sigma = 0;  // 0: derived from ksize by OpenCV's rule
    friend bool operator==(const GaussianFilter&, const GaussianFilter&) = default;
};
struct SobelFilter {
    SobelMode mode = SobelMode::mag;
    int ksize = 3;
    friend bool operator==(const SobelFilter&, const SobelFilter&) = default;
};
struct LaplacianFilter {
    int ksize = 1;  // cv::Laplacian's default
    friend bool operator==(const LaplacianFilter&, const LaplacianFilter&) = default;
};
enum class ColorPreset : std::uint8_t { custom, gray, sepia, ycrcb };
struct ColorFilter {
    ColorPreset preset = ColorPreset::gray;
    // custom only: rows R', G', B'; columns R, G, B, offset (image units).
    std::array<double, 12> rgb_matrix{};
    friend bool operator==(const ColorFilter&, const ColorFilter&) = default;
};

using Filter = std::variant<BoxFilter, GaussianFilter, SobelFilter, LaplacianFilter, ColorFilter>;

// The two-input node of a graph: alpha*A + beta*B + gamma per sample, as
// cv::addWeighted (rounded and saturated to the depth). Unsharp masking is
// blend(src, gaussian(src)) with alpha = 1 + amount, beta = -amount.
struct BlendFilter {
    double alpha = 1;
    double beta = 1;
    double gamma = 0;
    friend bool operator==(const BlendFilter&, const BlendFilter&) = default;
};
// "ALPHA:BETA[:GAMMA]"; throws std::invalid_argument.
BlendFilter parse_blend(std::string_view arg);
// Numbers print in the shortest form that reads back bit-identically
// (std::to_chars): "gaussian:5:1.23456789", "blend:1.5:-0.5:0".
std::string to_string(const BlendFilter& b);  // "blend:1.5:-0.5:0"

struct Border {
    BorderMode mode = BorderMode::reflect101;
    double value = 0;  // constant border value, in the image's units
    friend bool operator==(const Border&, const Border&) = default;
};

// A stencil computed inside the stencil node that reads it (fusion through
// shared memory, CUDA only): the filter and its own border rule.
struct FusedStencil {
    Filter filter;
    Border border;
};

struct FilterRun {
    Filter filter;
    Border border;
    ScheduleSpec schedule;
    // Fusion: a colour matrix applied to the node's input as the stencil
    // reads it (the pipeline's colour node, not stored); src is then that
    // colour node's input. Only with stencil filters.
    std::optional<ColorFilter> fused_color{};
    // Fusion of two stencils: this node reads the output of `fused_stencil`,
    // computed in shared memory (smem:WxH, sep:WxH: tile by tile) or line
    // buffers (stream:WxH: strip by strip) and never stored; src is then
    // that stencil's input (through fused_color when set). CUDA only; the
    // schedule is this node's.
    std::optional<FusedStencil> fused_stencil{};
};

// A blend computed in one kernel with the stencils it reads (fusion, CUDA
// stream:WxH): its input a is `a` applied to the kernel's source, or that
// source itself when `a` is empty; b likewise. The stencils run with
// `border` and `schedule` (the stencil nodes', equal); a blend of two
// sources is never fused.
struct BlendRun {
    BlendFilter blend;
    std::optional<Filter> a, b;
    Border border;
    ScheduleSpec schedule;
};

// Parsers for the option syntax; throw std::invalid_argument naming the
// option and the valid forms.
//   box:      "K"                       gaussian: "K[:SIGMA]"
//   sobel:    "x|y|mag[:KSIZE]"          color:    "gray|sepia|ycrcb|m00,m01,...(9 or 12 numbers)"
//   laplacian: "[KSIZE]"
//   border:   "reflect101|reflect|replicate|constant[:V]|wrap"
BoxFilter parse_box(std::string_view arg);
GaussianFilter parse_gaussian(std::string_view arg);
SobelFilter parse_sobel(std::string_view arg);
LaplacianFilter parse_laplacian(std::string_view arg);
ColorFilter parse_color(std::string_view arg);
Border parse_border(std::string_view arg);

// "blur:K", "gaussian:K[:SIGMA]", "sobel:MODE[:KSIZE]", "laplacian[:KSIZE]"
// or "color:SPEC": the form to_string prints and the pipeline language uses.
Filter parse_filter(std::string_view spec);

std::string to_string(const Filter& f);   // "gaussian:5:1.2"
std::string to_string(const Border& b);   // "constant:7"

// OpenCV's 1-D Gaussian kernel (cv::getGaussianKernel, bit-exact): the
// fixed tables for k <= 9 when sigma <= 0, otherwise sampled and
// normalised. Fixed-size arrays, so preparing a launch allocates nothing.
struct GaussianKernel1D {
    int size;
    double w[kMaxKernel];
};
GaussianKernel1D gaussian_weights(int ksize, double sigma);

// The same kernel in units of 1/256, summing to exactly 256, as
// cv::GaussianBlur uses it on 8-bit images (GaussianOp<std::uint8_t>).
struct GaussianFixedKernel {
    int size;
    std::uint16_t w[kMaxKernel];
};
GaussianFixedKernel gaussian_fixed_weights(int ksize, double sigma);

// OpenCV's Sobel kernels for a first derivative (cv::getDerivKernels).
SobelKernels sobel_kernels(int ksize);
// The kernels of cv::Laplacian: a second derivative and its smoothing
// (cv::getSobelKernels(2, 0, ksize); KSIZE 1 widens the derivative to 3).
SobelKernels laplacian_kernels(int ksize);

// The colour matrix in storage order for a depth (presets with offsets,
// such as ycrcb's 128 for 8-bit, depend on it) and an input of
// `input_channels` (1, 3 or 4): a 1-channel input is read as R = G = B, and
// gray of it is a copy (StorageMatrix::step, copy).
StorageMatrix storage_matrix(const ColorFilter& f, Depth depth, int input_channels = 3);

// What a node asks of its schedule beyond the filter: the fusions it runs.
struct Fusion {
    bool color = false;    // a colour node computed in its loads, not stored
    bool stencil = false;  // a stencil computed into it in the same kernel (GPU)
    bool blend = false;    // the blend that reads it computed in the same kernel (GPU)
};

// The one answer to "can `schedule` run this node?", from the registry's
// Capabilities (schedules/registry.hpp); asked by the CLI, graph
// validation, fusion, the tuner, the default table, the tests and the
// benchmarks. Empty when it can; otherwise one line with the reason and the
// schedules that can (a schedule is refused, never silently swapped).
std::string why_unsupported(const ScheduleSpec& schedule, const Filter& filter, const Border& border = {},
                            Fusion fusion = {});
std::string why_unsupported(const ScheduleSpec& schedule, const BlendFilter& blend);
bool supports(const ScheduleSpec& schedule, const Filter& filter, const Border& border = {}, Fusion fusion = {});
bool supports(const ScheduleSpec& schedule, const BlendFilter& blend);
// The same, throwing cbi::Unsupported with that line (the request is well
// formed; this schedule cannot run it, the ones named can).
void check_supports(const ScheduleSpec& schedule, const Filter& filter, const Border& border = {}, Fusion fusion = {});
void check_supports(const ScheduleSpec& schedule, const BlendFilter& blend);

// Channels of the node's output for an input with `channels` channels
// (colour: gray 1; others 3 from 1 or 3 channels, 4 from 4). Throws
// cbi::Error when the filter cannot take such an input.
int output_channels(const Filter& f, int channels);

}  // namespace cbi
