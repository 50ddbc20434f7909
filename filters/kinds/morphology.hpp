#pragma once
// erode, dilate, open, close, gradient, tophat, blackhat:
// NAME:SIZE[:SHAPE[:ITERATIONS]] = cv::morphologyEx(src, dst, op,
// cv::getStructuringElement(shape, {W, H}), {-1, -1}, iterations, border).
// SIZE K or WxH (1..255), SHAPE rect (default), cross or ellipse, exactly as
// getStructuringElement; ITERATIONS >= 1. Without --border, OpenCV's
// morphologyDefaultBorderValue: a constant that never wins (the depth's
// maximum for erosion, its lowest for dilation).
//
// Erosion and dilation with one iteration are the window op below (the
// structuring element as a run of columns per row). On the CPU's row
// kernels (schedule naive) a rectangle is one pass (its row hook does both
// passes with the row pass's rows in cache; several iterations of a
// rectangle one larger rectangle, as OpenCV does), and a compound whose
// operations are one pass each is one op (MorphGradientOp, MorphPairOp).
// Elsewhere (FilterKind::expand) -- CUDA and the CPU's index-map
// schedules, whose kernels compute each pixel on its own -- a rectangle is
// a row pass and a column pass (the centred kMorphOnePassSide square: one
// pass), other shapes one pass per iteration, open/close both operations
// in turn, gradient/tophat/blackhat a difference of two images (blend:1:-1);
// the centred 3x3 gradient one op (MorphGradientOp).
#include <algorithm>
#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "filters/cpu/rank.hpp"
#include "filters/kinds/args.hpp"
#include "filters/kinds/kind.hpp"
#include "filters/ops.hpp"

namespace cbi {

enum class MorphOp : std::uint8_t { erode, dilate, open, close, gradient, tophat, blackhat };
enum class MorphShape : std::uint8_t { rect, cross, ellipse };

template <MorphOp Op>
struct Morphology {
    int width = 3, height = 3;
    MorphShape shape = MorphShape::rect;
    int iterations = 1;
    // The anchor; -1: the centre (W/2, H/2). Not in the pipeline form: set
    // where expand folds iterations of a rectangle into one.
    int ax = -1, ay = -1;
    friend bool operator==(const Morphology&, const Morphology&) = default;
};
using ErodeFilter = Morphology<MorphOp::erode>;
using DilateFilter = Morphology<MorphOp::dilate>;
using OpenFilter = Morphology<MorphOp::open>;
using CloseFilter = Morphology<MorphOp::close>;
using GradientFilter = Morphology<MorphOp::gradient>;
using TophatFilter = Morphology<MorphOp::tophat>;
using BlackhatFilter = Morphology<MorphOp::blackhat>;

// The largest sides of a rectangle the GPU's one-pass kernel folds
// (cuda/morph.cuh): up to this its taps cost less than a second pass over an
// intermediate image. The expansion sends it the centred square only
// (morphology.cpp, pixel_one_pass).
inline constexpr int kMorphOnePassSide = 3;

// OpenCV's morphologyDefaultBorderValue() (DBL_MAX): as a constant border's
// value, a morphology pass reads the value that never wins.
inline constexpr double kMorphologyDefaultBorder = DBL_MAX;

// A structuring element as one run of columns [begin, end) per row (every
// shape getStructuringElement makes is one), its anchor at (ax, ay). A
// rectangle stores no rows: any width and height (folded iterations).
struct StructuringElement {
    static constexpr int kMaxRows = 255;
    int width = 1, height = 1, ax = 0, ay = 0;
    bool rect = true;
    std::uint8_t begin[kMaxRows]{}, end[kMaxRows]{};
};

// getStructuringElement(shape, {w, h}) (anchor at the centre, w and h at
// most 255 unless a rectangle), its anchor at (ax, ay) where not -1.
StructuringElement structuring_element(MorphShape shape, int w, int h, int ax = -1, int ay = -1);

// Erosion (kMin) or dilation of one pass: the minimum or maximum of the
// samples under the element, per channel.
template <class T, bool kMin>
struct MorphPassOp {
    using Sample = T;
    AnyBorderSource<T> src;
    ImageView dst;
    StructuringElement se;
    // rows() writes image row y to dst row y - out_y0 (a band of rows: the
    // gradient's erosion, MorphGradientOp).
    int out_y0 = 0;

    CBI_HOST_DEVICE void operator()(int x, int y) const {
        // The channel count as a constant keeps the minima in registers.
        if (dst.channels == 1)
            pixel<1>(x, y);
        else if (dst.channels == 3)
            pixel<3>(x, y);
        else
            pixel<4>(x, y);
    }
    template <int C>
    CBI_HOST_DEVICE void pixel(int x, int y) const {
        T acc[C];
        window<C>(x, y, acc);
        T* out = dst.row<T>(y) + x * C;
        for (int c = 0; c < C; ++c) out[c] = acc[c];
    }
    // The minimum (maximum) of each channel under the element at (x, y).
    template <int C>
    CBI_HOST_DEVICE void window(int x, int y, T* acc) const {
        for (int c = 0; c < C; ++c) acc[c] = neutral();
        for (int j = 0; j < se.height; ++j) {
            const T* row = src.row(y + j - se.ay);
            const int i0 = se.rect ? 0 : se.begin[j], i1 = se.rect ? se.width : se.end[j];
            for (int i = i0; i < i1; ++i)
                for (int c = 0; c < C; ++c) acc[c] = fold(acc[c], src.at(row, x + i - se.ax, c));
        }
    }
    // The CPU's naive schedule: rows [y0, y1) at once, whole rows through
    // the vector kernels of cpu/rank.hpp: a rectangle's row pass by runs
    // doubling in place, its column pass by van Herk / Gil-Werman (narrow
    // ones folding their rows directly), other shapes from each source
    // row's runs of 1, 2, 4, ... pixels (a run of w is two overlapping runs
    // of the largest power of two <= w). Min and max are exact and
    // idempotent, so any grouping gives the same result (floats: except
    // which of -0 and +0 an equal pair keeps). `scratch` holds width +
    // element width pixels.
    void rows(int y0, int y1, T* scratch) const {
        const int n = dst.width * dst.channels, h = se.height;
        if (!se.rect) return runs(y0, y1, scratch);
        if (h == 1) {
            for (int y = y0; y < y1; ++y) row_pass(src.row(y), out_row(y), scratch);
            return;
        }
        // Rectangles of height > 1: the row pass of each source row once
        // (the source row itself for width 1; outside rows of a constant
        // border: one row of it), then the columns of those.
        if (se.width == 1)
            for (int s = 0; s < n; ++s) scratch[s] = src.constant;
        // Source row yy, its row pass in `buf` at row i.
        const auto source = [&](int yy, T* buf, int i) -> const T* {
            const T* row = src.row(yy);
            if (se.width == 1) return row != nullptr ? row : scratch;
            T* into = buf + static_cast<std::size_t>(i) * n;
            if (row == nullptr)
                std::fill(into, into + n, src.constant);  // a constant border's row: its own row pass
            else
                row_pass(row, into, scratch);
            return into;
        };
        if (h <= kDirect) {
            // A ring of h + 1 rows; two output rows at a time fold them
            // directly, sharing the h - 1 rows both windows hold.
            const int slots = h + 1;
            std::vector<T> ring(se.width == 1 ? 0 : static_cast<std::size_t>(slots) * n);
            const T* at[kDirect + 1];
            const T* taps[kDirect + 1];
            const auto fill = [&](int rel) { at[rel % slots] = source(y0 - se.ay + rel, ring.data(), rel % slots); };
            for (int rel = 0; rel < h - 1; ++rel) fill(rel);
            for (int y = y0; y < y1; y += 2) {
                const bool pair = y + 1 < y1;
                fill(y - y0 + h - 1);
                if (pair) fill(y - y0 + h);
                for (int j = 0; j < h + pair; ++j) taps[j] = at[(y - y0 + j) % slots];
                if (pair)
                    cpu::fold_rows_pair<T, kMin>(out_row(y), out_row(y + 1), taps, h, n);
                else
                    cpu::fold_rows<T, kMin>(out_row(y), taps, h, n);
            }
            return;
        }
        // Van Herk / Gil-Werman a row at a time (cpu/rank.hpp): window rows
        // i = 0 .. count + h - 2 (source row y0 - ay + i) in blocks of h, each
        // block's suffixes folded with the next block's prefixes as its rows
        // come; every row pass made once, two blocks of rows held.
        const int count = y1 - y0;
        const std::size_t block = static_cast<std::size_t>(h) * n;
        // The rows live in a buffer each thread keeps (up to kKeptBytes):
        // allocated per task, their pages were faulted in again every run.
        static thread_local std::vector<T> kept;
        std::vector<T> own;
        const std::size_t need = 2 * block + n;
        std::vector<T>& rows_buf = need * sizeof(T) <= kKeptBytes ? kept : own;
        if (rows_buf.size() < need) rows_buf.resize(need);
        T* const next_rows = rows_buf.data();  // the next block's row passes
        T* const prefix = next_rows + block;
        std::vector<const T*> next(h);  // block rows: window row i at i % h
        std::vector<T*> suffix(h);
        for (int j = 1; j < h; ++j) suffix[j] = prefix + n + static_cast<std::size_t>(j) * n;
        int loaded = 0;
        const auto load_to = [&](int end) {
            for (; loaded < end; ++loaded) next[loaded % h] = source(y0 - se.ay + loaded, next_rows, loaded % h);
        };
        load_to(h);
        for (int b = 0; b < count; b += h) {
            suffix[0] = out_row(y0 + b);  // the block's first window is its whole suffix
            cpu::fold_suffixes<T, kMin>(suffix.data(), next.data(), h, n);
            const T* p = nullptr;
            for (int j = 1; j < h && b + j < count; ++j) {
                load_to(b + h + j);
                const T* row = next[j - 1];
                T* out = out_row(y0 + b + j);
                if (j == 1) {
                    const T* two[] = {suffix[1], row};
                    cpu::fold_rows<T, kMin>(out, two, 2, n);
                    p = row;
                } else {
                    cpu::fold_window_row<T, kMin>(out, prefix, p, row, suffix[j], n);
                    p = prefix;
                }
            }
            if (b + h < count) load_to(b + 2 * h);  // the next block's outputs fold all its rows
        }
    }
    // Widths and heights up to this fold their samples directly (beyond: by
    // doubling runs or van Herk, a few passes whatever the size).
    static constexpr int kDirect = 8;
    // The most row memory rows() keeps per thread between calls.
    static constexpr std::size_t kKeptBytes = std::size_t(16) << 20;
    // The row pass of a rectangle: `row` (null: outside the image) bordered
    // into scratch, its runs of the element's width into out.
    void row_pass(const T* row, T* out, T* scratch) const {
        const int cn = dst.channels, w = se.width;
        // Narrow elements read the image's own samples where the run is
        // inside the image: outputs ax .. width - w + ax; the ends bordered.
        const int lo = se.ax, hi = dst.width - w + 1 + se.ax;
        if (w > kDirect || row == nullptr || lo >= hi) return row_run(row, 0, dst.width, out, scratch);
        const T* taps[kDirect];
        for (int i = 0; i < w; ++i) taps[i] = row + i * cn;
        cpu::fold_rows<T, kMin>(out + lo * cn, taps, w, (hi - lo) * cn);
        if (lo > 0) row_run(row, 0, lo, out, scratch);
        if (hi < dst.width) row_run(row, hi, dst.width, out, scratch);
    }
    // Outputs x0 .. x1 - 1 of the row pass through a bordered copy of their samples.
    void row_run(const T* row, int x0, int x1, T* out, T* scratch) const {
        const int cn = dst.channels, w = se.width, n = (x1 - x0) * cn;
        bordered(row, x0 - se.ax, x1 - x0 + w - 1, scratch);
        if (w > kDirect) return cpu::fold_run_doubling<T, kMin>(out + x0 * cn, scratch, cn, w, n);
        const T* taps[kDirect];
        for (int i = 0; i < w; ++i) taps[i] = scratch + i * cn;
        cpu::fold_rows<T, kMin>(out + x0 * cn, taps, w, n);
    }
    // Rows for rows() at least (cpu/window.cpp): a task rereads height - 1
    // rows beyond its own, so tall elements take several times that.
    int row_grain() const {
        const int g = se.height > kDirect ? 4 * se.height : 32;
        return std::max(8, std::min(g, dst.height / 4));
    }
    // The larger side of the scratch rows() needs, in samples.
    std::size_t scratch_samples() const { return static_cast<std::size_t>(dst.width + se.width) * dst.channels; }

    // `count` pixels of `row` from pixel `off` into e, the border resolved
    // at the ends only (row null: outside the image).
    void bordered(const T* row, int off, int count, T* e) const {
        const int channels = dst.channels;
        const int lo = row == nullptr ? count : (off < 0 ? -off : 0);
        const int hi = row == nullptr ? count : (dst.width - off < count ? dst.width - off : count);
        if (lo < hi) std::memcpy(e + lo * channels, row + (lo + off) * channels, sizeof(T) * (hi - lo) * channels);
        if (src.mode == BorderMode::constant) {  // the ends without a call per sample
            std::fill(e, e + lo * channels, src.constant);
            std::fill(e + std::max(lo, hi) * channels, e + count * channels, src.constant);
            return;
        }
        for (int x = 0; x < count; ++x) {
            if (x == lo && lo < hi) {
                x = hi - 1;  // copied
                continue;
            }
            for (int c = 0; c < channels; ++c) e[x * channels + c] = src.at(row, x + off, c);
        }
    }

    // Any element as runs: a ring of the element's height of source rows,
    // each bordered once with its runs of 2^l pixels (levels), then every
    // output row one pass folding two runs per element row.
    void runs(int y0, int y1, T* scratch) const {
        const int cn = dst.channels, n = dst.width * cn, h = se.height, count = dst.width + se.width - 1;
        int widest = 1, levels = 1;
        for (int j = 0; j < h; ++j) widest = std::max(widest, se.rect ? se.width : se.end[j] - se.begin[j]);
        while ((2 << (levels - 1)) <= widest) ++levels;
        const std::size_t pitch = static_cast<std::size_t>(count) * cn;
        std::vector<const T*> taps(se.width + 1);
        if (pitch * levels * h > (std::size_t{1} << 22)) {
            // A ring too large for the caches: each element row's samples folded into the output one by one.
            for (int y = y0; y < y1; ++y) {
                T* out = out_row(y);
                for (int s = 0; s < n; ++s) out[s] = neutral();
                for (int j = 0; j < h; ++j) {
                    const int i0 = se.rect ? 0 : se.begin[j], i1 = se.rect ? se.width : se.end[j];
                    if (i0 >= i1) continue;
                    bordered(src.row(y + j - se.ay), i0 - se.ax, dst.width + i1 - i0 - 1, scratch);
                    taps[0] = out;
                    for (int i = 0; i < i1 - i0; ++i) taps[i + 1] = scratch + i * cn;
                    cpu::fold_rows<T, kMin>(out, taps.data(), i1 - i0 + 1, n);
                }
            }
            return;
        }
        std::vector<T> ring(pitch * levels * h);
        const auto level = [&](int rel, int l) {
            return ring.data() + (static_cast<std::size_t>(rel % h) * levels + l) * pitch;
        };
        const auto fill = [&](int rel) {
            bordered(src.row(y0 - se.ay + rel), -se.ax, count, level(rel, 0));
            for (int l = 1, p = 1; l < levels; ++l, p *= 2) {
                const T* a = level(rel, l - 1);
                const T* taps[2] = {a, a + p * cn};
                cpu::fold_rows<T, kMin>(level(rel, l), taps, 2, (count - 2 * p + 1) * cn);
            }
        };
        for (int rel = 0; rel < h - 1; ++rel) fill(rel);
        taps.resize(2 * h);
        for (int y = y0; y < y1; ++y) {
            fill(y - y0 + h - 1);
            int t = 0;
            for (int j = 0; j < h; ++j) {
                const int i0 = se.rect ? 0 : se.begin[j], i1 = se.rect ? se.width : se.end[j];
                if (i0 >= i1) continue;
                int l = 0;
                while ((2 << l) <= i1 - i0) ++l;
                const T* a = level(y - y0 + j, l);
                taps[t++] = a + i0 * cn;
                if (i1 - (1 << l) != i0) taps[t++] = a + (i1 - (1 << l)) * cn;
            }
            T* out = out_row(y);
            if (t == 0)
                for (int s = 0; s < n; ++s) out[s] = neutral();
            else
                cpu::fold_rows<T, kMin>(out, taps.data(), t, n);
        }
    }

    T* out_row(int y) const { return dst.row<T>(y - out_y0); }
    // `rows` rows of dst's width and format packed at `data` (the CPU compounds' bands).
    ImageView packed(T* data, int rows) const {
        return {reinterpret_cast<std::byte*>(data), dst.width, rows, dst.channels, dst.depth, dst.row_bytes()};
    }

    static CBI_HOST_DEVICE T fold(T acc, T v) { return kMin ? (v < acc ? v : acc) : (acc < v ? v : acc); }

    // The value that never wins: what the window's min or max starts from.
    static CBI_HOST_DEVICE T neutral() {
        if constexpr (std::is_same_v<T, float>)
            return kMin ? FLT_MAX : -FLT_MAX;
        else
            return kMin ? std::numeric_limits<T>::max() : T{0};
    }
};

// cv::morphologyEx's subtract: saturated for integers, exact for floats.
template <class T>
CBI_HOST_DEVICE T morph_difference(T a, T b) {
    if constexpr (std::is_floating_point_v<T>)
        return a - b;
    else
        return a > b ? static_cast<T>(a - b) : T{0};
}

// A gradient whose dilation and erosion are one pass each (one iteration,
// or a rectangle's iterations folded into one), on the CPU: each task's rows
// dilated into dst and eroded into a band the thread keeps, then dst minus
// the band while both are in cache -- one pass over memory instead of three.
// Wherever kernels compute pixels one by one (CUDA, the CPU's index-map
// schedules), FilterKind::expand keeps the three nodes except for the
// centred 3x3, which runs per pixel (CUDA: both folds in its one-pass
// kernel). The difference is never negative: both read the same samples.
template <class T>
struct MorphGradientOp {
    using Sample = T;
    MorphPassOp<T, false> dilate;  // writes dst
    MorphPassOp<T, true> erode;    // the same image and element, its own border constant

    // Per pixel (the expansion leaves the centred 3x3 to kernels that compute
    // pixels one by one: CUDA's one-pass kernel, the CPU's index-map schedules).
    CBI_HOST_DEVICE void operator()(int x, int y) const {
        if (dilate.dst.channels == 1)
            pixel<1>(x, y);
        else if (dilate.dst.channels == 3)
            pixel<3>(x, y);
        else
            pixel<4>(x, y);
    }
    template <int C>
    CBI_HOST_DEVICE void pixel(int x, int y) const {
        T hi[C], lo[C];
        dilate.template window<C>(x, y, hi);
        erode.template window<C>(x, y, lo);
        T* out = dilate.dst.template row<T>(y) + x * C;
        for (int c = 0; c < C; ++c) out[c] = morph_difference(hi[c], lo[c]);
    }

    void rows(int y0, int y1, T* scratch) const {
        dilate.rows(y0, y1, scratch);
        const ImageView& dst = dilate.dst;
        const std::size_t n = static_cast<std::size_t>(dst.width) * dst.channels;
        static thread_local std::vector<T> band;
        band.resize(n * (y1 - y0));
        MorphPassOp<T, true> into_band = erode;
        into_band.dst = dilate.packed(band.data(), y1 - y0);
        into_band.out_y0 = y0;
        into_band.rows(y0, y1, scratch);
        for (int y = y0; y < y1; ++y) {
            T* out = dst.template row<T>(y);
            const T* lo = band.data() + n * (y - y0);
            for (std::size_t s = 0; s < n; ++s) out[s] = morph_difference(out[s], lo[s]);
        }
    }
    int row_grain() const { return dilate.row_grain(); }
    std::size_t scratch_samples() const { return dilate.scratch_samples(); }
};

// open, close, tophat and blackhat whose two operations are one pass each,
// on the CPU's row kernels: each task runs the first operation on the rows
// the second reads for its rows (its own and the element's height - 1 more)
// into a band the thread keeps, the rows outside the image bordered as the
// second pass would border a stored image, then the second from that band
// into dst, then (tophat, blackhat) the difference with the source while
// both are in cache: one pass over memory instead of two or three. No
// per-pixel form: FilterKind::expand keeps the passes as nodes wherever
// kernels compute pixels one by one (CUDA, the CPU's index-map schedules).
template <class T, bool kErodeFirst>
struct MorphPairOp {
    using Sample = T;
    MorphPassOp<T, kErodeFirst> first;    // reads the source; its dst gives the geometry only
    MorphPassOp<T, !kErodeFirst> second;  // writes dst; the same element, border and geometry
    int subtract = 0;                     // tophat: src - result (1); blackhat: result - src (-1)
    static constexpr bool kCpuOnly = true;

    void rows(int y0, int y1, T* scratch) const {
        const StructuringElement& se = second.se;
        const ImageView& dst = second.dst;
        const std::size_t n = static_cast<std::size_t>(dst.width) * dst.channels;
        // The second pass reads the first's rows a .. b - 1; lo .. hi - 1 of them are in the image.
        const int a = y0 - se.ay, b = y1 + se.height - 1 - se.ay;
        const int lo = std::max(a, 0), hi = std::min(b, dst.height);
        static thread_local std::vector<T> kept;
        std::vector<T> own;
        std::vector<T>& band = n * (b - a) * sizeof(T) <= MorphPassOp<T, true>::kKeptBytes ? kept : own;
        if (band.size() < n * (b - a)) band.resize(n * (b - a));
        const auto run_first = [&](T* into, int r0, int r1) {  // image rows r0 .. r1 - 1 of the first pass
            MorphPassOp<T, kErodeFirst> p = first;
            p.dst = second.packed(into, r1 - r0);
            p.out_y0 = r0;
            p.rows(r0, r1, scratch);
        };
        T* const at_a = band.data();
        if (lo < hi) run_first(at_a + n * (lo - a), lo, hi);
        // Rows outside the image: the rows the border names, computed once more where this task has
        // not (wrap, or an element taller than the task's rows), or the border's constant.
        const auto named = [&](int v) { return border_index(second.src.mode, v, dst.height); };
        const auto outside = [&](auto&& f) {
            for (int v = a; v < lo; ++v) f(v);
            for (int v = hi; v < b; ++v) f(v);
        };
        int extra_lo = dst.height, extra_hi = 0;
        outside([&](int v) {
            if (const int m = named(v); m >= 0 && (m < lo || m >= hi))
                extra_lo = std::min(extra_lo, m), extra_hi = std::max(extra_hi, m + 1);
        });
        std::vector<T> extra(extra_lo < extra_hi ? n * (extra_hi - extra_lo) : 0);
        if (extra_lo < extra_hi) run_first(extra.data(), extra_lo, extra_hi);
        outside([&](int v) {
            T* row = at_a + n * (v - a);
            const int m = named(v);
            if (m < 0)
                std::fill(row, row + n, second.src.constant);
            else
                std::memcpy(row, m >= lo && m < hi ? at_a + n * (m - a) : extra.data() + n * (m - extra_lo),
                            n * sizeof(T));
        });
        MorphPassOp<T, !kErodeFirst> from_band = second;
        from_band.src.view = second.packed(at_a, b - a);
        from_band.out_y0 = se.ay - y0;
        from_band.rows(se.ay, se.ay + (y1 - y0), scratch);
        if (subtract == 0) return;
        for (int y = y0; y < y1; ++y) {
            T* out = dst.row<T>(y);
            const T* in = first.src.view.template row<const T>(y);
            if (subtract > 0)  // two loops: each vectorises
                for (std::size_t s = 0; s < n; ++s) out[s] = morph_difference(in[s], out[s]);
            else
                for (std::size_t s = 0; s < n; ++s) out[s] = morph_difference(out[s], in[s]);
        }
    }
    int row_grain() const { return first.row_grain(); }
    // The first pass's rows each task computes beyond its own: the CPU's tasks grow to amortise them.
    int halo_rows() const { return second.se.height - 1; }
    std::size_t scratch_samples() const { return first.scratch_samples(); }
};

// The element of the CPU's one-op compounds (MorphGradientOp, MorphPairOp):
// a rectangle's iterations folded into one rectangle as OpenCV folds them;
// other shapes as they are (one iteration: expand leaves the op only those).
StructuringElement one_pass_element(MorphShape shape, int w, int h, int iterations);

struct ExpansionStep;

// Per-op text, indexed by MorphOp (namespace scope: clang cannot index a class
// template's static array of deduced bound in a constant expression).
inline constexpr std::string_view kMorphologyNames[] = {"erode",    "dilate", "open",    "close",
                                                        "gradient", "tophat", "blackhat"};
inline constexpr std::string_view kMorphologyForms[] = {
    "erode:SIZE[:SHAPE[:ITERATIONS]]",   "dilate:SIZE[:SHAPE[:ITERATIONS]]",   "open:SIZE[:SHAPE[:ITERATIONS]]",
    "close:SIZE[:SHAPE[:ITERATIONS]]",   "gradient:SIZE[:SHAPE[:ITERATIONS]]", "tophat:SIZE[:SHAPE[:ITERATIONS]]",
    "blackhat:SIZE[:SHAPE[:ITERATIONS]]"};
inline constexpr std::string_view kMorphologyHelps[] = {
    "minimum under a structuring element; SIZE K or WxH (1..255), SHAPE rect|cross|ellipse",
    "maximum under a structuring element; SIZE K or WxH (1..255), SHAPE rect|cross|ellipse",
    "opening: erode then dilate (each ITERATIONS times)",
    "closing: dilate then erode (each ITERATIONS times)",
    "morphological gradient: dilate - erode",
    "top hat: src - open",
    "black hat: close - src"};
inline constexpr std::string_view kMorphologyOpenCV[] = {
    "cv::erode(src, dst, getStructuringElement(SHAPE, {W,H}), {-1,-1}, ITERATIONS, border)",
    "cv::dilate(src, dst, getStructuringElement(SHAPE, {W,H}), {-1,-1}, ITERATIONS, border)",
    "cv::morphologyEx(src, dst, MORPH_OPEN, getStructuringElement(SHAPE, {W,H}), {-1,-1}, ITERATIONS, border)",
    "cv::morphologyEx(src, dst, MORPH_CLOSE, getStructuringElement(SHAPE, {W,H}), {-1,-1}, ITERATIONS, border)",
    "cv::morphologyEx(src, dst, MORPH_GRADIENT, getStructuringElement(SHAPE, {W,H}), {-1,-1}, ITERATIONS, border)",
    "cv::morphologyEx(src, dst, MORPH_TOPHAT, getStructuringElement(SHAPE, {W,H}), {-1,-1}, ITERATIONS, border)",
    "cv::morphologyEx(src, dst, MORPH_BLACKHAT, getStructuringElement(SHAPE, {W,H}), {-1,-1}, ITERATIONS, border)"};

template <MorphOp Op>
struct FilterKind<Morphology<Op>> {
    static constexpr auto index = static_cast<std::size_t>(Op);
    static constexpr std::string_view name = kMorphologyNames[index], form = kMorphologyForms[index];
    static constexpr std::string_view params = "size shape iterations";
    static constexpr std::string_view help = kMorphologyHelps[index], opencv = kMorphologyOpenCV[index];
    static constexpr Category category = Category::window;
    static constexpr std::string_view examples[] = {"3", "5x3:cross", "7:ellipse", "4x6:ellipse:2", "3:rect:3"};
    static constexpr KindDefault defaults[] = {
        // naive: a rectangle's passes on their van Herk kernels, 3x3 in one pass, other elements on
        // the run kernel (cuda/morph.cuh)
        {true, 0, kAnyDepth, 0, "naive tile:32x8 tile:16x16"},
        {false, 0, kAnyDepth, 0, "naive"},
    };

    static Morphology<Op> parse(std::string_view a);
    static std::string print(const Morphology<Op>& f);
    static Footprint footprint(const Morphology<Op>& f) {
        // Iterations widen the window each pass reads from the source.
        const int w = f.width + (f.iterations - 1) * (f.width - 1), h = f.height + (f.iterations - 1) * (f.height - 1);
        const int passes = Op == MorphOp::erode || Op == MorphOp::dilate || Op == MorphOp::gradient ? 1 : 2;
        return {passes * (w - 1) + 1, passes * (h - 1) + 1, w == h};
    }
    static Border default_border(const Morphology<Op>&) { return {BorderMode::constant, kMorphologyDefaultBorder}; }
    static Expansion expand(const Morphology<Op>& f, bool per_pixel = true);

    // Erosion and dilation of one pass, and the CPU's one-op compounds
    // (expand leaves only those).
    template <class T>
    static auto op(const Morphology<Op>& f, const ImageView& src, const Border& border, const ImageView& dst) {
        if constexpr (Op == MorphOp::gradient) {
            const StructuringElement se = one_pass_element(f.shape, f.width, f.height, f.iterations);
            return MorphGradientOp<T>{pass<T, false>(se, src, border, dst), pass<T, true>(se, src, border, dst)};
        } else if constexpr (Op != MorphOp::erode && Op != MorphOp::dilate) {
            constexpr bool kErodeFirst = Op == MorphOp::open || Op == MorphOp::tophat;
            const StructuringElement se = one_pass_element(f.shape, f.width, f.height, f.iterations);
            const int subtract = Op == MorphOp::tophat ? 1 : Op == MorphOp::blackhat ? -1 : 0;
            return MorphPairOp<T, kErodeFirst>{pass<T, kErodeFirst>(se, src, border, dst),
                                               pass<T, !kErodeFirst>(se, src, border, dst), subtract};
        } else {
            return pass<T, Op != MorphOp::dilate>(structuring_element(f.shape, f.width, f.height, f.ax, f.ay), src,
                                                  border, dst);
        }
    }
    template <class T, bool kMin>
    static MorphPassOp<T, kMin> pass(const StructuringElement& se, const ImageView& src, const Border& border,
                                     const ImageView& dst) {
        using P = MorphPassOp<T, kMin>;
        const T constant = border.mode == BorderMode::constant && border.value == kMorphologyDefaultBorder
                               ? P::neutral()
                               : saturate_round<T>(static_cast<float>(border.value));
        return P{{src, constant, border.mode}, dst, se};
    }
};

}  // namespace cbi
