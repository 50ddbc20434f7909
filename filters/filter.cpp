#include "filters/filter.hpp"

#include <opencv2/core/base.hpp>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "filters/error.hpp"
#include "filters/kinds/args.hpp"
#include "filters/then.hpp"

namespace cbi {
namespace {

using args::invalid;
using args::number;
using args::parse_double;
using args::split;

// fn(kind) for the kind named `name`; false when no kind has that name.
template <class Fn>
bool with_kind_named(std::string_view name, Fn&& fn) {
    bool found = false;
    for_each_kind([&]<class F>(std::type_identity<F>) {
        if (!found && FilterKind<F>::name == name) {
            found = true;
            fn(FilterKind<F>{});
        }
    });
    return found;
}

}  // namespace

Filter parse_filter(std::string_view spec) {
    const auto colon = spec.find(':');
    const auto name = spec.substr(0, colon);
    const auto arg = colon == std::string_view::npos ? std::string_view{} : spec.substr(colon + 1);
    Filter filter;
    if (!with_kind_named(name, [&](auto kind) { filter = kind.parse(arg); }))
        invalid("unknown filter '" + std::string(name) + "' (" + kind_names() + ")");
    return filter;
}

std::span<const FilterKindInfo> filter_kinds() {
    static const std::vector<FilterKindInfo> kinds = [] {
        std::vector<FilterKindInfo> out;
        for_each_kind([&]<class F>(std::type_identity<F>) {
            using K = FilterKind<F>;
            out.push_back({K::name, K::form, K::params, K::help, K::opencv, K::category});
        });
        return out;
    }();
    return kinds;
}

std::string kind_names(std::optional<Category> category) {
    std::vector<std::string_view> names;
    for (const FilterKindInfo& k : filter_kinds())
        if (!category || k.category == *category) names.push_back(k.name);
    std::string out;
    for (std::size_t i = 0; i < names.size(); ++i)
        out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
    return out;
}

const char* category_name(Category c) {
    switch (c) {
        case Category::stencil: return "stencil";
        case Category::pointwise: return "pointwise";
        case Category::window: return "window";
    }
    return "?";
}

Category category_of(const Filter& f) {
    return visit_kind(f, [](auto kind, const auto&) { return decltype(kind)::category; });
}

Border default_border_of(const Filter& f) {
    return visit_kind(f, [](auto kind, const auto& params) {
        if constexpr (requires { kind.default_border(params); })
            return kind.default_border(params);
        else
            return Border{};
    });
}

Expansion expansion_of(const Filter& f, bool per_pixel) {
    return visit_kind(f, [per_pixel](auto kind, const auto& params) {
        if constexpr (requires { kind.expand(params, per_pixel); })
            return kind.expand(params, per_pixel);
        else if constexpr (requires { kind.expand(params); })
            return kind.expand(params);
        else
            return Expansion{};
    });
}

Footprint footprint_of(const Filter& f) {
    return visit_kind(f, [](auto kind, const auto& params) { return kind.footprint(params); });
}

BlendFilter parse_blend(std::string_view arg) {
    const auto parts = split(arg, ':');
    BlendFilter b;
    double* fields[] = {&b.alpha, &b.beta, &b.gamma};
    if (parts.size() < 2 || parts.size() > 3)
        invalid("blend '" + std::string(arg) + "' is not of the form ALPHA:BETA[:GAMMA]");
    for (std::size_t i = 0; i < parts.size(); ++i)
        if (!parse_double(parts[i], *fields[i]))
            invalid("blend weight '" + std::string(parts[i]) + "' is not a number");
    return b;
}

std::string to_string(const BlendFilter& b) {
    return "blend:" + number(b.alpha) + ":" + number(b.beta) + ":" + number(b.gamma);
}

Border parse_border(std::string_view arg) {
    const auto parts = split(arg, ':');
    const auto name = parts[0];
    Border b;
    if (name == "reflect101")
        b.mode = BorderMode::reflect101;
    else if (name == "reflect")
        b.mode = BorderMode::reflect;
    else if (name == "replicate")
        b.mode = BorderMode::replicate;
    else if (name == "wrap")
        b.mode = BorderMode::wrap;
    else if (name == "constant")
        b.mode = BorderMode::constant;
    else
        invalid("border '" + std::string(arg) + "' must be reflect101, reflect, replicate, constant[:V] or wrap");
    if (parts.size() > 2 || (parts.size() == 2 && b.mode != BorderMode::constant))
        invalid("border '" + std::string(arg) + "': only constant takes a value (constant:V)");
    if (parts.size() == 2 && parts[1] == "max")
        b.value = kMorphologyDefaultBorder;
    else if (parts.size() == 2 && !parse_double(parts[1], b.value))
        invalid("border value '" + std::string(parts[1]) + "' is not a number");
    return b;
}

std::string to_string(const Border& b) {
    switch (b.mode) {
        case BorderMode::reflect101: return "reflect101";
        case BorderMode::reflect: return "reflect";
        case BorderMode::replicate: return "replicate";
        case BorderMode::wrap: return "wrap";
        case BorderMode::constant:
            // morphologyDefaultBorderValue: the value no min or max takes.
            if (b.value == kMorphologyDefaultBorder) return "constant:max";
            return "constant:" + number(b.value);
    }
    return "?";
}

std::string to_string(const Filter& filter) {
    return visit_kind(filter, [](auto kind, const auto& params) {
        std::string args = kind.print(params);
        return std::string(kind.name) + (args.empty() ? "" : ":" + args);
    });
}

namespace {
// The forms of the registered schedules that `pick` accepts, for messages.
template <class Pick>
std::string forms_where(Pick pick) {
    std::string forms;
    for (const auto& e : schedule_registry())
        if (pick(e)) forms += (forms.empty() ? "" : ", ") + std::string(e.form);
    return forms;
}

std::string not_pointwise(const ScheduleSpec& schedule, const std::string& what) {
    if (schedule_entry(schedule).can.pointwise) return {};
    return "schedule " + schedule.to_string() + " runs stencil filters only (" + kind_names(Category::stencil) +
           "), not " + what + "; use " + forms_where([](const ScheduleEntry& e) { return e.can.pointwise; });
}

// The side of the square a stencil's schedule must cover (a footprint that
// is not one square window counts as unbounded).
int stencil_size(const Filter& filter) {
    const Footprint f = footprint_of(filter);
    return f.square ? std::max(f.width, f.height) : kMaxKernel + 1;
}
}  // namespace

std::string why_unsupported(const ScheduleSpec& schedule, const Filter& filter, const Border& border, Fusion fusion) {
    if (category_of(filter) == Category::pointwise) return not_pointwise(schedule, to_string(filter));
    const Capabilities& can = schedule_entry(schedule).can;
    const std::string name = "schedule " + schedule.to_string();
    if (category_of(filter) == Category::window) {
        if (!can.window)
            return name + " runs " + (can.stencil ? "separable stencils" : "pointwise filters") + " only, not " +
                   to_string(filter) + "; use " + forms_where([](const ScheduleEntry& e) { return e.can.window; });
        if (fusion.color || fusion.stencil || fusion.blend)
            return to_string(filter) + " does not fuse with other nodes";
        return {};
    }
    if (!can.stencil)
        return name + " runs pointwise filters only (" + kind_names(Category::pointwise) + ", blend), not " +
               to_string(filter) + "; use " + forms_where([](const ScheduleEntry& e) { return e.can.stencil; });
    if (can.max_ksize > 0 && stencil_size(filter) > can.max_ksize)
        return name + " runs stencils up to " + std::to_string(can.max_ksize) + "x" + std::to_string(can.max_ksize) +
               " (non-square windows count as larger), not " + to_string(filter) + "; use " +
               forms_where([](const ScheduleEntry& e) { return e.can.stencil && e.can.max_ksize == 0; });
    if (fusion.color && !can.fuses_color && !(fusion.stencil && can.fuses_stencil))
        return name + " reads stored images: it cannot compute a fused colour node; use " +
               forms_where([](const ScheduleEntry& e) { return e.can.fuses_color; });
    if (fusion.stencil && !can.fuses_stencil)
        return name + " cannot compute a fused stencil pair; use " +
               forms_where([](const ScheduleEntry& e) { return e.can.fuses_stencil; });
    if (fusion.stencil && border.mode == BorderMode::wrap) return "a fused stencil pair cannot take the wrap border";
    if (fusion.blend && !can.fuses_blend)
        return name + " cannot compute the blend that reads it; use " +
               forms_where([](const ScheduleEntry& e) { return e.can.fuses_blend; });
    return {};
}

std::string why_unsupported(const ScheduleSpec& schedule, const BlendFilter& blend) {
    return not_pointwise(schedule, to_string(blend));
}

void check_supports(const ScheduleSpec& schedule, const Filter& filter, const Border& border, Fusion fusion) {
    if (auto why = why_unsupported(schedule, filter, border, fusion); !why.empty()) throw Unsupported("", why);
}

void check_supports(const ScheduleSpec& schedule, const BlendFilter& blend) {
    if (auto why = why_unsupported(schedule, blend); !why.empty()) throw Unsupported("", why);
}

bool supports(const ScheduleSpec& schedule, const Filter& filter, const Border& border, Fusion fusion) {
    return why_unsupported(schedule, filter, border, fusion).empty();
}

bool supports(const ScheduleSpec& schedule, const BlendFilter& blend) {
    return why_unsupported(schedule, blend).empty();
}

std::string refuses_input(const Filter& f, Depth depth, int channels) {
    return visit_kind(f, [&](auto kind, const auto& params) -> std::string {
        if constexpr (requires { kind.refuses_input(params, depth, channels); })
            return kind.refuses_input(params, depth, channels);
        else
            return {};
    });
}

bool whole_image(const Filter& f) {
    return visit_kind(f, [&](auto kind, const auto& params) {
        if constexpr (requires { kind.whole_image(params); })
            return kind.whole_image(params);
        else
            return false;
    });
}

bool is_per_sample(const Filter& f) {
    // The kinds then.hpp lists (its one statement of which kinds map samples one by one).
    const auto listed = []<class F>(const F&) {
        return std::tuple_size_v<typename then_detail::OpOf<std::uint8_t, F>::type> == 1;
    };
    return std::visit(listed, f) && !whole_image(f);
}

int output_channels(const Filter& f, int channels) {
    return visit_kind(f, [&](auto kind, const auto& params) {
        if constexpr (requires { kind.output_channels(params, channels); })
            return kind.output_channels(params, channels);
        else
            return channels;
    });
}

int opencv_border(BorderMode mode) {
    switch (mode) {
        case BorderMode::reflect101: return cv::BORDER_REFLECT_101;
        case BorderMode::reflect: return cv::BORDER_REFLECT;
        case BorderMode::replicate: return cv::BORDER_REPLICATE;
        case BorderMode::constant: return cv::BORDER_CONSTANT;
        case BorderMode::wrap: return cv::BORDER_WRAP;
    }
    return cv::BORDER_DEFAULT;
}

}  // namespace cbi
