#pragma once
// blur:K = cv::blur(src, dst, {K,K}, {-1,-1}, border): the mean over a
// K x K window, K odd 1..255. Integer sums are exact and the mean is rounded
// once (K*K is odd: no ties); float sums in double, as OpenCV does.
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "filters/kinds/args.hpp"
#include "filters/kinds/kind.hpp"
#include "filters/ops.hpp"

namespace cbi {

struct BoxFilter {
    int ksize = 3;
    friend bool operator==(const BoxFilter&, const BoxFilter&) = default;
};

struct BoxArgs {
    int ksize;
    // The 8-bit mean's divisor k*k as a multiplier (quotient_magic), used on the GPU.
    std::uint64_t mean_magic = quotient_magic(static_cast<std::uint32_t>(ksize * ksize));
};

template <class T, BorderMode B, class Src = BorderedSource<T, B>>
struct BoxOp : SeparableStencil<BoxOp<T, B, Src>, T, B, Src>, BoxArgs {
    using Args = BoxArgs;
    // Unit weights: a kernel may slide running sums (sep:WxH). Exact for
    // integer sums; for float (double sums) within rounding of the direct sum.
    static constexpr bool kUnitWeights = true;
    static constexpr bool kStream8 = std::is_same_v<T, std::uint8_t>;

    using Acc = std::conditional_t<std::is_same_v<T, float>, double,
                                   std::conditional_t<std::is_same_v<T, std::uint8_t>, std::uint32_t, std::uint64_t>>;
    using W = int;
    CBI_HOST_DEVICE int passes() const { return 1; }
    CBI_HOST_DEVICE const W* wx(int) const { return nullptr; }
    CBI_HOST_DEVICE const W* wy(int) const { return nullptr; }
    CBI_HOST_DEVICE int kw(int) const { return this->ksize; }
    CBI_HOST_DEVICE int kh(int) const { return this->ksize; }
    CBI_HOST_DEVICE T finish(const Acc* sums) const {
        const Acc n = static_cast<Acc>(this->ksize) * static_cast<Acc>(this->ksize);
        if constexpr (std::is_same_v<T, float>) {
            return static_cast<float>(sums[0] / n);
        } else {
#if defined(__CUDA_ARCH__)
            if constexpr (std::is_same_v<T, std::uint8_t>)
                return static_cast<T>(quotient_by_magic(sums[0] + n / 2, this->mean_magic));
#endif
            return static_cast<T>((sums[0] + n / 2) / n);
        }
    }
};

template <>
struct FilterKind<BoxFilter> {
    static constexpr std::string_view name = "blur", form = "blur:K", params = "ksize";
    static constexpr std::string_view help = "mean over a K x K window; K odd, 1..255";
    static constexpr std::string_view opencv = "cv::blur(src, dst, {K,K}, {-1,-1}, border)";
    static constexpr Category category = Category::stencil;
    static constexpr bool unit_weights = true;  // sums slide: the CPU cost model's cheaper taps
    static constexpr std::string_view examples[] = {"1", "3", "9", "31"};
    static constexpr KindDefault defaults[] = {
        // 8-bit up to 9x9: the 8-bit strip kernel (cuda_stream8.cuh).
        {true, 9, static_cast<int>(Depth::u8), 0, "stream:256x16 stream:128x16 stream:256x32"},
        {true, 9, kAnyDepth, 1, "sep:128x32 sep:64x32 stream:128x16"},
        {true, 9, kAnyDepth, 0, "sep:32x32 sep:64x32 sep:128x32"},
        // Larger: the staged tiles, whose sliding sums do not grow with K.
        {true, 0, kAnyDepth, 1, "sep:64x32 sep:128x32 sep:32x32"},
        {true, 0, kAnyDepth, 0, "sep:32x32 sep:64x32 sep:128x32"},
        {false, 0, kAnyDepth, 0, "sep:256x256 sep:128x128 sep:512x512"},
    };

    static BoxFilter parse(std::string_view a) { return {args::parse_ksize(name, a, kMaxKernel)}; }
    static std::string print(const BoxFilter& f) { return std::to_string(f.ksize); }
    static Footprint footprint(const BoxFilter& f) { return {f.ksize, f.ksize}; }
    static constexpr PairFusion pair_fusion(const BoxFilter&) { return {}; }
    template <class T, BorderMode B, class Src>
    static auto op(const BoxFilter& f, const Src& source, const ImageView& dst) {
        return BoxOp<T, B, Src>{{source, dst}, {f.ksize}};
    }
};

}  // namespace cbi
