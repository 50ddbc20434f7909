#pragma once
// Chains on the CPU through line buffers: a stencil with the colour node
// before it, a stencil pair, or both (colour -> first stencil -> consumer),
// computed tile by tile without storing the colour image or the first
// stencil's output.
//
// Each TBB task walks its tiles top to bottom. The last stage is a
// TileWorker (cpu/separable.hpp) writing the output; each stage reads its
// rows from a source whose rows are lines computed on demand by the stage
// before it:
//  - ColorLines: rows of the colour node's output, each row converted by
//    the vectorised matrix (cpu::color_rows) into a ring of a few rows;
//  - StencilLines: rows of the first stencil's output, computed in order by
//    its own TileWorker into a ring of the consumer's kernel height + 1
//    rows.
// A stage's TileWorker copies each row it asks for at once (its padded row),
// so a ring only needs the rows the border rule may still map back to. A
// tile of the consumer needs the intermediate on its columns widened by the
// consumer's halo h2, clipped to the image; wherever a border rule maps a
// column or row outside the image back in, the sample it reads lies in that
// widened range (the mapped index is within the halo of the image edge the
// range touches), so each line computes just those columns. (wrap reaches
// the far side of the image: a colour node fused into one stencil converts
// whole rows then; pairs do not take it.)
//
// Every stage is the node's own arithmetic (TileWorker's passes, the colour
// matrix's rows), bit-identical to the per-pixel path, and the intermediate
// rows hold the sample type exactly as the unfused graph stores them: the
// chain's output equals running its nodes one after the other.
#include <algorithm>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "filters/cpu/color.hpp"
#include "filters/cpu/separable.hpp"
#include "filters/dispatch.hpp"

namespace cbi::cpu {

// A source whose rows come from `lines`, rows of an image of view's
// geometry (no data: a row exists only as a line); across x the border as
// AnyBorderSource's. view.stride is 0, so TileWorker's prefetch of rows
// further down touches the line it has.
template <class T, class Lines>
struct LineSource : AnyBorderSource<T> {
    Lines* lines;

    const T* row(int y) const {
        const int yy = border_index(this->mode, y, this->view.height);
        return yy < 0 ? nullptr : lines->line(yy);
    }
};

// Columns [x0, x1) of the rows of a width x ... image with `channels`
// samples per pixel, `capacity` of them held at a time: row y in slot
// y % capacity. Slots are whole rows, so a line's sample x is at x * channels.
template <class T>
class LineRing {
public:
    LineRing(int width, int channels, int capacity)
        : row_len_(static_cast<std::size_t>(width) * channels), tags_(capacity, -1), samples_(row_len_ * capacity) {}
    int capacity() const { return static_cast<int>(tags_.size()); }
    bool holds(int y) const { return tags_[y % capacity()] == y; }
    T* slot(int y) {
        tags_[y % capacity()] = y;
        return samples_.data() + static_cast<std::size_t>(y % capacity()) * row_len_;
    }
    void clear() { std::fill(tags_.begin(), tags_.end(), -1); }

private:
    std::size_t row_len_;
    std::vector<int> tags_;
    std::vector<T> samples_;
};

// Rows of a colour node's output on columns [x0, x1), converted when asked
// for (rows are independent: any order; a row still in the ring is reused).
template <class T>
class ColorLines {
public:
    ColorLines(const ImageView& input, const StorageMatrix& matrix, int channels, int capacity)
        : input_(input), matrix_(matrix), channels_(channels), ring_(input.width, channels, capacity) {}
    // Columns [x0, x1) from now on, widened within the image to whole
    // vector steps of color_rows (the samples past its last step take the
    // scalar path, several times slower per sample).
    void reset(int x0, int x1) {
        constexpr int kStep = 32;  // pixels of color_rows' widest step (8-bit)
        const int w = (x1 - x0 + kStep - 1) / kStep * kStep;
        x1_ = std::min(input_.width, x0 + w);
        x0_ = std::max(0, x1_ - w);
        ring_.clear();
    }
    const T* line(int y) {
        if (ring_.holds(y)) return ring_.slot(y);
        T* line = ring_.slot(y);
        const int w = x1_ - x0_;
        ImageView out{reinterpret_cast<std::byte*>(line + static_cast<std::ptrdiff_t>(x0_) * channels_),
                      w,
                      1,
                      channels_,
                      input_.depth,
                      static_cast<std::size_t>(w) * channels_ * sizeof(T)};
        const ImageView in = input_.crop(x0_, y, w, 1);
        color_rows(ColorOp<T>{in, out, matrix_}, 0, 1);
        return line;
    }

private:
    ImageView input_;
    StorageMatrix matrix_;
    int channels_;
    LineRing<T> ring_;
    int x0_ = 0, x1_ = 0;
};

// Rows of a stencil's output on columns [x0, x1), computed in order from
// row `first` by a TileWorker; asking for a row computes every row up to
// it. The ring keeps the last `capacity` rows: a row asked for again (a
// border rule mapping back) must be among them.
template <class Op>
class StencilLines {
public:
    using T = typename Op::Sample;
    StencilLines(const Op& op, int max_width, int capacity)
        : worker_(op, max_width), channels_(op.dst.channels), ring_(op.dst.width, op.dst.channels, capacity) {}
    void reset(int x0, int x1, int first) {
        x0_ = x0, next_ = first;
        ring_.clear();
        worker_.start(x0, x1, first);
    }
    const T* line(int y) {
        for (; next_ <= y; ++next_)
            worker_.row(next_, ring_.slot(next_) + static_cast<std::ptrdiff_t>(x0_) * channels_);
        if (!ring_.holds(y)) throw std::logic_error("StencilLines: a row asked for after it left the ring");
        return ring_.slot(y);
    }

private:
    TileWorker<Op> worker_;
    int channels_;
    LineRing<T> ring_;
    int x0_ = 0, next_ = 0;
};

// Columns [x0 - halo, x1 + halo) clipped to [0, width): what a stage needs
// of the one before it for outputs [x0, x1).
struct Columns {
    int x0, x1;
};
inline Columns widened(int x0, int x1, int halo, int width) {
    return {std::max(0, x0 - halo), std::min(width, x1 + halo)};
}

// Whether a source is a LineSource of Lines.
template <class Src, class Lines>
constexpr bool kReadsLines = false;
template <class T, class Lines>
constexpr bool kReadsLines<LineSource<T, Lines>, Lines> = true;

// A stencil op's input rows a ring must hold: its window's, and one more.
template <class Op>
int ring_rows(const Op& op) {
    return 2 * stencil_halo(op) + 2;
}

// The stages of a chain for one TBB task: the colour node's lines when the
// first stencil reads them (Pre's source is a LineSource of ColorLines),
// the first stencil's lines when there is a consumer (Op not void), and
// the last stencil's TileWorker, which stores the output. `pre` and `op`
// are the stencils as built for the node (a lone stencil passes itself as
// both); each stage's copy reads this task's lines. Not copyable: the
// stages point at each other.
template <class Pre, class Op>
class ChainStages {
public:
    using T = typename Pre::Sample;
    static constexpr bool kColour = kReadsLines<decltype(Pre::src), ColorLines<T>>;
    static constexpr bool kPair = !std::is_void_v<Op>;
    using Last = std::conditional_t<kPair, Op, Pre>;

    // input and matrix: the colour node's (kColour); tile_w: the widest tile.
    ChainStages(const Pre& pre, const Last& op, const ImageView& input, const StorageMatrix& matrix, int tile_w)
        : h1_(stencil_halo(pre)), h2_(kPair ? stencil_halo(op) : 0), pre_(pre) {
        if constexpr (kColour) {
            colour_.emplace(input, matrix, pre.src.view.channels, ring_rows(pre));
            pre_.src.lines = &*colour_;
        }
        if constexpr (kPair) {
            mid_.emplace(pre_, tile_w + 2 * h2_, ring_rows(op));
            op_.emplace(op);
            op_->src.lines = &*mid_;
            worker_.emplace(*op_, tile_w);
        } else {
            worker_.emplace(pre_, tile_w);
        }
    }
    ChainStages(const ChainStages&) = delete;
    ChainStages& operator=(const ChainStages&) = delete;

    // The output tile [x0, x1) x [y0, y1). The first stencil's lines start
    // at the first row the consumer's window reaches inside the image (a
    // border rule maps the rows above it to rows below that one).
    void run(int x0, int x1, int y0, int y1) {
        const int width = pre_.dst.width;
        const Columns mid = widened(x0, x1, h2_, width);
        if constexpr (kColour) {
            // wrap (a colour node fused into one stencil) maps columns across the whole row
            const Columns c =
                pre_.src.mode == BorderMode::wrap ? Columns{0, width} : widened(mid.x0, mid.x1, h1_, width);
            colour_->reset(c.x0, c.x1);
        }
        if constexpr (kPair) mid_->reset(mid.x0, mid.x1, std::max(0, y0 - h2_));
        worker_->run(x0, x1, y0, y1);
    }

private:
    int h1_, h2_;
    std::optional<ColorLines<T>> colour_;
    Pre pre_;
    std::optional<StencilLines<Pre>> mid_;
    std::optional<Last> op_;  // the consumer, of a pair
    std::optional<TileWorker<Last>> worker_;
};

}  // namespace cbi::cpu
