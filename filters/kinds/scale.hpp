#pragma once
// scale:ALPHA[:BETA] = src.convertTo(dst, -1, ALPHA, BETA), bit for bit:
// ALPHA * src + BETA per sample (every channel), rounded to nearest even
// and saturated on 8/16-bit images. OpenCV 4.6 computes it in float with
// ALPHA and BETA rounded to float and one fused multiply-add (its AVX2 loop;
// checked against convertTo on every 8- and 16-bit value for 3000 random
// (ALPHA, BETA)), so the op does too (fma_rn). Brightness and contrast:
// scale:1.2:-20.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "filters/kinds/args.hpp"
#include "filters/kinds/kind.hpp"
#include "filters/ops.hpp"

namespace cbi {

struct ScaleFilter {
    double alpha = 1;
    double beta = 0;
    friend bool operator==(const ScaleFilter&, const ScaleFilter&) = default;
};

template <class T>
struct ScaleOp : PerSampleOp<ScaleOp<T>, T> {
    float alpha, beta;
    // convertTo copies when |ALPHA - 1| and |BETA| are below DBL_EPSILON
    // (float -0 stays -0, which -0 * 1 + 0 would not).
    bool copy;
    // 8-bit: the 256 results, computed by the same expression, which the
    // CPU reads per sample (a std::fma call costs more than the lookup) and
    // the GPU's vec:N kernel stages in shared memory; per-pixel GPU kernels compute.
    std::uint8_t table[std::is_same_v<T, std::uint8_t> ? 256 : 1];

    CBI_HOST_DEVICE T compute(T v) const { return copy ? v : saturate_round<T>(fma_rn(to_float(v), alpha, beta)); }
    CBI_HOST_DEVICE T sample(T v) const {
#if !defined(__CUDA_ARCH__)
        if constexpr (std::is_same_v<T, std::uint8_t>) return table[v];
#endif
        return compute(v);
    }
};

template <>
struct FilterKind<ScaleFilter> {
    static constexpr std::string_view name = "scale", form = "scale:ALPHA[:BETA]", params = "alpha beta";
    static constexpr std::string_view help = "ALPHA * src + BETA per sample (BETA default 0), rounded and saturated";
    static constexpr std::string_view opencv = "src.convertTo(dst, -1, ALPHA, BETA)";
    static constexpr Category category = Category::pointwise;
    static constexpr std::string_view examples[] = {"1.5:-20.25", "0.7", "-1:255", "1.1:0.3"};
    static constexpr KindDefault defaults[] = {
        // Runs of N pixels as whole words (cuda/backend.cu vec_samples), as colour.
        // 8-bit 1-channel rows: 16 bytes a thread (docs/performance.md#new-kinds: lookups gain, threshold level).
        {true, 0, static_cast<int>(Depth::u8), 1, "vec:16 vec:8"},
        {true, 0, static_cast<int>(Depth::u8), 0, "vec:8 vec:4 vec:16"},
        {true, 0, kAnyDepth, 0, "vec:4 vec:2 vec:8"},
        {false, 0, kAnyDepth, 0, "naive"},
    };

    static ScaleFilter parse(std::string_view a) {
        const auto parts = args::split(a, ':');
        args::expect_fields(name, a, parts, 1, 2, "ALPHA[:BETA]");
        ScaleFilter f;
        if (!args::parse_double(parts[0], f.alpha))
            args::invalid("scale ALPHA '" + std::string(parts[0]) + "' is not a number (scale:ALPHA[:BETA])");
        if (parts.size() == 2 && !args::parse_double(parts[1], f.beta))
            args::invalid("scale BETA '" + std::string(parts[1]) + "' is not a number (scale:ALPHA[:BETA])");
        return f;
    }
    static std::string print(const ScaleFilter& f) {
        return args::number(f.alpha) + (f.beta != 0 || std::signbit(f.beta) ? ":" + args::number(f.beta) : "");
    }
    static Footprint footprint(const ScaleFilter&) { return {}; }
    template <class T>
    static ScaleOp<T> op(const ScaleFilter& f, const ImageView& src, const ImageView& dst) {
        const bool copy = std::fabs(f.alpha - 1) < DBL_EPSILON && std::fabs(f.beta) < DBL_EPSILON;
        ScaleOp<T> op{{src, dst}, static_cast<float>(f.alpha), static_cast<float>(f.beta), copy, {}};
        if constexpr (std::is_same_v<T, std::uint8_t>)
            for (int i = 0; i < 256; ++i) op.table[i] = op.compute(static_cast<std::uint8_t>(i));
        return op;
    }
};

}  // namespace cbi
