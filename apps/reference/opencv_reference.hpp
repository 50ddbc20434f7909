#pragma once
// What OpenCV computes for each cbi filter, random test images and the
// comparison with the documented tolerances: one definition for the tests
// (tests/reference.hpp adds GoogleTest's parameters on top) and for
// cbi-bench, which validates and times against it. Header-only, no GoogleTest;
// not installed (no part of the library's layers).
//
// Semantics (docs/cli.md#filters): box = cv::blur, gaussian =
// cv::GaussianBlur, sobel = |gx|, |gy| or sqrt(gx^2 + gy^2) of
// cv::Sobel(src, CV_32F, ...) rounded and saturated to the input depth,
// laplacian = |cv::Laplacian(src, CV_32F, ksize, 1, 0, ...)| likewise, colour = the matrix on (R, G, B) with alpha kept (gray and ycrcb as
// cv::cvtColor), median = cv::medianBlur, bilateral = cv::bilateralFilter
// (brute force with the same definition where OpenCV refuses the depth,
// channels, K or border).
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <variant>
#include <vector>

#include "filters/filter.hpp"
#include "pipeline/opencv.hpp"

namespace cbi::reference {

// Random samples over the depth's whole range (floats in [-1, 2)), never all zeros.
inline cv::Mat random_image(int width, int height, int channels, Depth depth, unsigned seed) {
    cv::Mat m(height, width, cv_type(depth, channels));
    cv::RNG rng(seed);
    if (depth == Depth::u8)
        rng.fill(m, cv::RNG::UNIFORM, 0, 256);
    else if (depth == Depth::u16)
        rng.fill(m, cv::RNG::UNIFORM, 0, 65536);
    else
        rng.fill(m, cv::RNG::UNIFORM, -1.0, 2.0);
    return m;
}

// Applies an OpenCV stencil with our border into `out`. Constant borders go
// through cv::copyMakeBorder, since cv::blur/GaussianBlur/Sobel take no
// value, and so does wrap, which OpenCV's filter engine refuses
// (columnBorderType != BORDER_WRAP) but copyMakeBorder implements. The
// other borders are OpenCV's own call, nothing more (cbi-bench times it).
template <class F>
void with_border(const cv::Mat& src, const Border& border, int radius, cv::Mat& out, F&& filter) {
    if (border.mode != BorderMode::constant && border.mode != BorderMode::wrap) {
        filter(src, out, opencv_border(border.mode));
        return;
    }
    cv::Mat padded, full;
    cv::copyMakeBorder(src, padded, radius, radius, radius, radius, opencv_border(border.mode),
                       cv::Scalar::all(border.value));
    filter(padded, full, cv::BORDER_REPLICATE);  // every tap of the centre lies inside the padding
    full(cv::Rect(radius, radius, src.cols, src.rows)).copyTo(out);
}

// Reference rows R', G', B' on (R, G, B) applied to a BGR(A) Mat.
inline cv::Mat transform_rgb(const cv::Mat& src, const double rgb[3][4]) {
    cv::Mat m(3, 4, CV_32F);
    for (int r = 0; r < 3; ++r) {  // to storage order: rows and columns B, G, R
        for (int c = 0; c < 3; ++c) m.at<float>(r, c) = static_cast<float>(rgb[2 - r][2 - c]);
        m.at<float>(r, 3) = static_cast<float>(rgb[2 - r][3]);
    }
    cv::Mat bgr, out;
    if (src.channels() == 4)
        cv::cvtColor(src, bgr, cv::COLOR_BGRA2BGR);
    else
        bgr = src;
    cv::transform(bgr, out, m);
    return out;
}

inline cv::Mat keep_alpha(const cv::Mat& src, const cv::Mat& color3) {
    if (src.channels() != 4) return color3;
    std::vector<cv::Mat> planes, alpha;
    cv::split(color3, planes);
    cv::split(src, alpha);
    planes.push_back(alpha[3]);
    cv::Mat out;
    cv::merge(planes, out);
    return out;
}

// What OpenCV computes for each kind with `border` on `src`, into `out`:
// one overload per kind (a kind without one does not compile).
inline void reference(const BoxFilter& f, const Border& border, const cv::Mat& src, cv::Mat& out) {
    with_border(src, border, f.ksize / 2, out, [&](const cv::Mat& s, cv::Mat& d, int b) {
        cv::blur(s, d, {f.ksize, f.ksize}, {-1, -1}, b);
    });
}

inline void reference(const GaussianFilter& f, const Border& border, const cv::Mat& src, cv::Mat& out) {
    with_border(src, border, f.ksize / 2, out, [&](const cv::Mat& s, cv::Mat& d, int b) {
        cv::GaussianBlur(s, d, {f.ksize, f.ksize}, f.sigma, f.sigma, b);
    });
}

inline void reference(const SobelFilter& f, const Border& border, const cv::Mat& src, cv::Mat& out) {
    const int depth = src.depth();
    const int radius = f.ksize == 1 ? 1 : f.ksize / 2;
    with_border(src, border, radius, out, [&](const cv::Mat& s, cv::Mat& d, int b) {
        thread_local cv::Mat gx, gy, v;  // reused run after run (cbi-bench times this)
        if (f.mode != SobelMode::y) cv::Sobel(s, gx, CV_32F, 1, 0, f.ksize, 1, 0, b);
        if (f.mode != SobelMode::x) cv::Sobel(s, gy, CV_32F, 0, 1, f.ksize, 1, 0, b);
        if (f.mode == SobelMode::mag)
            cv::magnitude(gx, gy, v);  // per sample, any channel count
        else
            v = cv::abs(f.mode == SobelMode::x ? gx : gy);
        v.convertTo(d, depth);  // rounds and saturates
    });
}

inline void reference(const ScharrFilter& f, const Border& border, const cv::Mat& src, cv::Mat& out) {
    const int depth = src.depth();
    with_border(src, border, 1, out, [&](const cv::Mat& s, cv::Mat& d, int b) {
        thread_local cv::Mat gx, gy, v;  // reused run after run (cbi-bench times this)
        if (f.mode != SobelMode::y) cv::Scharr(s, gx, CV_32F, 1, 0, 1, 0, b);
        if (f.mode != SobelMode::x) cv::Scharr(s, gy, CV_32F, 0, 1, 1, 0, b);
        if (f.mode == SobelMode::mag)
            cv::magnitude(gx, gy, v);
        else
            v = cv::abs(f.mode == SobelMode::x ? gx : gy);
        v.convertTo(d, depth);  // rounds and saturates
    });
}

inline void reference(const LaplacianFilter& f, const Border& border, const cv::Mat& src, cv::Mat& out) {
    const int depth = src.depth();
    const int radius = f.ksize == 1 ? 1 : f.ksize / 2;
    with_border(src, border, radius, out, [&](const cv::Mat& s, cv::Mat& d, int b) {
        thread_local cv::Mat lap;  // reused run after run (cbi-bench times this)
        cv::Laplacian(s, lap, CV_32F, f.ksize, 1, 0, b);
        cv::Mat(cv::abs(lap)).convertTo(d, depth);  // rounds and saturates
    });
}

// cv::morphologyEx with getStructuringElement; the default border (value
// kMorphologyDefaultBorder) is OpenCV's morphologyDefaultBorderValue. OpenCV
// refuses the wrap border: each erosion or dilation then runs on a
// wrap-padded copy, composed as morphologyEx composes them.
template <MorphOp Op>
void reference(const Morphology<Op>& f, const Border& border, const cv::Mat& src, cv::Mat& out) {
    const int shape = f.shape == MorphShape::cross     ? cv::MORPH_CROSS
                      : f.shape == MorphShape::ellipse ? cv::MORPH_ELLIPSE
                                                       : cv::MORPH_RECT;
    const cv::Mat se = cv::getStructuringElement(shape, {f.width, f.height});
    const cv::Point anchor(f.ax, f.ay);
    constexpr int ops[] = {cv::MORPH_ERODE,    cv::MORPH_DILATE, cv::MORPH_OPEN,    cv::MORPH_CLOSE,
                           cv::MORPH_GRADIENT, cv::MORPH_TOPHAT, cv::MORPH_BLACKHAT};
    if (border.mode != BorderMode::wrap) {
        cv::morphologyEx(src, out, ops[static_cast<int>(Op)], se, anchor, f.iterations, opencv_border(border.mode),
                         cv::Scalar::all(border.value));
        return;
    }
    const int ax = f.ax < 0 ? f.width / 2 : f.ax, ay = f.ay < 0 ? f.height / 2 : f.ay;
    const auto passes = [&](const cv::Mat& in, bool erode) {
        cv::Mat cur = in.clone(), padded, full;
        for (int i = 0; i < f.iterations; ++i) {
            cv::copyMakeBorder(cur, padded, ay, f.height - 1 - ay, ax, f.width - 1 - ax, cv::BORDER_WRAP);
            if (erode)
                cv::erode(padded, full, se, {ax, ay}, 1, cv::BORDER_REPLICATE);
            else
                cv::dilate(padded, full, se, {ax, ay}, 1, cv::BORDER_REPLICATE);
            full(cv::Rect(ax, ay, in.cols, in.rows)).copyTo(cur);
        }
        return cur;
    };
    switch (Op) {
        case MorphOp::erode: out = passes(src, true); return;
        case MorphOp::dilate: out = passes(src, false); return;
        case MorphOp::open: out = passes(passes(src, true), false); return;
        case MorphOp::close: out = passes(passes(src, false), true); return;
        case MorphOp::gradient: cv::subtract(passes(src, false), passes(src, true), out); return;
        case MorphOp::tophat: cv::subtract(src, passes(passes(src, true), false), out); return;
        case MorphOp::blackhat: cv::subtract(passes(passes(src, false), true), src, out); return;
    }
}

inline void reference(const ColorFilter& c, const Border&, const cv::Mat& src, cv::Mat& out) {
    switch (c.preset) {
        case ColorPreset::gray:
            cv::cvtColor(src, out, src.channels() == 4 ? cv::COLOR_BGRA2GRAY : cv::COLOR_BGR2GRAY);
            return;
        case ColorPreset::ycrcb: {
            cv::Mat bgr, ycrcb;
            if (src.channels() == 4)
                cv::cvtColor(src, bgr, cv::COLOR_BGRA2BGR);
            else
                bgr = src;
            cv::cvtColor(bgr, ycrcb, cv::COLOR_BGR2YCrCb);
            out = keep_alpha(src, ycrcb);
            return;
        }
        case ColorPreset::sepia: {
            const double sepia[3][4] = {{.393, .769, .189, 0}, {.349, .686, .168, 0}, {.272, .534, .131, 0}};
            out = keep_alpha(src, transform_rgb(src, sepia));
            return;
        }
        case ColorPreset::custom: break;
    }
    double m[3][4];
    for (int r = 0; r < 3; ++r)
        for (int k = 0; k < 4; ++k) m[r][k] = c.rgb_matrix[r * 4 + k];
    out = keep_alpha(src, transform_rgb(src, m));
}

inline void reference(const ThresholdFilter& f, const Border&, const cv::Mat& src, cv::Mat& out) {
    static constexpr int types[] = {cv::THRESH_BINARY, cv::THRESH_BINARY_INV, cv::THRESH_TRUNC, cv::THRESH_TOZERO,
                                    cv::THRESH_TOZERO_INV};
    const double maxval = !f.default_maxval ? f.maxval : src.depth() == CV_8U ? 255 : src.depth() == CV_16U ? 65535 : 1;
    cv::threshold(src, out, f.thresh, maxval, types[static_cast<int>(f.type)] | (f.otsu ? cv::THRESH_OTSU : 0));
}

inline void reference(const ScaleFilter& f, const Border&, const cv::Mat& src, cv::Mat& out) {
    src.convertTo(out, -1, f.alpha, f.beta);
}

// The table a host builds, saturate_cast<T>(MAX * pow(i / MAX, 1 / G)) (cv::LUT
// for 8-bit; 16-bit through a 65536-entry table); float: pow per sample,
// samples <= 0 unchanged.
inline void reference(const GammaFilter& f, const Border&, const cv::Mat& src, cv::Mat& out) {
    const double e = 1.0 / f.gamma;
    if (src.depth() == CV_8U) {
        cv::Mat lut(1, 256, CV_8U);
        for (int i = 0; i < 256; ++i) lut.at<uchar>(i) = cv::saturate_cast<uchar>(255.0 * std::pow(i / 255.0, e));
        cv::LUT(src, lut, out);
        return;
    }
    out.create(src.size(), src.type());
    if (src.depth() == CV_16U) {
        std::vector<ushort> lut(65536);
        for (int i = 0; i < 65536; ++i) lut[i] = cv::saturate_cast<ushort>(65535.0 * std::pow(i / 65535.0, e));
        for (int y = 0; y < src.rows; ++y)
            for (int x = 0; x < src.cols * src.channels(); ++x) out.ptr<ushort>(y)[x] = lut[src.ptr<ushort>(y)[x]];
        return;
    }
    for (int y = 0; y < src.rows; ++y)
        for (int x = 0; x < src.cols * src.channels(); ++x) {
            const float v = src.ptr<float>(y)[x];
            out.ptr<float>(y)[x] = v > 0 ? static_cast<float>(std::pow(static_cast<double>(v), e)) : v;
        }
}

// cv::cvtColor COLOR_BGR2HSV / BGR2HLS on the BGR of `src` (a gray image as
// B = G = R), alpha kept. 16-bit, which cvtColor refuses: its float path on
// src / 65535, H / 2 and the rest times 65535, rounded.
inline void hsv_reference(bool hls, const cv::Mat& src, cv::Mat& out) {
    cv::Mat bgr, result;
    if (src.channels() == 4)
        cv::cvtColor(src, bgr, cv::COLOR_BGRA2BGR);
    else if (src.channels() == 1)
        cv::cvtColor(src, bgr, cv::COLOR_GRAY2BGR);
    else
        bgr = src;
    const int code = hls ? cv::COLOR_BGR2HLS : cv::COLOR_BGR2HSV;
    if (src.depth() != CV_16U) {
        cv::cvtColor(bgr, result, code);
    } else {
        cv::Mat f;
        bgr.convertTo(f, CV_32F, 1.0 / 65535);
        cv::cvtColor(f, f, code);
        std::vector<cv::Mat> planes;
        cv::split(f, planes);
        planes[0].convertTo(planes[0], CV_16U, 0.5);
        planes[1].convertTo(planes[1], CV_16U, 65535);
        planes[2].convertTo(planes[2], CV_16U, 65535);
        if (!hls) {  // V is the maximum itself
            std::vector<cv::Mat> c;
            cv::split(bgr, c);
            planes[2] = cv::max(cv::max(c[0], c[1]), c[2]);
        }
        cv::merge(planes, result);
    }
    out = keep_alpha(src, result);
}
inline void reference(const HsvFilter&, const Border&, const cv::Mat& src, cv::Mat& out) {
    hsv_reference(false, src, out);
}
inline void reference(const HlsFilter&, const Border&, const cv::Mat& src, cv::Mat& out) {
    hsv_reference(true, src, out);
}

inline cv::Mat taps_mat(const std::vector<double>& taps) {
    cv::Mat m(1, static_cast<int>(taps.size()), CV_32F);
    for (std::size_t i = 0; i < taps.size(); ++i) m.at<float>(static_cast<int>(i)) = static_cast<float>(taps[i]);
    return m;
}

inline void reference(const SepFilter2DFilter& f, const Border& border, const cv::Mat& src, cv::Mat& out) {
    const cv::Mat kx = taps_mat(f.kx), ky = taps_mat(f.ky);
    const int radius = static_cast<int>(std::max(f.kx.size(), f.ky.size())) / 2 + 1;
    with_border(src, border, radius, out, [&](const cv::Mat& s, cv::Mat& d, int b) {
        cv::sepFilter2D(s, d, -1, kx, ky, {-1, -1}, 0, b);
    });
}

inline void reference(const Filter2DFilter& f, const Border& border, const cv::Mat& src, cv::Mat& out) {
    cv::Mat kernel(f.height, f.width, CV_32F);
    for (int i = 0; i < f.width * f.height; ++i)
        kernel.at<float>(i / f.width, i % f.width) = static_cast<float>(f.taps[i]);
    with_border(src, border, std::max(f.width, f.height) / 2 + 1, out, [&](const cv::Mat& s, cv::Mat& d, int b) {
        cv::filter2D(s, d, -1, kernel, {-1, -1}, 0, b);
    });
}

// cv::adaptiveThreshold takes 8-bit 1-channel images, as the kind does
// (other images are refused before they get here). The border is its own.
inline void reference(const AdaptiveFilter& f, const Border&, const cv::Mat& src, cv::Mat& out) {
    cv::adaptiveThreshold(src, out, f.maxval, f.gaussian ? cv::ADAPTIVE_THRESH_GAUSSIAN_C : cv::ADAPTIVE_THRESH_MEAN_C,
                          f.inverse ? cv::THRESH_BINARY_INV : cv::THRESH_BINARY, f.block, f.c);
}

// Median: cv::medianBlur where it takes the case (8u at any K, 16u and 32f
// at K 3 and 5; its border is always replicate, so other borders pad with
// cv::copyMakeBorder first: every window of the centre lies in the padding);
// otherwise a brute-force nth_element over the same padded windows.
template <class T>
void median_brute_force(const cv::Mat& padded, int k, cv::Mat& out) {
    const int cn = padded.channels();
    std::vector<T> window(static_cast<std::size_t>(k) * k);
    for (int y = 0; y < out.rows; ++y)
        for (int x = 0; x < out.cols; ++x)
            for (int c = 0; c < cn; ++c) {
                std::size_t n = 0;
                for (int j = 0; j < k; ++j)
                    for (int i = 0; i < k; ++i) window[n++] = padded.ptr<T>(y + j)[(x + i) * cn + c];
                std::nth_element(window.begin(), window.begin() + n / 2, window.end());
                out.ptr<T>(y)[x * cn + c] = window[n / 2];
            }
}

inline void reference(const MedianFilter& f, const Border& border, const cv::Mat& src, cv::Mat& out) {
    if (f.ksize == 1) {  // cv::medianBlur copies
        src.copyTo(out);
        return;
    }
    const bool opencv_takes = src.depth() == CV_8U || f.ksize <= 5;
    if (opencv_takes && border.mode == BorderMode::replicate) {
        cv::medianBlur(src, out, f.ksize);
        return;
    }
    const int r = f.ksize / 2;
    cv::Mat padded;
    cv::copyMakeBorder(src, padded, r, r, r, r, opencv_border(border.mode), cv::Scalar::all(border.value));
    if (opencv_takes) {
        cv::Mat full;
        cv::medianBlur(padded, full, f.ksize);
        full(cv::Rect(r, r, src.cols, src.rows)).copyTo(out);
        return;
    }
    out.create(src.size(), src.type());
    if (src.depth() == CV_16U)
        median_brute_force<std::uint16_t>(padded, f.ksize, out);
    else
        median_brute_force<float>(padded, f.ksize, out);
}

// Bilateral: cv::bilateralFilter where it takes the case (8u and 32f, 1 and
// 3 channels); otherwise OpenCV's definition in double (sigmas <= 0 read as
// 1, the disc of bilateral_radius, exp of the squared distance and of the
// squared L1 colour distance), rounded and saturated once.
template <class T>
void bilateral_brute_force(const BilateralFilter& f, const cv::Mat& padded, int r, cv::Mat& out) {
    const double sc = f.sigma_color <= 0 ? 1 : f.sigma_color, ss = f.sigma_space <= 0 ? 1 : f.sigma_space;
    const double cc = -0.5 / (sc * sc), cs = -0.5 / (ss * ss);
    const int cn = padded.channels();
    for (int y = 0; y < out.rows; ++y)
        for (int x = 0; x < out.cols; ++x) {
            const T* centre = padded.ptr<T>(y + r) + (x + r) * cn;
            double sum[4] = {}, wsum = 0;
            for (int dy = -r; dy <= r; ++dy)
                for (int dx = -r; dx <= r; ++dx) {
                    if (dx * dx + dy * dy > r * r) continue;
                    const T* p = padded.ptr<T>(y + r + dy) + (x + r + dx) * cn;
                    double d = 0;
                    for (int c = 0; c < cn; ++c)
                        d += std::abs(static_cast<double>(p[c]) - static_cast<double>(centre[c]));
                    const double w = std::exp((dx * dx + dy * dy) * cs) * std::exp(d * d * cc);
                    for (int c = 0; c < cn; ++c) sum[c] += p[c] * w;
                    wsum += w;
                }
            for (int c = 0; c < cn; ++c) out.ptr<T>(y)[x * cn + c] = cv::saturate_cast<T>(sum[c] / wsum);
        }
}

inline void reference(const BilateralFilter& f, const Border& border, const cv::Mat& src, cv::Mat& out) {
    const int r = bilateral_radius(f);
    if ((src.depth() == CV_8U || src.depth() == CV_32F) && (src.channels() == 1 || src.channels() == 3)) {
        with_border(src, border, r, out, [&](const cv::Mat& s, cv::Mat& d, int b) {
            cv::bilateralFilter(s, d, f.diameter, f.sigma_color, f.sigma_space, b);
        });
        return;
    }
    cv::Mat padded;
    cv::copyMakeBorder(src, padded, r, r, r, r, opencv_border(border.mode), cv::Scalar::all(border.value));
    out.create(src.size(), src.type());
    switch (src.depth()) {
        case CV_8U: bilateral_brute_force<std::uint8_t>(f, padded, r, out); break;
        case CV_16U: bilateral_brute_force<std::uint16_t>(f, padded, r, out); break;
        default: bilateral_brute_force<float>(f, padded, r, out); break;
    }
}

// What OpenCV computes for `filter` with `border` on `src`, into `out`.
inline void opencv_reference(const Filter& filter, const Border& border, const cv::Mat& src, cv::Mat& out) {
    std::visit([&](const auto& f) { reference(f, border, src, out); }, filter);
}

inline cv::Mat opencv_reference(const Filter& filter, const Border& border, const cv::Mat& src) {
    cv::Mat out;
    opencv_reference(filter, border, src, out);
    return out.data == src.data ? out.clone() : out;
}

inline double peak_magnitude(const cv::Mat& m) {
    double lo = 0, hi = 0;
    cv::minMaxLoc(m.reshape(1), &lo, &hi);
    return std::max(std::abs(lo), std::abs(hi));
}

// Largest difference, and whether it is within tolerance: integers within
// `int_tol` (0: bit for bit); floats within rel * scale, where scale is the
// peak magnitude of the reference and `input_peak`, so values that cancel to
// near zero (Sobel on a flat image) are judged against the data's scale
// (see output_scale). NaN fails.
struct Comparison {
    bool ok = true;
    double max_diff = 0;
    std::string where;
};

inline Comparison compare(const cv::Mat& got, const cv::Mat& ref, double int_tol, double rel, double input_peak = 0) {
    Comparison c;
    if (got.size() != ref.size() || got.type() != ref.type()) {
        c.ok = false;
        c.where = "geometry " + cv::typeToString(got.type()) + " vs " + cv::typeToString(ref.type());
        return c;
    }
    const cv::Mat g1 = got.reshape(1), r1 = ref.reshape(1);
    const bool is_float = got.depth() == CV_32F;
    const double tol = is_float ? rel * std::max(peak_magnitude(ref), input_peak) : int_tol;
    // One pass of OpenCV's own loops (cbi-bench compares 4096^2 images); the
    // sample loop below runs only to say where a failure is.
    c.max_diff = cv::norm(g1, r1, cv::NORM_INF);
    const bool nan = is_float && (cv::countNonZero(g1 != g1) > 0 || cv::countNonZero(r1 != r1) > 0);
    if (!nan && c.max_diff <= tol) return c;
    c.ok = false;
    cv::Mat g, r;
    g1.convertTo(g, CV_64F);
    r1.convertTo(r, CV_64F);
    for (int y = 0; y < r.rows && c.where.empty(); ++y)
        for (int x = 0; x < r.cols; ++x) {
            const double a = g.at<double>(y, x), b = r.at<double>(y, x);
            if (!(std::abs(a - b) <= tol)) {
                c.where = "first at sample (" + std::to_string(x) + "," + std::to_string(y) + "): got " +
                          std::to_string(a) + " want " + std::to_string(b);
                break;
            }
        }
    return c;
}

// The magnitude a filter's output can reach: the input's peak times the
// kernel's L1 gain (Sobel 7x7: 20 * 64; Laplacian: its two passes').
// Float errors scale with it.
// The L1 gain of a kind's kernel: 1 unless an overload says otherwise.
inline double l1_gain(const SobelKernels& k) {
    double d = 0, s = 0;
    for (int i = 0; i < k.deriv_size; ++i) d += std::abs(k.deriv[i]);
    for (int i = 0; i < k.smooth_size; ++i) s += std::abs(k.smooth[i]);
    return d * s;
}
template <class F>
double kernel_gain(const F&) {
    return 1;
}
inline double kernel_gain(const SobelFilter& f) {
    return l1_gain(sobel_kernels(f.ksize));
}
inline double kernel_gain(const ScharrFilter&) {
    return l1_gain(scharr_kernels());
}
inline double kernel_gain(const LaplacianFilter& f) {
    return 2 * l1_gain(laplacian_kernels(f.ksize));
}
inline double kernel_gain(const SepFilter2DFilter& f) {
    return taps::l1({f.kx}) * taps::l1({f.ky});
}
inline double kernel_gain(const Filter2DFilter& f) {
    return taps::l1({f.taps});
}

inline double output_scale(const Filter& filter, const cv::Mat& src) {
    return std::visit([](const auto& f) { return kernel_gain(f); }, filter) * peak_magnitude(src);
}

// Saves the images of a failed comparison for inspection; returns where.
inline std::string dump_failure(const std::string& name, const cv::Mat& got, const cv::Mat& ref) {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / "cbi-test-failures";
    fs::create_directories(dir);
    std::string safe = name;
    for (char& ch : safe)
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '.') ch = '_';
    const auto ext = got.depth() == CV_32F ? ".tiff" : ".png";
    try {
        cv::imwrite((dir / (safe + "-got" + ext)).string(), got);
        cv::imwrite((dir / (safe + "-want" + ext)).string(), ref);
    } catch (const cv::Exception&) {
        return "(could not save images)";
    }
    return (dir / safe).string() + "-{got,want}" + ext;
}

}  // namespace cbi::reference
