#include "schedules/registry.hpp"

#include <charconv>
#include <stdexcept>

namespace cbi {
namespace {

// A positive decimal integer, the whole string; nullopt-like -1 otherwise
// (also for values past INT_MAX: from_chars reports them out of range).
int parse_positive(std::string_view text) {
    int value = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc{} || ptr != end || value <= 0) return -1;
    return value;
}

[[noreturn]] void bad_params(std::string_view form, std::string_view params, std::string_view why) {
    throw std::invalid_argument("schedule '" + std::string(form) + "': '" + std::string(params) + "' " +
                                std::string(why) + "; valid forms: " + valid_schedule_forms());
}

ScheduleSpec parse_naive(std::string_view params) {
    if (!params.empty()) bad_params("naive", params, "naive takes no parameter");
    return {ScheduleFamily::naive, 0, 0};
}

ScheduleSpec parse_width(ScheduleFamily family, std::string_view form, std::string_view params) {
    const int w = parse_positive(params);
    if (w < 0) bad_params(form, params, "is not a positive integer width");
    return {family, w, 0};
}

ScheduleSpec parse_column(std::string_view p) {
    return parse_width(ScheduleFamily::column, "column:W", p);
}
ScheduleSpec parse_zigzag(std::string_view p) {
    return parse_width(ScheduleFamily::zigzag, "zigzag:W", p);
}

ScheduleSpec parse_size(ScheduleFamily family, std::string_view form, std::string_view params) {
    const auto x = params.find('x');
    if (x == std::string_view::npos) bad_params(form, params, "is not of the form WxH");
    const int w = parse_positive(params.substr(0, x));
    const int h = parse_positive(params.substr(x + 1));
    if (w < 0 || h < 0) bad_params(form, params, "needs two positive integers WxH");
    return {family, w, h};
}

ScheduleSpec parse_tile(std::string_view p) {
    return parse_size(ScheduleFamily::tile, "tile:WxH", p);
}

ScheduleSpec parse_smem(std::string_view p) {
    const ScheduleSpec s = parse_size(ScheduleFamily::smem, "smem:WxH", p);
    // Keeps a tile's staging within the 48 KiB of shared memory every block may use.
    // Each side is bounded before the product, so W*H cannot overflow an int.
    if (s.width > 1024 || s.height > 1024 || s.width * s.height > 4096)
        bad_params("smem:WxH", p, "is too large (W*H at most 4096)");
    return s;
}

ScheduleSpec parse_sep(std::string_view p) {
    const ScheduleSpec s = parse_size(ScheduleFamily::sep, "sep:WxH", p);
    // Shared memory is checked at launch, where the halo is known.
    if (s.width > 1024 || s.height > 1024) bad_params("sep:WxH", p, "is too large (W and H at most 1024)");
    return s;
}

ScheduleSpec parse_stream(std::string_view p) {
    const ScheduleSpec s = parse_size(ScheduleFamily::stream, "stream:WxH", p);
    // A block has one thread per run of samples of the strip's width: W*4/4 threads at most for 4 channels.
    if (s.width > 1024 || s.height > 65536)
        bad_params("stream:WxH", p, "is too large (W at most 1024, H at most 65536)");
    return s;
}

ScheduleSpec parse_vec(std::string_view p) {
    const int n = parse_positive(p);
    if (n != 1 && n != 2 && n != 4 && n != 8 && n != 16)
        bad_params("vec:N", p, "is not a pixel count 1, 2, 4, 8 or 16");
    return {ScheduleFamily::vec, n, 0};
}

constexpr Capabilities kPerPixel{.pointwise = true, .stencil = true, .window = true};
constexpr Capabilities kStagedTile{
    .stencil = true, .fuses_color = true, .fuses_stencil = true, .fuses_blend = true, .takes_order = true};
constexpr Capabilities kStrip{
    .stencil = true, .max_ksize = 9, .fuses_stencil = true, .fuses_blend = true, .takes_order = true};
constexpr Capabilities kRun{.pointwise = true};

constexpr ScheduleEntry registry[] = {
    {"naive", "naive", "thread i computes pixel i in row-major order", "naive", kPerPixel, parse_naive},
    {"column", "column:W",
     "vertical strips W pixels wide, top to bottom, row-major inside (thesis eqs. 4.1-4.6); "
     "the last strip is narrower when W does not divide the width",
     "column:1 column:3 column:8 column:32 column:33 column:4096", kPerPixel, parse_column},
    {"zigzag", "zigzag:W", "as column:W with every odd row of a strip walked right to left (thesis eq. 4.7)",
     "zigzag:1 zigzag:5 zigzag:32 zigzag:4096", kPerPixel, parse_zigzag},
    {"tile", "tile:WxH", "WxH tiles in row-major tile order, row-major inside a tile; edge tiles clipped",
     "tile:1x1 tile:4x3 tile:32x8 tile:16x16 tile:5000x2", kPerPixel, parse_tile},
    {"smem", "smem:WxH",
     "CUDA blocks stage a WxH output tile plus halo in shared memory (coalesced loads) and run the separable "
     "passes there; stencil kinds only; +ORDER sets the order blocks take tiles in",
     "smem:1x1 smem:7x5 smem:32x8 smem:64x16 smem:128x8 smem:32x8+column:2", kStagedTile, parse_smem},
    {"sep", "sep:WxH",
     "CUDA blocks stage a WxH output tile plus halo in shared memory, then each thread computes runs of 8 outputs "
     "from a register window: row sums across x, then column sums down y; box slides running sums (cost independent "
     "of k; integers exact, float within 1e-5 of the direct sum); stencil kinds only; +ORDER "
     "sets the order blocks (CPU: tasks) take tiles in",
     "sep:1x1 sep:7x5 sep:13x40 sep:64x32 sep:128x16 sep:64x32+column:4 sep:13x40+zigzag:3 sep:7x5+tile:2x3",
     kStagedTile, parse_sep},
    {"stream", "stream:WxH",
     "CUDA blocks walk a strip W pixels wide and H rows tall top to bottom; each thread loads its run of 8 samples "
     "(4 for float) plus halo as aligned words and keeps the row sums of the last K rows in a ring (registers for "
     "3x3, its own shared-memory slots above; no barriers); 8-bit images sum columns first, two samples per "
     "32-bit register, each warp a chunk of the row (W sets the warps per block); stencils of square windows up to "
     "9x9; with --fuse-stencils an 8-bit blur or gaussian read only by a stream stencil "
     "(GPU; 1 or 3 channels, both at most 5x5) runs in the same kernel through line buffers, with a colour node before "
     "it; "
     "+ORDER sets the order blocks take strips in",
     "stream:1x1 stream:7x5 stream:13x40 stream:1024x8 stream:128x32 stream:128x32+column:2", kStrip, parse_stream},
    {"vec", "vec:N",
     "each CUDA thread computes N consecutive pixels of a row (N = 1, 2, 4, 8, 16), loading and storing whole aligned "
     "words "
     "(3-channel float colour through shared memory: a warp moves 512 contiguous bytes per instruction); "
     "pointwise kinds and blends only; rows in order",
     "vec:1 vec:2 vec:4 vec:8 vec:16", kRun, parse_vec},
};

// schedule_entry() indexes the table by family.
static_assert(registry[static_cast<int>(ScheduleFamily::naive)].name == "naive");
static_assert(registry[static_cast<int>(ScheduleFamily::column)].name == "column");
static_assert(registry[static_cast<int>(ScheduleFamily::zigzag)].name == "zigzag");
static_assert(registry[static_cast<int>(ScheduleFamily::tile)].name == "tile");
static_assert(registry[static_cast<int>(ScheduleFamily::smem)].name == "smem");
static_assert(registry[static_cast<int>(ScheduleFamily::sep)].name == "sep");
static_assert(registry[static_cast<int>(ScheduleFamily::stream)].name == "stream");
static_assert(registry[static_cast<int>(ScheduleFamily::vec)].name == "vec");

}  // namespace

std::span<const ScheduleEntry> schedule_registry() {
    return registry;
}

std::string valid_schedule_forms() {
    std::string forms;
    for (const auto& e : registry) {
        if (!forms.empty()) forms += ", ";
        forms += e.form;
    }
    return forms;
}

static ScheduleSpec parse_strategy(std::string_view text) {
    const auto colon = text.find(':');
    const auto name = text.substr(0, colon);
    const auto params = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
    for (const auto& e : registry) {
        if (e.name == name) return e.parse_params(params);
    }
    throw std::invalid_argument("unknown schedule '" + std::string(text) + "'; valid forms: " + valid_schedule_forms());
}

ScheduleSpec parse_schedule(std::string_view text) {
    const auto plus = text.find('+');
    ScheduleSpec spec = parse_strategy(text.substr(0, plus));
    if (plus == std::string_view::npos) return spec;
    const std::string_view order_text = text.substr(plus + 1);
    if (!schedule_entry(spec).can.takes_order)
        throw std::invalid_argument("schedule '" + std::string(text) + "': " + std::string(schedule_entry(spec).name) +
                                    " takes no order (+ORDER is for the tile strategies smem, sep and stream)");
    if (order_text.find('+') != std::string_view::npos)
        throw std::invalid_argument("schedule '" + std::string(text) + "': one +ORDER at most");
    const ScheduleSpec order = parse_strategy(order_text);
    switch (order.family) {
        case ScheduleFamily::naive: break;
        case ScheduleFamily::column: spec.order = {order.width, 0, false}; break;
        case ScheduleFamily::zigzag: spec.order = {order.width, 0, true}; break;
        case ScheduleFamily::tile: spec.order = {order.width, order.height, false}; break;
        default:
            throw std::invalid_argument("schedule '" + std::string(text) + "': the order '" + std::string(order_text) +
                                        "' is not naive, column:W, zigzag:W or tile:WxH");
    }
    return spec;
}

std::vector<ScheduleSpec> example_schedules() {
    std::vector<ScheduleSpec> all;
    for (const auto& e : registry) {
        std::string_view rest = e.examples;
        while (!rest.empty()) {
            const auto space = rest.find(' ');
            all.push_back(parse_schedule(rest.substr(0, space)));
            rest = space == std::string_view::npos ? std::string_view{} : rest.substr(space + 1);
        }
    }
    return all;
}

const ScheduleEntry& schedule_entry(const ScheduleSpec& spec) {
    return registry[static_cast<int>(spec.family)];  // the table lists families in enum order
}

namespace {
std::string strategy_string(const ScheduleSpec& s) {
    const auto family = s.family;
    const int width = s.width, height = s.height;
    switch (family) {
        case ScheduleFamily::column: return "column:" + std::to_string(width);
        case ScheduleFamily::zigzag: return "zigzag:" + std::to_string(width);
        case ScheduleFamily::tile: return "tile:" + std::to_string(width) + "x" + std::to_string(height);
        case ScheduleFamily::smem: return "smem:" + std::to_string(width) + "x" + std::to_string(height);
        case ScheduleFamily::sep: return "sep:" + std::to_string(width) + "x" + std::to_string(height);
        case ScheduleFamily::stream: return "stream:" + std::to_string(width) + "x" + std::to_string(height);
        case ScheduleFamily::vec: return "vec:" + std::to_string(width);
        case ScheduleFamily::naive: break;
    }
    return "naive";
}
}  // namespace

std::string ScheduleSpec::to_string() const {
    std::string text = strategy_string(*this);
    if (order.row_major()) return text;
    if (order.height > 0) return text + "+tile:" + std::to_string(order.width) + "x" + std::to_string(order.height);
    return text + (order.zigzag ? "+zigzag:" : "+column:") + std::to_string(order.width);
}

}  // namespace cbi
