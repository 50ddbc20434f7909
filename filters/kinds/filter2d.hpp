#pragma once
// filter2d:ROWS = cv::filter2D(src, dst, -1, kernel, {-1,-1}, 0, border):
// correlation with a W x H kernel written as rows separated by ';' and taps
// by ',' (filter2d:0,-1,0;-1,5,-1;0,-1,0 sharpens), anchor at the middle
// tap (floor(W/2), floor(H/2)), rounded to nearest even and saturated to
// the depth (float stays float). Float taps and float sums in row-major
// tap order, zero taps skipped, as OpenCV's direct Filter2D does: 8/16-bit
// within 1 of OpenCV, float within 1e-4 of the output's scale (OpenCV
// switches to a DFT for kernels of 50+ or 130+ taps, which rounds
// differently). Sides 1..255.
//
// The op holds a pointer to the kernel's float taps (Filter2DFilter::
// weights; the GPU's kernels get a copy in their parameters or in device
// memory). On the CPU's naive schedule a kernel of more than
// kDirectFilter2DTaps nonzero taps runs cv::filter2D itself (its DFT: about
// the same time at any kernel size, where the direct sum costs every tap;
// cpu/filter2d.cpp), equal to OpenCV; other schedules and the GPU sum
// directly. The GPU's staged kernels take up to kMaxFilter2DTaps (3969,
// 63x63) nonzero taps in their parameters, more from device memory, and the
// per-pixel kernel runs what their shared memory cannot hold
// (cuda/filter2d.cuh). A kernel of rank 1 (every row a multiple of one row:
// box, Gaussian, Sobel written as 2-D matrices) runs as sepfilter2d with its
// row and column (FilterKind::expand; the separable machinery and its tile
// schedules).
#include <climits>
#include <string>
#include <string_view>
#include <vector>

#if !defined(__CUDACC__)  // the CPU's row helpers: GCC vector extensions nvcc's front end need not parse
#include "filters/cpu/rows.hpp"
#endif
#include "filters/kinds/args.hpp"
#include "filters/kinds/kind.hpp"
#include "filters/kinds/taps.hpp"
#include "filters/ops.hpp"

namespace cbi {

// 63x63: the GPU's staged kernel takes a weight and an offset per nonzero
// tap in its parameters (cuda/filter2d.cuh), under the 32 KB CUDA allows.
inline constexpr int kMaxFilter2DTaps = 63 * 63;
// Above this many nonzero taps cv::filter2D's DFT is faster on the CPU than
// the direct sum (about 32x32; docs/performance.md#cpu-filter2d).
inline constexpr int kDirectFilter2DTaps = 1024;

struct Filter2DFilter {
    int width = 1;
    int height = 1;
    std::vector<double> taps{1.0};    // row-major, height rows of width taps, as written
    std::vector<float> weights{1.f};  // the same as the op sums them (filter2d_filter makes both)
    friend bool operator==(const Filter2DFilter&, const Filter2DFilter&) = default;
};
Filter2DFilter filter2d_filter(int width, int height, std::vector<double> taps);

// The kernel as the op holds it: width x height taps row-major, in the
// memory of the side that runs the op.
struct Filter2DTaps {
    int width, height;
    const float* w;
    CBI_HOST_DEVICE int nonzero() const {
        int n = 0;
        for (int i = 0; i < width * height; ++i) n += w[i] != 0.f;
        return n;
    }
};
// Throws std::logic_error for a filter filter2d_filter did not make.
Filter2DTaps filter2d_taps(const Filter2DFilter& f);

// The row and column of a kernel of rank 1 (kernel[j][i] = column[j] *
// row[i] up to rounding), or false.
bool filter2d_rank_one(const Filter2DFilter& f, std::vector<double>& row, std::vector<double>& column);

template <class T>
struct Filter2DOp;
#if !defined(__CUDACC__)
namespace cpu {
// The whole image by cv::filter2D (cpu/filter2d.cpp).
template <class T>
void filter2d_by_opencv(const Filter2DOp<T>& op);
}  // namespace cpu
#endif

template <class T>
struct Filter2DOp {
    AnyBorderSource<T> src;
    ImageView dst;
    Filter2DTaps k;

    CBI_HOST_DEVICE void operator()(int x, int y) const {
        T* out = dst.row<T>(y) + x * dst.channels;
        const int x0 = x - k.width / 2, y0 = y - k.height / 2;
        for (int c = 0; c < dst.channels; ++c) {
            float sum = 0.f;  // taps in row-major order, zeros skipped, as OpenCV's Filter2D
            for (int j = 0; j < k.height; ++j) {
                const T* row = src.row(y0 + j);
                const float* w = k.w + j * k.width;
                for (int i = 0; i < k.width; ++i)
                    if (w[i] != 0.f) sum = add_rn(sum, mul_rn(w[i], to_float(src.at(row, x0 + i, c))));
            }
            out[c] = saturate_round<T>(sum);
        }
    }

    // The CPU's form (cpu/window.cpp, naive schedule): output rows [y0, y1)
    // in order. The source rows the kernel reads are padded once each
    // (border samples at the ends only) into a ring of k.height rows, then
    // every output sums its nonzero taps in operator()'s order
    // (cpu::offset_taps_row): the results are bit-identical. Host only;
    // `scratch` holds band_scratch(width) floats.
#if !defined(__CUDACC__)
    // The naive schedule's whole-image form for kernels whose direct sum
    // costs more than OpenCV's DFT: runs it and says so, else false.
    bool whole() const {
        if (k.nonzero() <= kDirectFilter2DTaps) return false;
        cpu::filter2d_by_opencv(*this);
        return true;
    }
    int band_scratch(int width) const {
        return k.height * (width + k.width - 1) * dst.channels;
    }
    void band(int y0, int y1, int width, float* scratch) const {
        const int channels = dst.channels, len = width + k.width - 1, pitch = len * channels;
        const int n = k.width * k.height;
        std::vector<float> w(n);
        std::vector<int> row_of(n), col_of(n), off(n);
        bool used[kMaxKernel] = {};  // kernel rows with a nonzero tap
        int taps = 0;
        for (int j = 0; j < k.height; ++j)
            for (int i = 0; i < k.width; ++i)
                if (k.w[j * k.width + i] != 0.f) {
                    w[taps] = k.w[j * k.width + i];
                    row_of[taps] = j;
                    col_of[taps++] = i * channels;
                    used[j] = true;
                }
        // Source row ys sits in slot ys mod k.height; held[]: which row each slot holds.
        const auto slot = [&](int ys) { return ((ys % k.height) + k.height) % k.height; };
        int held[kMaxKernel];
        for (int j = 0; j < k.height; ++j) held[j] = INT_MIN;
        const int top = -(k.height / 2);  // source row of kernel row j: y + top + j
        for (int y = y0; y < y1; ++y) {
            for (int j = 0; j < k.height; ++j) {
                const int ys = y + top + j;
                if (!used[j] || held[slot(ys)] == ys) continue;
                cpu::load_padded_row(src, src.row(ys), -(k.width / 2), len, scratch + slot(ys) * pitch);
                held[slot(ys)] = ys;
            }
            for (int t = 0; t < taps; ++t) off[t] = slot(y + top + row_of[t]) * pitch + col_of[t];
            cpu::offset_taps_row(dst.row<T>(y), scratch, w.data(), off.data(), taps, width * channels);
        }
    }
#endif
};

template <>
struct FilterKind<Filter2DFilter> {
    static constexpr std::string_view name = "filter2d", form = "filter2d:ROWS", params = "taps";
    static constexpr std::string_view help =
        "correlation with your kernel: rows separated by ';', taps by ',' (0,-1,0;-1,5,-1;0,-1,0); sides 1..255";
    static constexpr std::string_view opencv = "cv::filter2D(src, dst, -1, kernel, {-1,-1}, 0, border)";
    static constexpr Category category = Category::window;
    static constexpr std::string_view examples[] = {"0,-1,0;-1,5,-1;0,-1,0", "1,0;0,-1", "1,2,1;2,4,2;1,2,1",
                                                    "0.5,-0.25,0.125,1,2;0,0,1,-1,0.3;-2,0.7,0,0,1"};
    static constexpr KindDefault defaults[] = {
        // tile:128x16: blocks of 256 threads, 8 outputs each (cuda/filter2d.cuh)
        {true, 0, kAnyDepth, 0, "tile:128x16 tile:64x32 tile:32x8 column:32"},
        {false, 0, kAnyDepth, 0, "naive"},
    };

    static Filter2DFilter parse(std::string_view a);
    static std::string print(const Filter2DFilter& f);
    static Footprint footprint(const Filter2DFilter& f) { return {f.width, f.height, f.width == f.height}; }
    // Rank 1: one sepfilter2d step; otherwise none (the op below).
    static Expansion expand(const Filter2DFilter& f);
    template <class T>
    static Filter2DOp<T> op(const Filter2DFilter& f, const ImageView& src, const Border& border, const ImageView& dst) {
        return {AnyBorderSource<T>{src, saturate_round<T>(static_cast<float>(border.value)), border.mode}, dst,
                filter2d_taps(f)};
    }
};

}  // namespace cbi
