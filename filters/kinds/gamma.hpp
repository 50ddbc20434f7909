#pragma once
// gamma:G (G > 0) = MAX * (src / MAX)^(1/G) per sample, every channel (as
// cv::LUT with that table; ImageMagick's -gamma, libvips' gamma), MAX the
// depth's maximum (255, 65535; 1 for float). 8/16-bit: computed in double
// and rounded to nearest even and saturated, which is the table
// cv::saturate_cast<T>(MAX * std::pow(i / MAX, 1 / G)) a host would build
// (tests check every 8- and 16-bit value). Float: std::pow in double,
// rounded to float, no clamping (values above 1 grow past 1); samples <= 0
// (and -0) pass unchanged, as ImageMagick's gamma_pow does for negative
// values (a real power of a negative number has no value).
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "filters/kinds/args.hpp"
#include "filters/kinds/kind.hpp"
#include "filters/ops.hpp"

namespace cbi {

struct GammaFilter {
    double gamma = 1;
    friend bool operator==(const GammaFilter&, const GammaFilter&) = default;
};

template <class T>
struct GammaOp : PerSampleOp<GammaOp<T>, T> {
    double exponent;  // 1 / G
    // 8-bit: the 256 results of compute(), which the CPU reads per sample
    // and the GPU's vec:N kernel stages in shared memory (a double pow per
    // sample costs more than the lookup on both); per-pixel GPU kernels compute.
    std::uint8_t table[std::is_same_v<T, std::uint8_t> ? 256 : 1];

    CBI_HOST_DEVICE T compute(T v) const {
        if constexpr (std::is_same_v<T, float>) {
            return v > 0.f ? static_cast<float>(::pow(static_cast<double>(v), exponent)) : v;
        } else {
            constexpr double hi = static_cast<double>(T(~T(0)));
            const double r = ::rint(hi * ::pow(static_cast<double>(v) / hi, exponent));  // to nearest even
            return r <= 0 ? T(0) : r >= hi ? T(~T(0)) : static_cast<T>(r);
        }
    }
    CBI_HOST_DEVICE T sample(T v) const {
#if !defined(__CUDA_ARCH__)
        if constexpr (std::is_same_v<T, std::uint8_t>) return table[v];
#endif
        return compute(v);
    }
};

template <>
struct FilterKind<GammaFilter> {
    static constexpr std::string_view name = "gamma", form = "gamma:G", params = "gamma";
    static constexpr std::string_view help = "MAX * (src / MAX)^(1/G) per sample; G > 0 (MAX: 255, 65535, 1 for float)";
    static constexpr std::string_view opencv = "cv::LUT(src, table of MAX * pow(i / MAX, 1 / G), dst)";
    static constexpr Category category = Category::pointwise;
    static constexpr std::string_view examples[] = {"2.2", "0.45", "1"};
    static constexpr KindDefault defaults[] = {
        // Runs of N pixels as whole words (cuda/backend.cu vec_samples), as colour.
        // 8-bit 1-channel rows: 16 bytes a thread (docs/performance.md#new-kinds: lookups gain, threshold level).
        {true, 0, static_cast<int>(Depth::u8), 1, "vec:16 vec:8"},
        {true, 0, static_cast<int>(Depth::u8), 0, "vec:8 vec:4 vec:16"},
        {true, 0, kAnyDepth, 0, "vec:4 vec:2 vec:8"},
        {false, 0, kAnyDepth, 0, "naive"},
    };

    static GammaFilter parse(std::string_view a) {
        GammaFilter f;
        if (!args::parse_double(a, f.gamma) || !(f.gamma > 0))
            args::invalid("gamma G '" + std::string(a) + "' must be a number > 0 (gamma:G)");
        return f;
    }
    static std::string print(const GammaFilter& f) { return args::number(f.gamma); }
    static Footprint footprint(const GammaFilter&) { return {}; }
    template <class T>
    static GammaOp<T> op(const GammaFilter& f, const ImageView& src, const ImageView& dst) {
        GammaOp<T> op{{src, dst}, 1.0 / f.gamma, {}};
        if constexpr (std::is_same_v<T, std::uint8_t>)
            for (int i = 0; i < 256; ++i) op.table[i] = op.compute(static_cast<std::uint8_t>(i));
        return op;
    }
};

}  // namespace cbi
