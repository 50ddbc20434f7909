#pragma once
// What a filter node is: the filter kind and its parameters (one header per
// kind under filters/kinds/, listed in filters/kinds/all.hpp), the border
// rule and the thread schedule; and the questions every layer asks of a
// filter, answered from the kind list: parse and print, --list-filters,
// which schedules can run it, its output channels.
#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "filters/kinds/all.hpp"
#include "filters/ops.hpp"
#include "schedules/registry.hpp"

namespace cbi {

// The two-input node of a graph: alpha*A + beta*B + gamma per sample, as
// cv::addWeighted (rounded and saturated to the depth). Unsharp masking is
// blend(src, gaussian(src)) with alpha = 1 + amount, beta = -amount.
struct BlendFilter {
    double alpha = 1;
    double beta = 1;
    double gamma = 0;
    friend bool operator==(const BlendFilter&, const BlendFilter&) = default;
};
// "ALPHA:BETA[:GAMMA]"; throws std::invalid_argument.
BlendFilter parse_blend(std::string_view arg);
// Numbers print in the shortest form that reads back bit-identically
// (std::to_chars): "gaussian:5:1.23456789", "blend:1.5:-0.5:0".
std::string to_string(const BlendFilter& b);  // "blend:1.5:-0.5:0"

// A stencil computed inside the stencil node that reads it (fusion through
// shared memory, CUDA only): the filter and its own border rule.
struct FusedStencil {
    Filter filter;
    Border border;
};

struct FilterRun {
    Filter filter;
    Border border;
    ScheduleSpec schedule;
    // Fusion: a colour matrix applied to the node's input as the stencil
    // reads it (the pipeline's colour node, not stored); src is then that
    // colour node's input. Only with stencil filters.
    std::optional<ColorFilter> fused_color{};
    // Fusion of two stencils: this node reads the output of `fused_stencil`,
    // computed in shared memory (smem:WxH, sep:WxH: tile by tile) or line
    // buffers (stream:WxH: strip by strip) and never stored; src is then
    // that stencil's input (through fused_color when set). CUDA only; the
    // schedule is this node's.
    std::optional<FusedStencil> fused_stencil{};
    // A per-sample node (is_per_sample) applied to each sample as this node
    // stores it: the pipeline's next node, not stored on its own.
    std::optional<Filter> then{};
};

// A blend computed in one kernel with the stencils it reads (fusion, CUDA
// stream:WxH): its input a is `a` applied to the kernel's source, or that
// source itself when `a` is empty; b likewise. The stencils run with
// `border` and `schedule` (the stencil nodes', equal); a blend of two
// sources is never fused.
struct BlendRun {
    BlendFilter blend;
    std::optional<Filter> a, b;
    Border border;
    ScheduleSpec schedule;
    std::optional<Filter> then{};  // as FilterRun::then
};

// A compound kind's steps (FilterKind<F>::expand): nodes over the compound
// node's input (kExpansionInput) or an earlier step's output; the last
// step's output is the node's.
inline constexpr int kExpansionInput = -1;
struct ExpansionStep {
    std::variant<Filter, BlendFilter> op;
    std::array<int, 2> inputs{kExpansionInput, kExpansionInput};  // a filter reads inputs[0]; a blend a, b
    // A border the step always takes (adaptive's replicate blur); empty: the
    // compound node's when it has one, else the step kind's default.
    std::optional<Border> border{};
};
struct Expansion {
    std::vector<ExpansionStep> steps;  // empty: the kind's own op computes the node
};

// "reflect101|reflect|replicate|constant[:V]|wrap"; throws std::invalid_argument.
// "constant:max" is OpenCV's morphologyDefaultBorderValue
// (kMorphologyDefaultBorder): erosion reads the depth's maximum, dilation its
// lowest; other kinds read it as the depth's maximum.
Border parse_border(std::string_view arg);

// "NAME[:ARGS]" for any kind (FilterKind<F>::form), the text to_string
// prints and the pipeline language, the CLI flags (--NAME ARGS) and JSON
// use. Throws std::invalid_argument naming the kind and its form, or listing
// the kinds for an unknown name.
Filter parse_filter(std::string_view spec);

std::string to_string(const Filter& f);  // "gaussian:5:1.2"
std::string to_string(const Border& b);  // "constant:7"

// Every kind, in the list's order (--list-filters, Python's functions).
std::span<const FilterKindInfo> filter_kinds();
// The names of the kinds of `category` as "a, b, c or d", for messages.
std::string kind_names(std::optional<Category> category = std::nullopt);

Category category_of(const Filter& f);
// The border a node of `f` takes when none is given: OpenCV's default for
// the function (FilterKind<F>::default_border; reflect101 when it has none).
Border default_border_of(const Filter& f);
// The steps a node of `f` runs as (FilterKind<F>::expand); none for kinds
// whose op computes the node. `per_pixel`: for kernels that compute each
// pixel on its own (CUDA's, the CPU's index-map schedules), else for the
// CPU's row kernels (kinds whose expand takes it split differently there).
Expansion expansion_of(const Filter& f, bool per_pixel = true);
inline bool is_stencil(const Filter& f) {
    return category_of(f) == Category::stencil;
}
// The window a node of `f` reads around each output pixel.
Footprint footprint_of(const Filter& f);

// What a node asks of its schedule beyond the filter: the fusions it runs.
struct Fusion {
    bool color = false;    // a colour node computed in its loads, not stored
    bool stencil = false;  // a stencil computed into it in the same kernel (GPU)
    bool blend = false;    // the blend that reads it computed in the same kernel (GPU)
};

// The one answer to "can `schedule` run this node?", from the registry's
// Capabilities (schedules/registry.hpp); asked by the CLI, graph
// validation, fusion, the tuner, the default table, the tests and the
// benchmarks. Empty when it can; otherwise one line with the reason and the
// schedules that can (a schedule is refused, never silently swapped).
std::string why_unsupported(const ScheduleSpec& schedule, const Filter& filter, const Border& border = {},
                            Fusion fusion = {});
std::string why_unsupported(const ScheduleSpec& schedule, const BlendFilter& blend);
bool supports(const ScheduleSpec& schedule, const Filter& filter, const Border& border = {}, Fusion fusion = {});
bool supports(const ScheduleSpec& schedule, const BlendFilter& blend);
// The same, throwing cbi::Unsupported with that line (the request is well
// formed; this schedule cannot run it, the ones named can).
void check_supports(const ScheduleSpec& schedule, const Filter& filter, const Border& border = {}, Fusion fusion = {});
void check_supports(const ScheduleSpec& schedule, const BlendFilter& blend);

// Why `f` cannot take an input of `depth` and `channels` (the kind's
// refuses_input: adaptive takes 8-bit 1-channel images only), or "".
std::string refuses_input(const Filter& f, Depth depth, int channels);

// Whether `f` maps every sample on its own, all channels alike, with the
// same result wherever it runs (threshold except otsu, scale, gamma): the
// kinds a node can apply as it stores (FilterRun::then).
bool is_per_sample(const Filter& f);

// Whether each output pixel depends on the whole input (the kind's
// whole_image: otsu's level), so that a pipeline cannot run tiled.
bool whole_image(const Filter& f);

// Channels of the node's output for an input with `channels` channels
// (the kind's output_channels; the input's count for kinds without one).
// Throws cbi::Error when the filter cannot take such an input.
int output_channels(const Filter& f, int channels);

}  // namespace cbi
