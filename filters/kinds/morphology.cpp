#include "filters/kinds/morphology.hpp"

#include <algorithm>
#include <cmath>

#include "filters/filter.hpp"

namespace cbi {
namespace {

constexpr int kMaxSize = 255;

std::string_view shape_name(MorphShape s) {
    switch (s) {
        case MorphShape::cross: return "cross";
        case MorphShape::ellipse: return "ellipse";
        case MorphShape::rect: break;
    }
    return "rect";
}

// Whether every point of the element is set (getStructuringElement's cross
// or ellipse can be: 1xN, Nx1, small sizes).
bool all_ones(const StructuringElement& se) {
    if (se.rect) return true;
    for (int j = 0; j < se.height; ++j)
        if (se.begin[j] != 0 || se.end[j] != se.width) return false;
    return true;
}

}  // namespace

StructuringElement structuring_element(MorphShape shape, int w, int h, int ax, int ay) {
    StructuringElement se;
    se.width = w, se.height = h, se.ax = ax < 0 ? w / 2 : ax, se.ay = ay < 0 ? h / 2 : ay;
    if (w == 1 && h == 1) shape = MorphShape::rect;  // as getStructuringElement
    se.rect = shape == MorphShape::rect;
    if (se.rect) return se;
    // getStructuringElement's rows, bit for bit (imgproc/src/morph.dispatch.cpp).
    const int r = h / 2, c = w / 2;
    const double inv_r2 = r ? 1. / (static_cast<double>(r) * r) : 0;
    for (int i = 0; i < h; ++i) {
        int j1 = 0, j2 = 0;
        if (shape == MorphShape::cross) {
            if (i == se.ay)
                j2 = w;
            else
                j1 = se.ax, j2 = j1 + 1;
        } else {
            const int dy = i - r;
            if (std::abs(dy) <= r) {
                // saturate_cast<int>(double) is cvRound: to nearest, ties to even.
                const int dx = static_cast<int>(std::lrint(c * std::sqrt((r * r - dy * dy) * inv_r2)));
                j1 = std::max(c - dx, 0);
                j2 = std::min(c + dx + 1, w);
            }
        }
        se.begin[i] = static_cast<std::uint8_t>(j1);
        se.end[i] = static_cast<std::uint8_t>(std::max(j1, j2));
    }
    return se;
}

template <MorphOp Op>
Morphology<Op> FilterKind<Morphology<Op>>::parse(std::string_view a) {
    const auto fields = args::split(a, ':');
    args::expect_fields(name, a, fields, 1, 3, form);
    Morphology<Op> f;
    const auto size_error = [&] {
        args::invalid(std::string(name) + " size '" + std::string(fields[0]) +
                      "' must be K or WxH, each from 1 to 255 (" + std::string(form) + ")");
    };
    const auto x = fields[0].find('x');
    if (x == std::string_view::npos) {
        if (!args::parse_int(fields[0], f.width)) size_error();
        f.height = f.width;
    } else if (!args::parse_int(fields[0].substr(0, x), f.width) ||
               !args::parse_int(fields[0].substr(x + 1), f.height)) {
        size_error();
    }
    if (f.width < 1 || f.width > kMaxSize || f.height < 1 || f.height > kMaxSize) size_error();
    if (fields.size() > 1) {
        if (fields[1] == "rect")
            f.shape = MorphShape::rect;
        else if (fields[1] == "cross")
            f.shape = MorphShape::cross;
        else if (fields[1] == "ellipse")
            f.shape = MorphShape::ellipse;
        else
            args::invalid(std::string(name) + " shape '" + std::string(fields[1]) +
                          "' must be rect, cross or ellipse (" + std::string(form) + ")");
    }
    if (fields.size() > 2 && (!args::parse_int(fields[2], f.iterations) || f.iterations < 1 || f.iterations > 255))
        args::invalid(std::string(name) + " iterations '" + std::string(fields[2]) +
                      "' must be an integer from 1 to 255 (" + std::string(form) + ")");
    return f;
}

template <MorphOp Op>
std::string FilterKind<Morphology<Op>>::print(const Morphology<Op>& f) {
    std::string s =
        f.width == f.height ? std::to_string(f.width) : std::to_string(f.width) + "x" + std::to_string(f.height);
    if (f.shape != MorphShape::rect || f.iterations != 1) s += ":" + std::string(shape_name(f.shape));
    if (f.iterations != 1) s += ":" + std::to_string(f.iterations);
    return s;
}

namespace {

// The rectangles per-pixel kernels fold in one pass: the centred kMorphOnePassSide square. The one-pass kernel
// takes 2x2, 2x3, 3x2 and a 3x3 anchored at (2, 2) too, but those forms have not yet run on a GPU
// (docs/performance.md#new-kinds): they split into the van Herk passes.
bool pixel_one_pass(int w, int h, int ax, int ay) {
    return w == kMorphOnePassSide && h == kMorphOnePassSide && ax == w / 2 && ay == h / 2;
}

// Erosion (dilation) `iterations` times reading step `input`, as passes of
// one iteration; the last step added is the result.
template <MorphOp Op>
void add_passes(std::vector<ExpansionStep>& steps, const Morphology<Op>& f, int input, bool per_pixel) {
    static_assert(Op == MorphOp::erode || Op == MorphOp::dilate);
    int from = input;
    const auto add = [&](const Morphology<Op>& pass) {
        steps.push_back({Filter{pass}, {from, from}});
        from = static_cast<int>(steps.size()) - 1;
    };
    int w = f.width, h = f.height, passes = f.iterations, ax = w / 2, ay = h / 2;
    const bool rect = all_ones(structuring_element(f.shape, w, h));
    if (rect && passes > 1) {
        // As OpenCV: k iterations of a rectangle are one rectangle of k(w-1)+1, anchor k times as far.
        w += (passes - 1) * (w - 1), h += (passes - 1) * (h - 1), ax *= passes, ay *= passes, passes = 1;
    }
    for (int p = 0; p < passes; ++p) {
        if (rect && w > 1 && h > 1 && per_pixel && !pixel_one_pass(w, h, ax, ay)) {
            // Separable: the row minimum, then the column minimum of those (the centred 3x3: one pass).
            add({w, 1, MorphShape::rect, 1, ax, 0});
            add({1, h, MorphShape::rect, 1, 0, ay});
        } else {
            add({w, h, rect ? MorphShape::rect : f.shape, 1, rect ? ax : -1, rect ? ay : -1});
        }
    }
}

}  // namespace

StructuringElement one_pass_element(MorphShape shape, int w, int h, int iterations) {
    if (!all_ones(structuring_element(shape, w, h))) return structuring_element(shape, w, h);
    // As add_passes: k iterations of a rectangle are one rectangle of k(w-1)+1, anchor k times as far.
    const int k = iterations;
    return structuring_element(MorphShape::rect, w + (k - 1) * (w - 1), h + (k - 1) * (h - 1), w / 2 * k, h / 2 * k);
}

template <MorphOp Op>
Expansion FilterKind<Morphology<Op>>::expand(const Morphology<Op>& f, bool per_pixel) {
    Expansion e;
    auto& s = e.steps;
    const auto last = [&] { return static_cast<int>(s.size()) - 1; };
    const Morphology<MorphOp::erode> erode{f.width, f.height, f.shape, f.iterations};
    const Morphology<MorphOp::dilate> dilate{f.width, f.height, f.shape, f.iterations};
    const auto difference = [&](int a, int b) { s.push_back({BlendFilter{1, -1, 0}, {a, b}}); };
    // The CPU's row kernels run a compound whose operations are one pass each as one op
    // (MorphGradientOp, MorphPairOp).
    if (Op != MorphOp::erode && Op != MorphOp::dilate && !per_pixel &&
        (f.iterations == 1 || all_ones(structuring_element(f.shape, f.width, f.height))))
        return e;
    // Per pixel, the centred 3x3 gradient folds both extremes of its window at once (MorphGradientOp).
    if (Op == MorphOp::gradient && per_pixel && f.iterations == 1 &&
        all_ones(structuring_element(f.shape, f.width, f.height)) &&
        pixel_one_pass(f.width, f.height, f.width / 2, f.height / 2))
        return e;
    switch (Op) {
        case MorphOp::erode:
        case MorphOp::dilate: {
            const StructuringElement se = structuring_element(f.shape, f.width, f.height);
            // One pass of an element that is not a rectangle of both sides > 1 (the CPU's rows: of a
            // rectangle too; per pixel: of the centred 3x3): the op itself.
            const bool one_pass = pixel_one_pass(f.width, f.height, f.width / 2, f.height / 2);
            if (f.iterations == 1 && (!all_ones(se) || f.width == 1 || f.height == 1 ||
                                      (f.shape == MorphShape::rect && (!per_pixel || one_pass))))
                return e;
            if constexpr (Op == MorphOp::erode) add_passes(s, erode, kExpansionInput, per_pixel);
            if constexpr (Op == MorphOp::dilate) add_passes(s, dilate, kExpansionInput, per_pixel);
            return e;
        }
        case MorphOp::open:
            add_passes(s, erode, kExpansionInput, per_pixel);
            add_passes(s, dilate, last(), per_pixel);
            return e;
        case MorphOp::close:
            add_passes(s, dilate, kExpansionInput, per_pixel);
            add_passes(s, erode, last(), per_pixel);
            return e;
        case MorphOp::gradient: {
            add_passes(s, dilate, kExpansionInput, per_pixel);
            const int d = last();
            add_passes(s, erode, kExpansionInput, per_pixel);
            difference(d, last());
            return e;
        }
        case MorphOp::tophat:
            add_passes(s, erode, kExpansionInput, per_pixel);
            add_passes(s, dilate, last(), per_pixel);
            difference(kExpansionInput, last());
            return e;
        case MorphOp::blackhat:
            add_passes(s, dilate, kExpansionInput, per_pixel);
            add_passes(s, erode, last(), per_pixel);
            difference(last(), kExpansionInput);
            return e;
    }
    return e;
}

#define CBI_MORPHOLOGY(OP)                                                                           \
    template Morphology<MorphOp::OP> FilterKind<Morphology<MorphOp::OP>>::parse(std::string_view);   \
    template std::string FilterKind<Morphology<MorphOp::OP>>::print(const Morphology<MorphOp::OP>&); \
    template Expansion FilterKind<Morphology<MorphOp::OP>>::expand(const Morphology<MorphOp::OP>&, bool);
CBI_MORPHOLOGY(erode)
CBI_MORPHOLOGY(dilate)
CBI_MORPHOLOGY(open)
CBI_MORPHOLOGY(close)
CBI_MORPHOLOGY(gradient)
CBI_MORPHOLOGY(tophat)
CBI_MORPHOLOGY(blackhat)
#undef CBI_MORPHOLOGY

}  // namespace cbi
