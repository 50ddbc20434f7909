// The CUDA side of blends fused with the stencils they read (BlendRun):
// the 8-bit stream kernel (cuda/strip8.cuh) runs BlendedStencils (ops.hpp),
// so an unsharp mask or a difference of Gaussians reads its input once and
// writes its output once; one stencil on sep:WxH runs its sep kernel, which
// blends as it stores (cuda/backend.cu).
#include "filters/cuda/backend.hpp"
#include "filters/kernel_path.hpp"

#include <optional>
#include <stdexcept>
#include <type_traits>

#include "filters/cuda/check.hpp"
#include "filters/cuda/strip8.cuh"
#include "filters/dispatch.hpp"
#include "filters/then.hpp"

namespace cbi {
namespace {

using Source8 = AnyBorderSource<std::uint8_t>;
constexpr BorderMode kAnyBorder = BorderMode::reflect101;  // the source carries the rule

// The sides this kernel takes: an 8-bit box or Gaussian. Pairs of one kind
// only (a Gaussian with a box would need their weights in one type).
template <class Side>
constexpr bool kBlendSide = std::is_same_v<Side, BoxOp<std::uint8_t, kAnyBorder, Source8>> ||
                            std::is_same_v<Side, GaussianOp<std::uint8_t, kAnyBorder, Source8>>;

// Builds the BlendedStencils op of `node` (8-bit) reading `src` and writing
// `dst`, with the stencil side first (of two, the larger: the kernel skips
// the smaller's zero weights), and calls f(op); does not call f when the
// kernel does not take the node's sides. blend(x, s) with weights
// (alpha, beta) is blend(s, x) with (beta, alpha) bit for bit: the two
// products are added first, and addition commutes.
template <class F>
void with_blended_op(const BlendRun& node, const ImageView& src, const ImageView& dst, F&& f) {
    if (!node.a && !node.b) return;
    const Source8 source{src, saturate_round<std::uint8_t>(static_cast<float>(node.border.value)), node.border.mode};
    const auto weights = [&](bool swap) {
        const auto w = [](double v) { return static_cast<float>(v); };
        const float alpha = w(swap ? node.blend.beta : node.blend.alpha),
                    beta = w(swap ? node.blend.alpha : node.blend.beta);
        return BlendOp<std::uint8_t>{{}, {}, {}, alpha, beta, w(node.blend.gamma)};
    };
    const Filter& first = node.a ? *node.a : *node.b;
    with_stencil_op<std::uint8_t, kAnyBorder>(first, source, dst, [&](const auto& a) {
        using A = std::remove_cvref_t<decltype(a)>;
        if constexpr (kBlendSide<A>) {
            if (!node.a || !node.b) {
                f(BlendedStencils<A, SourceSample>{source, dst, a, {}, weights(!node.a)});
                return;
            }
            with_stencil_op<std::uint8_t, kAnyBorder>(*node.b, source, dst, [&](const auto& b) {
                if constexpr (std::is_same_v<std::remove_cvref_t<decltype(b)>, A>) {
                    if (b.kw(0) > a.kw(0))
                        f(BlendedStencils<A, A>{source, dst, b, a, weights(true)});
                    else
                        f(BlendedStencils<A, A>{source, dst, a, b, weights(false)});
                }
            });
        }
    });
}

// Whether the kernel takes op: each side one pass, K of 3 to 9, column sums
// within 16-bit lanes, 1 or 3 channels; Gaussians' x weights of one byte
// (pair rows).
template <class Op>
bool blend_kernel_takes(const Op& op) {
    const int k = cuda::stream8_kernel_size(op);
    const int c = op.src.view.channels;
    return op.a.passes() == 1 && op.b.passes() <= 1 && k >= 3 && k <= 9 && cuda::stream8_lanes_fit(op) &&
           (c == 1 || c == 3) && (!cuda::kStream8PairRows<Op> || cuda::stream8_pair_weights_fit(op));
}

}  // namespace

bool cuda_blend_fits(const BlendRun& node, Depth depth, int channels) {
    if (cuda_sep_blend_fits(node)) return true;
    if (depth != Depth::u8 || node.schedule.family != ScheduleFamily::stream) return false;
    const ImageView probe{nullptr, 1, 1, channels, depth, 0};
    bool takes = false;
    with_blended_op(node, probe, probe, [&](const auto& op) { takes = blend_kernel_takes(op); });
    return takes;
}

// Calls f(op, K, C, P, KB) (integral constants) for the kernel that runs
// the node on `src`, and returns true, where the kernel takes the node. KB:
// the second side's size where pair rows skip its zero weights (two
// Gaussians), else K.
template <class F>
bool with_blend_kernel(const BlendRun& node, const ImageView& src, const ImageView& dst, F&& f) {
    bool takes = false;
    if (src.depth == Depth::u8 && node.schedule.family == ScheduleFamily::stream) {
        with_blended_op(node, src, dst, [&](const auto& op) {
            using Op = std::remove_cvref_t<decltype(op)>;
            takes = blend_kernel_takes(op);
            if (!takes || dst.empty()) return;
            cuda::with_one_of<3, 5, 7, 9>(cuda::stream8_kernel_size(op), [&](auto kc) {
                cuda::with_one_of<1, 3>(src.channels, [&](auto cc) {
                    constexpr int P = Op::kReadsSource ? 1 : 2;
                    if constexpr (P == 2 && cuda::kStream8PairRows<Op>) {
                        const bool sized = cuda::with_one_of<3, 5, 7, 9>(op.b.kw(0), [&](auto kbc) {
                            if constexpr (kbc() <= kc()) f(op, kc, cc, std::integral_constant<int, P>{}, kbc);
                        });
                        if (!sized) throw std::logic_error("fused blend: a Gaussian side of an even or 1x1 size");
                    } else {
                        f(op, kc, cc, std::integral_constant<int, P>{}, kc);
                    }
                });
            });
        });
    }
    return takes;
}

int cuda_blend_strip_height(const BlendRun& node, Depth depth, int channels, int width, int height, int device,
                            int block) {
    const ImageView view{nullptr, width, height, channels, depth, 0};
    int h = 0;
    with_blend_kernel(node, view, view, [&](const auto& op, auto kc, auto cc, auto pc, auto kbc) {
        h = cuda::stream8_kernel_strip_height<kc(), cc(), pc(), kbc()>(cuda::kBlendStripHeights, node.schedule.width,
                                                                       op, block, node.schedule.order, device);
    });
    return h;
}

void run_blend_fused_cuda(const BlendRun& node, const ImageView& src, const ImageView& dst, cudaStream_t stream,
                          int block) {
    if (cuda_sep_blend_fits(node)) return run_blend_of_stencil_cuda(node, src, dst, stream, block);
    const StreamSchedule strip = stream_schedule(node.schedule.width, node.schedule.height);
    const bool takes = with_blend_kernel(node, src, dst, [&](const auto& op, auto kc, auto cc, auto pc, auto kbc) {
        cuda::launch_stream8_kernel<kc(), cc(), pc(), kbc()>(strip, op, stream, block, node.schedule.order,
                                                             then_samples<std::uint8_t>(node.then, dst));
    });
    if (!takes) throw std::logic_error("the 8-bit stream kernel cannot compute this blend with its stencils");
    note_kernel_path(KernelPath::cuda_blend_stream8);
    CBI_CUDA_CHECK(cudaGetLastError(), "launch fused blend (stream)");
}

}  // namespace cbi
