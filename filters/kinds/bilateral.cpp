#include "filters/kinds/bilateral.hpp"

#include <cfloat>
#include <cmath>

namespace cbi {
namespace {
// OpenCV 4.6 reads a sigma <= 0 as 1.
double effective_sigma(double s) {
    return s <= 0 ? 1.0 : s;
}

// -0.5 / s^2 as a float that is never -inf (a sigma below ~1e-19 would
// give -inf, and 0 * -inf is NaN for the centre's distance 0).
float coefficient(double c) {
    return c < -FLT_MAX ? -FLT_MAX : static_cast<float>(c);
}
}  // namespace

int bilateral_radius(const BilateralFilter& f) {
    const int r = f.diameter > 0 ? f.diameter / 2
                                 : static_cast<int>(std::nearbyint(effective_sigma(f.sigma_space) * 1.5));  // cvRound
    return r < 1 ? 1 : r;
}

BilateralArgs bilateral_args(const BilateralFilter& f, Depth depth) {
    const double sc = effective_sigma(f.sigma_color), ss = effective_sigma(f.sigma_space);
    const double color_coeff = -0.5 / (sc * sc), space_coeff = -0.5 / (ss * ss);
    BilateralArgs a{};
    a.radius = bilateral_radius(f);
    a.color_coeff = coefficient(color_coeff);
    a.space_coeff = coefficient(space_coeff);
    if (depth == Depth::u8)  // as OpenCV's bilateralFilter_8u fills its table
        for (int i = 0; i < kBilateralColorTable; ++i)
            a.color_weight[i] = static_cast<float>(std::exp(i * i * color_coeff));
    for (int n = 0; n < kBilateralSpaceTable; ++n) {  // OpenCV: r = sqrt(i^2 + j^2), exp(r * r * coeff)
        const double r = std::sqrt(static_cast<double>(n));
        a.space_weight[n] = static_cast<float>(std::exp(r * r * space_coeff));
    }
    for (int dy = 0; dy <= a.radius; ++dy) {
        int h = 0;
        while ((h + 1) * (h + 1) + dy * dy <= a.radius * a.radius) ++h;
        a.half_width[dy] = static_cast<std::uint8_t>(h);
    }
    return a;
}

BilateralFilter FilterKind<BilateralFilter>::parse(std::string_view a) {
    const auto parts = args::split(a, ':');
    args::expect_fields(name, a, parts, 3, 3, form);
    BilateralFilter f;
    if (!args::parse_int(parts[0], f.diameter))
        args::invalid("bilateral diameter '" + std::string(parts[0]) + "' is not an integer (" + std::string(form) +
                      ")");
    if (!args::parse_double(parts[1], f.sigma_color))
        args::invalid("bilateral SIGMA_COLOR '" + std::string(parts[1]) + "' is not a number (" + std::string(form) +
                      ")");
    if (!args::parse_double(parts[2], f.sigma_space))
        args::invalid("bilateral SIGMA_SPACE '" + std::string(parts[2]) + "' is not a number (" + std::string(form) +
                      ")");
    // The radius before clamping to 1, in double (a huge sigma must not overflow an int).
    const double r = f.diameter > 0 ? f.diameter / 2 : std::nearbyint(effective_sigma(f.sigma_space) * 1.5);
    if (r > kBilateralMaxRadius)
        args::invalid("bilateral '" + std::string(a) + "' has a radius of " + args::number(r) + "; at most " +
                      std::to_string(kBilateralMaxRadius) + ": D <= " + std::to_string(2 * kBilateralMaxRadius + 1) +
                      ", or SIGMA_SPACE below 85 with D <= 0 (" + std::string(form) + ")");
    return f;
}

}  // namespace cbi
