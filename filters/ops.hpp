#pragma once
// The arithmetic of each filter for one output pixel, written once and run
// by both backends: the CPU backend calls op(x, y) for every index of the
// node's schedule, the CUDA kernel does the same per thread. Ops hold views
// and parameters by value so they can be passed to a kernel.
//
// Supported by every op: sample types std::uint8_t, std::uint16_t, float;
// 1, 3 or 4 interleaved channels (stencils process all of them, as OpenCV
// does); every BorderMode. Kernel sizes are bounded by kMaxKernel.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "filters/arith.hpp"
#include "filters/border.hpp"
#include "filters/image_view.hpp"

namespace cbi {

inline constexpr int kMaxKernel = 255;  // largest box/Gaussian K; keeps an op's weights in kernel parameters

// Reads one sample through the border rule B; `constant` for outside pixels
// under BorderMode::constant.
template <class T, BorderMode B>
struct BorderedSource {
    static constexpr bool kStored = true;  // samples are in view's memory (kernels may load them raw)
    ImageView view;
    T constant;

    // Row pointer for image row y + dy (border-resolved), or nullptr when
    // that row lies in a constant border.
    CBI_HOST_DEVICE const T* row(int y) const {
        const int yy = border_index<B>(y, view.height);
        return yy < 0 ? nullptr : view.row<const T>(yy);
    }
    CBI_HOST_DEVICE T at(const T* row, int x, int c) const {
        const int xx = border_index<B>(x, view.width);
        return row == nullptr || xx < 0 ? constant : row[xx * view.channels + c];
    }
};

// BorderedSource with the border rule as a run-time value: for kernels
// instantiated once for all borders (stream:WxH, fused stencil pairs). Rows
// resolve their border once per row; inside the image the lookups are
// inline, outside through one out-of-line copy of the border rules
// (inlined at every unrolled call, they made kernels several times larger
// and slower to compile).
template <class T>
struct AnyBorderSource {
    static constexpr bool kStored = true;
    ImageView view;
    T constant;
    BorderMode mode;

    CBI_HOST_DEVICE const T* row(int y) const {
        if (static_cast<unsigned>(y) < static_cast<unsigned>(view.height)) return view.row<const T>(y);
        return outside_row(y);
    }
    CBI_HOST_DEVICE T at(const T* row, int x, int c) const {
        if (row != nullptr && static_cast<unsigned>(x) < static_cast<unsigned>(view.width))
            return row[x * view.channels + c];
        return outside_at(row, x, c);
    }
    CBI_HOST_DEVICE_NOINLINE const T* outside_row(int y) const {
        const int yy = border_index(mode, y, view.height);
        return yy < 0 ? nullptr : view.row<const T>(yy);
    }
    CBI_HOST_DEVICE_NOINLINE T outside_at(const T* row, int x, int c) const {
        const int xx = border_index(mode, x, view.width);
        return row == nullptr || xx < 0 ? constant : row[xx * view.channels + c];
    }
};

// sum_i w[i] * get(i) for i < n in Acc arithmetic, in index order. Float
// products and sums are rounded separately (see arith.hpp); a null `w`
// means unit weights (box). The one place stencil sums are computed: the
// per-pixel path and the shared-memory path both call it, so their results
// are bit-identical.
// sum + w * v in Acc arithmetic: float products and sums rounded separately
// (see arith.hpp), integers exact.
template <class Acc, class W>
CBI_HOST_DEVICE Acc weighted_add(Acc sum, W w, Acc v) {
    if constexpr (std::is_same_v<Acc, float>)
        return add_rn(sum, mul_rn(static_cast<float>(w), v));
    else
        return sum + static_cast<Acc>(w) * v;  // integers: exact
}

// One step of weighted_sum: sum + w[i] * v (sum + v for unit weights). The
// register-blocked sep:WxH kernel adds its taps through weighted_add too.
template <class Acc, class W>
CBI_HOST_DEVICE Acc weighted_step(Acc sum, const W* w, int i, Acc v) {
    if (w == nullptr) return sum + v;  // unit weights: exact in every Acc
    return weighted_add<Acc>(sum, w[i], v);
}

template <class Acc, class W, class Get>
CBI_HOST_DEVICE Acc weighted_sum(const W* w, int n, Get&& get) {
    Acc sum = 0;
    for (int i = 0; i < n; ++i) sum = weighted_step<Acc>(sum, w, i, static_cast<Acc>(get(i)));
    return sum;
}

// A separable stencil: for each of its passes p, the sum over the
// kw(p) x kh(p) footprint centred on (x, y) of wy(p)[j] * wx(p)[i] * src,
// computed as row sums across x first, then a weighted sum of the rows;
// finish() turns the pass sums into the output sample. Derived ops supply
// the weights (Acc, W types; passes(), wx, kw, wy, kh, finish). The CPU and
// the naive CUDA kernel evaluate it per pixel with operator(); the CUDA
// shared-memory schedule stages the same row sums per tile.
// Src is the source of samples: BorderedSource, or ColorSource when a colour
// node is fused into the stencil's loads.
template <class Derived, class T, BorderMode B, class Src = BorderedSource<T, B>>
struct SeparableStencil {
    using Sample = T;
    static constexpr int kMaxPasses = 2;
    Src src;
    ImageView dst;

    CBI_HOST_DEVICE const Derived& self() const { return static_cast<const Derived&>(*this); }

    CBI_HOST_DEVICE void operator()(int x, int y) const {
        using Acc = typename Derived::Acc;
        const Derived& d = self();
        T* out = dst.row<T>(y) + x * dst.channels;
        for (int c = 0; c < src.view.channels; ++c) {
            Acc sums[kMaxPasses] = {};
            for (int p = 0; p < d.passes(); ++p) {
                const int kw = d.kw(p), kh = d.kh(p);
                sums[p] = weighted_sum<Acc>(d.wy(p), kh, [&](int j) {
                    const T* row = src.row(y + j - kh / 2);
                    return weighted_sum<Acc>(d.wx(p), kw,
                                             [&](int i) { return to_acc<Acc>(src.at(row, x + i - kw / 2, c)); });
                });
            }
            out[c] = d.finish(sums);
        }
    }
};

// The largest kernel radius over a stencil's passes: the halo a tile of its
// outputs needs around it.
template <class Op>
int stencil_halo(const Op& op) {
    int h = 0;
    for (int p = 0; p < op.passes(); ++p) h = std::max({h, op.kw(p) / 2, op.kh(p) / 2});
    return h;
}

// Ops whose weights are all 1 (box): sums need no multiplies, and may slide.
template <class Op>
concept UnitWeightOp = requires {
    requires Op::kUnitWeights;
};

// The same stencil op reading through another source: kernels instantiated
// once for all borders read through AnyBorderSource. Every stencil op derives
// from SeparableStencil and from its Args (its parameters), in that order.
template <template <class, BorderMode, class> class Op, class T, BorderMode B, class Src, class NewSrc>
auto with_source(const Op<T, B, Src>& op, const NewSrc& source) {
    using R = Op<T, BorderMode::reflect101, NewSrc>;
    return R{{source, op.dst}, static_cast<const typename R::Args&>(op)};
}

// Traits the stencil ops opt into, as static members (absent: false):
//   kUnitWeights      all weights 1: sums may slide (UnitWeightOp)
//   kMayRunTwoPasses  passes() may be 2 (MayRunTwoPasses)
//   kSignedWeights    negative vertical weights: 8-bit column sums carry a bias
//   kStream8          8-bit, runs on the 8-bit strip kernel (cuda/strip8.cuh)
//   kFixedPoint       8-bit fixed-point weights with a rounding shift
//   kFinishReturnsSum finish() returns its one pass's sum unchanged
template <class Op>
constexpr bool op_trait_signed_weights() {
    if constexpr (requires { Op::kSignedWeights; })
        return Op::kSignedWeights;
    else
        return false;
}
template <class Op>
constexpr bool op_trait_stream8() {
    if constexpr (requires { Op::kStream8; })
        return Op::kStream8;
    else
        return false;
}
template <class Op>
constexpr bool op_trait_finish_returns_sum() {
    if constexpr (requires { Op::kFinishReturnsSum; })
        return Op::kFinishReturnsSum;
    else
        return false;
}

// Ops whose passes() may be 2 (Sobel's magnitude, Laplacian): kernels that
// take the pass count as a template argument build two-pass bodies for
// these only.
template <class Op>
concept MayRunTwoPasses = requires {
    requires Op::kMayRunTwoPasses;
};

// A 3x4 matrix in storage order: row r gives output channel r, columns
// weigh input channels 0, 1, 2 (B, G, R for OpenCV images) plus an offset.
// Built on the host for one input channel count (storage_matrix), so every
// caller of ColorOp::sample reads 1-channel images the same way.
struct StorageMatrix {
    float m[3][4];
    int rows;  // 3, or 1 for a gray result
    // Samples between the input's B, G and R: 1, or 0 for a 1-channel image,
    // read as R = G = B (as cv::cvtColor(COLOR_GRAY2BGR) would give it).
    int step = 1;
    // Gray of a 1-channel image is that image, bit for bit: a copy, since no
    // matrix is an identity on floats (0 * Inf is NaN, -0 + 0 is +0).
    bool copy = false;
    // 16-bit gray in cv::cvtColor's fixed point, (B q0 + G q1 + R q2 +
    // 2^14) >> 15 in 32 bits: floats cannot hold those sums exactly.
    bool fixed15 = false;
    std::uint32_t q15[3] = {};
};

// The offset of the 8-bit `gray` preset's matrix (storage_matrix): half of
// its weights' last bit (2^-15), so that its ties round up as cv::cvtColor's
// fixed point does.
inline constexpr float kGrayHalfUp = 0x1p-16f;

// StorageMatrix::step for an input of `channels` channels.
CBI_HOST_DEVICE constexpr int color_step(int channels) {
    return channels == 1 ? 0 : 1;
}

// Matrix colour transform per pixel; alpha (channel 3) is copied unchanged
// when both images have it.
template <class T>
struct ColorOp {
    ImageView src;
    ImageView dst;
    StorageMatrix matrix;

    // Output channel r (< matrix.rows) of the pixel `in`, its channels
    // `step` samples apart (matrix.step). Kernels that hold pixels in
    // register arrays pass color_step(CI) as a constant: a run-time index
    // would move the array to local memory, and step 1 drops the copy test.
    static CBI_HOST_DEVICE T sample(const StorageMatrix& matrix, const T* in, int r, int step) {
        if (step == 0 && matrix.copy) return in[0];
        if constexpr (std::is_same_v<T, std::uint16_t>)
            if (matrix.fixed15)
                return static_cast<T>(
                    (in[0] * matrix.q15[0] + in[step] * matrix.q15[1] + in[2 * step] * matrix.q15[2] + (1u << 14)) >>
                    15);
        const float c0 = to_float(in[0]), c1 = to_float(in[step]), c2 = to_float(in[2 * step]);
        const float* m = matrix.m[r];
        return saturate_round<T>(add_rn(add_rn(add_rn(mul_rn(m[0], c0), mul_rn(m[1], c1)), mul_rn(m[2], c2)), m[3]));
    }
    static CBI_HOST_DEVICE T sample(const StorageMatrix& matrix, const T* in, int r) {
        return sample(matrix, in, r, matrix.step);
    }

    CBI_HOST_DEVICE void operator()(int x, int y) const {
        const T* in = src.row<const T>(y) + x * src.channels;
        T* out = dst.row<T>(y) + x * dst.channels;
        for (int r = 0; r < matrix.rows; ++r) out[r] = sample(matrix, in, r);
        if (dst.channels == 4) out[3] = in[3];
    }
};

// Fusion: the output of a colour node, read by the stencil that consumes it
// without being stored. `view` describes that virtual image (the colour
// node's output geometry; its data is not used); samples are computed from
// `input` by ColorOp::sample, so results are bit-identical to running the
// two nodes. Stencil kernels that stage tiles compute each sample once.
// Derived supplies the border rule: index(p, n) as border_index.
template <class Derived, class T>
struct ColorSamples {
    static constexpr bool kStored = false;
    ImageView view;   // the colour node's output geometry
    ImageView input;  // the colour node's input
    StorageMatrix matrix;
    T constant;

    CBI_HOST_DEVICE int index(int p, int n) const { return static_cast<const Derived&>(*this).index(p, n); }
    CBI_HOST_DEVICE const T* row(int y) const {
        const int yy = index(y, view.height);
        return yy < 0 ? nullptr : input.row<const T>(yy);
    }
    CBI_HOST_DEVICE T at(const T* row, int x, int c) const {
        const int xx = index(x, view.width);
        if (row == nullptr || xx < 0) return constant;
        const T* in = row + xx * input.channels;
        return c < matrix.rows ? ColorOp<T>::sample(matrix, in, c) : in[3];  // alpha is copied
    }
};

// The border rule B fixed at compile time.
template <class T, BorderMode B>
struct ColorSource : ColorSamples<ColorSource<T, B>, T> {
    CBI_HOST_DEVICE int index(int p, int n) const { return border_index<B>(p, n); }
};

// The border rule as a run-time value (see AnyBorderSource).
template <class T>
struct AnyBorderColorSource : ColorSamples<AnyBorderColorSource<T>, T> {
    BorderMode mode;
    CBI_HOST_DEVICE int index(int p, int n) const { return border_index(mode, p, n); }
};

// A pointwise op that maps every sample on its own, all channels alike
// (threshold, scale, gamma): Derived supplies `T sample(T) const`. The CPU
// backend runs such ops a row of samples at a time (kPerSample), which the
// compiler can vectorise; kernels may do the same.
template <class Derived, class T>
struct PerSampleOp {
    static constexpr bool kPerSample = true;
    using Sample = T;
    ImageView src;
    ImageView dst;

    CBI_HOST_DEVICE void operator()(int x, int y) const {
        const T* in = src.row<const T>(y) + x * src.channels;
        T* out = dst.row<T>(y) + x * dst.channels;
        for (int c = 0; c < dst.channels; ++c) out[c] = static_cast<const Derived&>(*this).sample(in[c]);
    }
};

// Ops that map samples one by one (PerSampleOp).
template <class Op>
concept PerSampleOpType = requires {
    requires Op::kPerSample;
};

// cv::addWeighted: alpha*A + beta*B + gamma per sample, float arithmetic.
template <class T>
struct BlendOp {
    ImageView a;
    ImageView b;
    ImageView dst;
    float alpha, beta, gamma;

    // One output sample from samples a and b.
    CBI_HOST_DEVICE T sample(T a_sample, T b_sample) const {
        return saturate_round<T>(
            add_rn(add_rn(mul_rn(alpha, to_float(a_sample)), mul_rn(beta, to_float(b_sample))), gamma));
    }

    CBI_HOST_DEVICE void operator()(int x, int y) const {
        const T* pa = a.row<const T>(y) + x * a.channels;
        const T* pb = b.row<const T>(y) + x * b.channels;
        T* out = dst.row<T>(y) + x * dst.channels;
        for (int c = 0; c < dst.channels; ++c) out[c] = sample(pa[c], pb[c]);
    }
};

// A blend of two stencils of one image (the difference of Gaussians:
// blend(gaussian:5(src), gaussian:9(src))), or of a stencil of an image and
// that image (unsharp masking: blend(src, gaussian(src)); B = SourceSample),
// computed in one pass over the image: the stencils' passes side by side
// (a's, then b's), each side finished by its own op and the two by
// BlendOp::sample, so the result equals the three nodes' bit for bit. Kernels
// read `src` (the stencils' source, through a's border rule) and write
// `dst`; the sides' own views are not used.
struct SourceSample {
    CBI_HOST_DEVICE static constexpr int passes() { return 0; }
};

// Whether stencils A and B sum and weigh in one type (the source: always).
template <class A, class B>
constexpr bool blend_sides_agree() {
    if constexpr (std::is_same_v<B, SourceSample>)
        return true;
    else
        return std::is_same_v<typename A::Acc, typename B::Acc> && std::is_same_v<typename A::W, typename B::W>;
}

template <class A, class B>
struct BlendedStencils {
    static constexpr bool kReadsSource = std::is_same_v<B, SourceSample>;
    using Sample = typename A::Sample;
    using Acc = typename A::Acc;
    static_assert(blend_sides_agree<A, B>(), "both sides sum and weigh in one type");
    static constexpr int kMaxPasses = 2;
    decltype(A::src) src;
    ImageView dst;
    A a;
    B b;
    BlendOp<Sample> blend;  // blend.sample(a's sample, b's or the source's)

    CBI_HOST_DEVICE int passes() const { return a.passes() + b.passes(); }
    CBI_HOST_DEVICE bool in_a(int p) const { return p < a.passes(); }
    CBI_HOST_DEVICE auto wx(int p) const { return in_a(p) ? a.wx(p) : side_b().wx(p - a.passes()); }
    CBI_HOST_DEVICE auto wy(int p) const { return in_a(p) ? a.wy(p) : side_b().wy(p - a.passes()); }
    CBI_HOST_DEVICE int kw(int p) const { return in_a(p) ? a.kw(p) : side_b().kw(p - a.passes()); }
    CBI_HOST_DEVICE int kh(int p) const { return in_a(p) ? a.kh(p) : side_b().kh(p - a.passes()); }
    // Two stencils: sums holds a's passes, then b's.
    CBI_HOST_DEVICE Sample finish(const Acc* sums) const requires(!kReadsSource) {
        return blend.sample(a.finish(sums), b.finish(sums + a.passes()));
    }
    // A stencil and the source: `source` is the source's sample at the output.
    CBI_HOST_DEVICE Sample finish(const Acc* sums, Sample source) const requires kReadsSource {
        return blend.sample(a.finish(sums), source);
    }

private:
    // b as a stencil (a when b is the source: never asked, passes() is a's).
    CBI_HOST_DEVICE const auto& side_b() const {
        if constexpr (kReadsSource)
            return a;
        else
            return b;
    }
};

}  // namespace cbi
