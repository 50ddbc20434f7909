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
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "filters/cpu/color.hpp"
#include "filters/cpu/separable.hpp"
#include "filters/dispatch.hpp"

namespace cbi::cpu {

// Rows of an image computed on demand by the stage before (a chain's
// lines). Stages meet through this interface, one virtual call per row, so
// a pair's kernels are instantiated per kind, not per pair of kinds.
template <class T>
class Lines {
public:
    virtual const T* line(int y) = 0;

protected:
    ~Lines() = default;
};

// A source whose rows come from `lines`, rows of an image of view's
// geometry (no data: a row exists only as a line); across x the border as
// AnyBorderSource's. view.stride is 0, so TileWorker's prefetch of rows
// further down touches the line it has.
template <class T>
struct LineSource : AnyBorderSource<T> {
    Lines<T>* lines;

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
class ColorLines final : public Lines<T> {
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
    const T* line(int y) override {
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

// The first stencil of a pair as lines for the second: its output rows on
// columns [x0, x1), computed in order from row `first`; asking for a row
// computes every row up to it. The ring keeps the last `capacity` rows: a
// row asked for again (a border rule mapping back) must be among them.
template <class T>
class StencilStage : public Lines<T> {
public:
    virtual ~StencilStage() = default;
    virtual void reset(int x0, int x1, int first) = 0;
};

// The last stage of a chain: the tiles of its output, stored.
template <class T>
class TileStage {
public:
    virtual ~TileStage() = default;
    virtual void run(int x0, int x1, int y0, int y1) = 0;
};

// Points op's source at `from` when the op reads lines.
template <class Op>
void read_lines(Op& op, Lines<typename Op::Sample>* from) {
    if constexpr (requires { op.src.lines; }) op.src.lines = from;
}

// A stencil op's own copy (its TileWorker refers to it) reading `from`.
template <class Op>
class StencilLines final : public StencilStage<typename Op::Sample> {
public:
    using T = typename Op::Sample;
    StencilLines(const Op& op, Lines<T>* from, int max_width, int capacity)
        : op_(op), worker_(op_, max_width), channels_(op.dst.channels), ring_(op.dst.width, op.dst.channels, capacity) {
        read_lines(op_, from);
    }
    void reset(int x0, int x1, int first) override {
        x0_ = x0, next_ = first;
        ring_.clear();
        worker_.start(x0, x1, first);
    }
    const T* line(int y) override {
        for (; next_ <= y; ++next_)
            worker_.row(next_, ring_.slot(next_) + static_cast<std::ptrdiff_t>(x0_) * channels_);
        if (!ring_.holds(y)) throw std::logic_error("StencilLines: a row asked for after it left the ring");
        return ring_.slot(y);
    }

private:
    Op op_;
    TileWorker<Op> worker_;
    int channels_;
    LineRing<T> ring_;
    int x0_ = 0, next_ = 0;
};

template <class Op>
class TileStageOf final : public TileStage<typename Op::Sample> {
public:
    TileStageOf(const Op& op, Lines<typename Op::Sample>* from, int tile_w) : op_(op), worker_(op_, tile_w) {
        read_lines(op_, from);
    }
    void run(int x0, int x1, int y0, int y1) override { worker_.run(x0, x1, y0, y1); }

private:
    Op op_;
    TileWorker<Op> worker_;
};

// Columns [x0 - halo, x1 + halo) clipped to [0, width): what a stage needs
// of the one before it for outputs [x0, x1).
struct Columns {
    int x0, x1;
};
inline Columns widened(int x0, int x1, int halo, int width) {
    return {std::max(0, x0 - halo), std::min(width, x1 + halo)};
}

// A stencil op's input rows a ring must hold: its window's, and one more.
template <class Op>
int ring_rows(const Op& op) {
    return 2 * stencil_halo(op) + 2;
}

// How a node's chain is built, once per node: the stencils as built for
// it, each behind a factory of its stage (a lone stencil is the last stage),
// and the geometry the stages agree on.
template <class T>
struct ChainPlan {
    int width = 0;        // of every stage's output
    int h1 = 0, h2 = 0;   // halos of the first stencil and of the consumer (0 without one)
    bool colour = false;  // the first stencil reads the colour node's lines
    bool wrap = false;    // the first stencil's border (wrap: colour converts whole rows)
    int colour_channels = 0, colour_rows = 0, mid_rows = 0;  // ring geometry
    std::function<std::unique_ptr<StencilStage<T>>(Lines<T>* from, int max_width, int capacity)> first;  // pairs
    std::function<std::unique_ptr<TileStage<T>>(Lines<T>* from, int tile_w)> last;
};

// The stages of a chain for one TBB task: the colour node's lines when the
// first stencil reads them, the first stencil's lines when there is a
// consumer, and the last stencil's TileWorker, which stores the output.
// Not copyable: the stages point at each other.
template <class T>
class ChainStages {
public:
    // input and matrix: the colour node's; tile_w: the widest tile.
    ChainStages(const ChainPlan<T>& plan, const ImageView& input, const StorageMatrix& matrix, int tile_w)
        : plan_(plan) {
        Lines<T>* from = nullptr;
        if (plan.colour) from = &colour_.emplace(input, matrix, plan.colour_channels, plan.colour_rows);
        if (plan.first) {
            mid_ = plan.first(from, tile_w + 2 * plan.h2, plan.mid_rows);
            from = mid_.get();
        }
        last_ = plan.last(from, tile_w);
    }
    ChainStages(const ChainStages&) = delete;
    ChainStages& operator=(const ChainStages&) = delete;

    // The output tile [x0, x1) x [y0, y1). The first stencil's lines start
    // at the first row the consumer's window reaches inside the image (a
    // border rule maps the rows above it to rows below that one).
    void run(int x0, int x1, int y0, int y1) {
        const int width = plan_.width;
        const Columns mid = widened(x0, x1, plan_.h2, width);
        if (colour_) {
            // wrap (a colour node fused into one stencil) maps columns across the whole row
            const Columns c = plan_.wrap ? Columns{0, width} : widened(mid.x0, mid.x1, plan_.h1, width);
            colour_->reset(c.x0, c.x1);
        }
        if (mid_) mid_->reset(mid.x0, mid.x1, std::max(0, y0 - plan_.h2));
        last_->run(x0, x1, y0, y1);
    }

private:
    const ChainPlan<T>& plan_;
    std::optional<ColorLines<T>> colour_;
    std::unique_ptr<StencilStage<T>> mid_;
    std::unique_ptr<TileStage<T>> last_;
};

}  // namespace cbi::cpu
