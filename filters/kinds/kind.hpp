#pragma once
// What every filter kind declares. A kind is one header under
// filters/kinds/ (its parameter struct, its op, and a FilterKind
// specialisation), listed once in filters/kinds/all.hpp; parsing, printing,
// the CLI flags, --list-filters, JSON, the default table, both backends'
// dispatch, the Python functions, the fuzz targets and the test matrix are
// generated from that list. A kind without a FilterKind specialisation, or
// one missing a member, does not compile. docs/adding-a-filter.md is the
// checklist.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "filters/border.hpp"

namespace cbi {

// How a kind reads its input, which decides the schedules that can run it
// (schedules/registry.hpp, Capabilities) and what fuses with it.
enum class Category : std::uint8_t {
    stencil,    // each output sample a separable weighted sum over a window around it
    pointwise,  // each output pixel from the input pixel at the same place
    window,     // each output pixel from a window around it by another rule
                // (morphology, median, bilateral, a 2-D kernel): per-pixel schedules
};
const char* category_name(Category c);  // "stencil", "pointwise", "window"

// A kind that is several nodes (open = erode then dilate; adaptive
// threshold = a blur, a difference, a threshold): the steps it expands to,
// defined in filters/filter.hpp (they hold Filter values). The executor runs
// a node of such a kind as those nodes (pipeline/expand.hpp).
struct Expansion;

// One row of the default table a kind ships (pipeline/defaults.hpp): the
// schedules, fastest first, a node of the kind runs with when it names none,
// for a backend and input format. First match wins within a kind; specific
// rows before general ones. docs/performance.md#default-table says where the
// rows come from.
struct KindDefault {
    bool cuda;
    int max_ksize;  // nodes whose footprint side is at most this (0: any)
    int depth;      // -1: any, else static_cast<int>(Depth)
    int channels;   // of the node's input; 0: any
    std::string_view schedules;
};
inline constexpr int kAnyDepth = -1;

// Which fused stencil pairs (one kernel, the first stencil's output never
// stored) the GPU takes by default for a kind: see fuses_pair_by_default
// (pipeline/defaults.hpp) and docs/performance.md#stencil-pairs.
struct PairFusion {
    bool first = false;          // worth recomputing as the first of a pair
    bool second = false;         // fuses after a kind with `first`
    bool always_second = false;  // fuses after any stencil
};

// The width and height of the window a node reads around each output pixel
// (1x1 for pointwise kinds).
struct Footprint {
    int width = 1;
    int height = 1;
    // Every pass reads one square window (kernels that take K as a template
    // argument need it); Sobel's KSIZE 1 reads 3x1 and 1x3.
    bool square = true;
};

// The primary template is declared only: FilterKind<F> for a type that is
// not a kind is a compile error. A specialisation provides (see
// filters/kinds/laplacian.hpp for a complete one):
//   static constexpr std::string_view name, form, params, help, opencv;
//   static constexpr Category category;
//   static constexpr std::string_view examples[];   // argument texts for tests, fuzzing, benchmarks
//   static constexpr KindDefault defaults[];        // its default-table rows
//   static F parse(std::string_view args);          // text after "name:"; throws std::invalid_argument
//   static std::string args(const F&);              // what parse reads back (may be empty)
//   static Footprint footprint(const F&);
//   static constexpr PairFusion pair_fusion(const F&);   (stencils)
//   template <class T, BorderMode B, class Src> static auto op(const F&, const Src&, const ImageView& dst);   (stencils)
//   template <class T> static auto op(const F&, const ImageView& src, const ImageView& dst);   (pointwise)
//   template <class T> static auto op(const F&, const ImageView& src, const Border&, const ImageView& dst);   (window)
//       an object with operator()(x, y) writing every channel of dst's pixel (x, y); passed by value to
//       CUDA kernels, so trivially copyable and small (a CPU-only op of whole rows, kCpuOnly and rows(),
//       may have none: the kind's expand keeps it from per-pixel kernels)
// and optionally:
//   static int output_channels(const F&, int channels);   // throws cbi::Error for inputs it cannot take
//   static Border default_border(const F&);   // without --border (reflect101 when absent), as OpenCV's function
//   static Expansion expand(const F&);        // compound kinds: the steps; no steps: the kind's own op runs
//   (or expand(const F&, bool per_pixel): steps for per-pixel kernels or the CPU's row kernels)
//   static std::string refuses_input(const F&, Depth, int channels);   // why it cannot take such an image ("" if it can)
//   static bool whole_image(const F&);   // each output pixel depends on the whole input (otsu's level):
//                                        // tiles of an image would not give the whole image's result
template <class F>
struct FilterKind;

// A kind's row in --list-filters, cbi.filter_kinds() and the docs.
struct FilterKindInfo {
    std::string_view name;    // "gaussian"
    std::string_view form;    // "gaussian:K[:SIGMA]"
    std::string_view params;  // keyword names of its arguments, in order: "ksize sigma"
    std::string_view help;    // one line
    std::string_view opencv;  // what it equals in OpenCV
    Category category;
};

}  // namespace cbi
