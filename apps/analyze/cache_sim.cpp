#include "apps/analyze/cache_sim.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>

namespace cbi::sim {
namespace {

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) {
    return (a + b - 1) / b;
}

std::string num(double v) {
    // Integers print without a fraction; the formulas here are all integral.
    auto s = std::to_string(static_cast<long long>(v));
    return s;
}

int parse_int(std::string_view text) {
    int value = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc{} || ptr != end || value <= 0) return -1;
    return value;
}

void check_positive(const char* what, long long v) {
    if (v <= 0) throw std::invalid_argument(std::string(what) + " must be positive, got " + std::to_string(v));
}

void validate(const Workload& w) {
    check_positive("width", w.width);
    check_positive("height", w.height);
    if (w.threads() > max_schedulable_pixels)
        throw std::invalid_argument("size " + std::to_string(w.width) + "x" + std::to_string(w.height) +
                                    " exceeds 2^32-1 threads");
    switch (w.kind) {
        case WorkloadKind::stencil:
            if (w.stencil < 1 || w.stencil % 2 == 0 || w.stencil > 255)
                throw std::invalid_argument("stencil size must be odd, 1..255, got " + std::to_string(w.stencil));
            break;
        case WorkloadKind::matmul:
            if (w.depth < 1 || w.depth > (1 << 20))
                throw std::invalid_argument("matmul depth must be 1..2^20, got " + std::to_string(w.depth));
            break;
        case WorkloadKind::color:
            if (w.channels != 3 && w.channels != 4)
                throw std::invalid_argument("color channels must be 3 or 4, got " + std::to_string(w.channels));
            break;
    }
}

// Row-major orders: naive, and column/tile strips at least as wide as the
// image (zigzag reverses rows, so it is not one).
bool row_major(const ScheduleSpec& s, int width) {
    switch (s.family) {
        case ScheduleFamily::naive:
        case ScheduleFamily::vec: return true;
        case ScheduleFamily::column:
        case ScheduleFamily::tile:
        case ScheduleFamily::smem:
        case ScheduleFamily::sep:
        case ScheduleFamily::stream: return s.width >= width;
        case ScheduleFamily::zigzag: return false;
    }
    return false;
}

void check_bijection(std::vector<bool>& seen, Pixel p, int width, int height, std::uint64_t i) {
    if (p.x < 0 || p.y < 0 || p.x >= width || p.y >= height)
        throw std::logic_error("schedule maps thread " + std::to_string(i) + " outside the image");
    const std::uint64_t k = std::uint64_t(p.y) * width + p.x;
    if (seen[k]) throw std::logic_error("schedule visits pixel twice at thread " + std::to_string(i));
    seen[k] = true;
}

void check_cap(const Workload& w, std::uint64_t max_accesses) {
    const std::uint64_t total = w.threads() * w.accesses_per_thread();
    if (total > max_accesses)
        throw std::invalid_argument("replay of " + std::to_string(total) + " accesses exceeds the cap of " +
                                    std::to_string(max_accesses));
}

}  // namespace

// ---- cache -------------------------------------------------------------------

std::string CacheConfig::to_string() const {
    std::string s = std::to_string(lines) + " lines x " + std::to_string(line_elems) + " elements, ";
    s += ways == 0 ? "fully associative" : std::to_string(ways) + "-way set associative";
    return s + ", LRU";
}

void validate(const CacheConfig& c) {
    check_positive("line size", c.line_elems);
    check_positive("cache lines", c.lines);
    if (c.lines > (std::int64_t(1) << 30)) throw std::invalid_argument("cache lines must be at most 2^30");
    if (c.ways < 0) throw std::invalid_argument("associativity must be >= 0");
    if (c.ways > 0 && c.lines % c.ways != 0)
        throw std::invalid_argument("cache lines (" + std::to_string(c.lines) + ") must be a multiple of the ways (" +
                                    std::to_string(c.ways) + ")");
}

LruCache::LruCache(const CacheConfig& config) : config_(config) {
    validate(config);
    ways_ = config.ways == 0 ? config.lines : config.ways;
    sets_ = config.lines / ways_;
    head_.assign(sets_, -1);
    tail_.assign(sets_, -1);
    count_.assign(sets_, 0);
    nodes_.reserve(static_cast<std::size_t>(std::min<std::int64_t>(config.lines, 1 << 20)));
}

void LruCache::unlink(std::int64_t n) {
    Node& node = nodes_[n];
    const std::int64_t set = static_cast<std::int64_t>(node.line % sets_);
    if (node.prev >= 0)
        nodes_[node.prev].next = node.next;
    else
        head_[set] = node.next;
    if (node.next >= 0)
        nodes_[node.next].prev = node.prev;
    else
        tail_[set] = node.prev;
}

void LruCache::push_front(std::int64_t set, std::int64_t n) {
    nodes_[n].prev = -1;
    nodes_[n].next = head_[set];
    if (head_[set] >= 0)
        nodes_[head_[set]].prev = n;
    else
        tail_[set] = n;
    head_[set] = n;
}

bool LruCache::access(std::uint64_t line) {
    const std::int64_t set = static_cast<std::int64_t>(line % sets_);
    if (auto it = where_.find(line); it != where_.end()) {
        unlink(it->second);
        push_front(set, it->second);
        return true;
    }
    std::int64_t n;
    if (count_[set] == ways_) {  // evict the set's least recently used line
        n = tail_[set];
        unlink(n);
        where_.erase(nodes_[n].line);
    } else {
        n = static_cast<std::int64_t>(nodes_.size());
        nodes_.push_back({});
        ++count_[set];
        ++size_;
    }
    nodes_[n].line = line;
    push_front(set, n);
    where_.emplace(line, n);
    return false;
}

bool LruCache::contains(std::uint64_t line) const {
    return where_.count(line) != 0;
}

std::vector<std::uint64_t> LruCache::resident() const {
    std::vector<std::uint64_t> lines;
    lines.reserve(size_);
    for (const auto& [line, node] : where_) lines.push_back(line);
    std::sort(lines.begin(), lines.end());
    return lines;
}

// ---- workloads ---------------------------------------------------------------

std::uint64_t Workload::accesses_per_thread() const {
    switch (kind) {
        case WorkloadKind::stencil: return std::uint64_t(stencil) * stencil + 1;
        case WorkloadKind::matmul: return 2 * std::uint64_t(depth) + 1;
        case WorkloadKind::color: return std::uint64_t(channels) + 3;
    }
    return 0;
}

std::string Workload::to_string() const {
    const auto wh = std::to_string(width) + "x" + std::to_string(height);
    switch (kind) {
        case WorkloadKind::stencil:
            return "stencil " + std::to_string(stencil) + "x" + std::to_string(stencil) + " (clamped border) on a " +
                   wh + " input";
        case WorkloadKind::matmul:
            return "matmul C(" + std::to_string(height) + "x" + std::to_string(width) + ") = A(" +
                   std::to_string(height) + "x" + std::to_string(depth) + ") B(" + std::to_string(depth) + "x" +
                   std::to_string(width) + ")";
        case WorkloadKind::color:
            return "color matrix on a " + wh + " image of " + std::to_string(channels) + " interleaved channels";
    }
    return {};
}

Workload parse_workload(std::string_view text, int width, int height, int depth) {
    const auto colon = text.find(':');
    const auto name = text.substr(0, colon);
    const auto params = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
    const bool has_params = colon != std::string_view::npos;
    Workload w;
    w.width = width;
    w.height = height;
    if (name == "stencil") {
        w.kind = WorkloadKind::stencil;
        w.stencil = has_params ? parse_int(params) : 3;
        if (w.stencil < 0)
            throw std::invalid_argument("stencil:K needs a positive odd K, got '" + std::string(params) + "'");
    } else if (name == "matmul") {
        w.kind = WorkloadKind::matmul;
        w.depth = depth > 0 ? depth : width;
        if (has_params) {
            // matmul:N (square) or matmul:MxNxK (C is MxN, depth K).
            std::vector<int> v;
            std::string_view rest = params;
            for (;;) {
                const auto x = rest.find('x');
                v.push_back(parse_int(rest.substr(0, x)));
                if (x == std::string_view::npos) break;
                rest = rest.substr(x + 1);
            }
            const bool ok =
                (v.size() == 1 || v.size() == 3) && std::all_of(v.begin(), v.end(), [](int n) { return n > 0; });
            if (!ok)
                throw std::invalid_argument("matmul takes N or MxNxK (positive integers), got '" + std::string(params) +
                                            "'");
            if (v.size() == 1) {
                w.width = w.height = w.depth = v[0];
            } else {
                w.height = v[0];
                w.width = v[1];
                w.depth = v[2];
            }
        }
    } else if (name == "color") {
        w.kind = WorkloadKind::color;
        w.channels = has_params ? parse_int(params) : 3;
    } else {
        throw std::invalid_argument("unknown workload '" + std::string(text) +
                                    "'; valid forms: stencil:K, matmul, matmul:N, matmul:MxNxK, color, color:C");
    }
    validate(w);
    return w;
}

std::vector<ArrayInfo> layout(const Workload& w, int line_elems) {
    std::vector<ArrayInfo> arrays;
    const std::uint64_t pixels = w.threads();
    auto add = [&](std::string name, std::uint64_t elems, int row, bool written) {
        std::uint64_t base = 0;
        if (!arrays.empty()) {
            base = ceil_div(arrays.back().base + arrays.back().elems, line_elems) * line_elems;
        }
        arrays.push_back({std::move(name), base, elems, row, written});
    };
    switch (w.kind) {
        case WorkloadKind::stencil:
            add("input", pixels, w.width, false);
            add("output", pixels, w.width, true);
            break;
        case WorkloadKind::matmul:
            add("A", std::uint64_t(w.height) * w.depth, w.depth, false);
            add("B", std::uint64_t(w.depth) * w.width, w.width, false);
            add("C", pixels, w.width, true);
            break;
        case WorkloadKind::color:
            add("input", pixels * w.channels, w.width * w.channels, false);
            add("output", pixels * 3, w.width * 3, true);
            break;
    }
    return arrays;
}

// ---- results -----------------------------------------------------------------

double ArrayStats::hit_rate() const {
    const std::uint64_t cached = accesses - bypassed;
    return cached == 0 ? 0.0 : double(hits) / double(cached);
}

std::uint64_t SimResult::fetches() const {
    std::uint64_t f = 0;
    for (const auto& a : arrays) f += a.fetches;
    return f;
}

std::uint64_t SimResult::read_fetches() const {
    std::uint64_t f = 0;
    for (const auto& a : arrays) f += a.written ? 0 : a.fetches;
    return f;
}

double LevelStats::hit_rate() const {
    return requests == 0 ? 0.0 : double(hits) / double(requests);
}

// ---- sequential model ---------------------------------------------------------

std::vector<Pixel> visit_order(const ScheduleSpec& schedule, int width, int height) {
    check_positive("width", width);
    check_positive("height", height);
    const std::uint64_t n = std::uint64_t(width) * std::uint64_t(height);
    if (n > max_schedulable_pixels) throw std::invalid_argument("image exceeds 2^32-1 pixels");
    std::vector<Pixel> order(n);
    std::vector<bool> seen(n, false);
    with_schedule(schedule, [&](const auto& s) {
        for (std::uint64_t i = 0; i < n; ++i) {
            order[i] = s.map(static_cast<std::uint32_t>(i), width, height);
            check_bijection(seen, order[i], width, height, i);
        }
    });
    return order;
}

SimResult simulate(const Workload& w, const ScheduleSpec& schedule, const CacheConfig& cache,
                   const ReplayOptions& options) {
    validate(w);
    check_cap(w, options.max_accesses);
    LruCache lru(cache);
    const auto arrays = layout(w, cache.line_elems);
    const std::uint64_t L = static_cast<std::uint64_t>(cache.line_elems);

    SimResult result;
    for (const auto& a : arrays) result.arrays.push_back({a.name, a.written});
    if (options.trace) {
        options.trace->arrays = arrays;
        options.trace->line_elems = cache.line_elems;
        options.trace->threads.clear();
        options.trace->threads.reserve(w.threads());
    }

    const std::uint64_t n = w.threads();
    std::vector<bool> seen(n, false);
    with_schedule(schedule, [&](const auto& s) {
        for (std::uint64_t i = 0; i < n; ++i) {
            const Pixel p = s.map(static_cast<std::uint32_t>(i), w.width, w.height);
            check_bijection(seen, p, w.width, w.height, i);
            ThreadRecord* rec = nullptr;
            if (options.trace) {
                options.trace->threads.push_back({p, {}, {}, {}});
                rec = &options.trace->threads.back();
            }
            for_each_access(w, arrays, p, [&](int array, std::uint64_t address, bool write) {
                ArrayStats& st = result.arrays[array];
                ++st.accesses;
                if (rec) rec->accessed.push_back(address);
                if (write && options.writes == WritePolicy::bypass) {
                    ++st.bypassed;
                    return;
                }
                if (lru.access(address / L)) {
                    ++st.hits;
                } else {
                    ++st.fetches;
                    if (rec) rec->fetched.push_back(address / L);
                }
            });
            if (rec) rec->resident = lru.resident();
        }
    });
    return result;
}

// ---- parallel model -------------------------------------------------------------

std::string GpuConfig::to_string() const {
    return "warps of " + std::to_string(warp) + ", blocks of " + std::to_string(block) + " threads on " +
           std::to_string(sms) + " SMs; L1 per SM " + l1.to_string() + "; shared L2 " + l2.to_string();
}

ParallelResult simulate_parallel(const Workload& w, const ScheduleSpec& schedule, const GpuConfig& gpu,
                                 const ReplayOptions& options) {
    validate(w);
    check_cap(w, options.max_accesses);
    check_positive("warp size", gpu.warp);
    check_positive("block size", gpu.block);
    check_positive("SM count", gpu.sms);
    if (gpu.sms > 4096) throw std::invalid_argument("SM count must be at most 4096");
    if (gpu.block > 4096) throw std::invalid_argument("block size must be at most 4096");
    if (gpu.l1.line_elems != gpu.l2.line_elems) throw std::invalid_argument("L1 and L2 must use the same line size");
    validate(gpu.l1);
    validate(gpu.l2);

    const std::uint64_t L = static_cast<std::uint64_t>(gpu.l1.line_elems);
    const auto arrays = layout(w, gpu.l1.line_elems);
    std::vector<LruCache> l1(gpu.sms, LruCache(gpu.l1));
    LruCache l2(gpu.l2);

    ParallelResult result;
    for (const auto& a : arrays) {
        ParallelArrayStats st;
        st.name = a.name;
        st.written = a.written;
        result.arrays.push_back(st);
    }

    const std::uint64_t n = w.threads();
    const std::uint64_t B = static_cast<std::uint64_t>(gpu.block);
    const std::uint64_t blocks = ceil_div(n, B);
    const std::uint64_t rounds = ceil_div(blocks, gpu.sms);
    const std::uint64_t warps_per_block = ceil_div(B, gpu.warp);
    const auto instrs = static_cast<std::uint32_t>(w.accesses_per_thread());

    struct LineReq {
        int array;
        std::uint64_t line;
        bool write;
    };
    std::vector<LineReq> reqs;
    std::vector<bool> seen(n, false);
    std::vector<Pixel> lane_pixel(gpu.warp);

    with_schedule(schedule, [&](const auto& s) {
        for (std::uint64_t r = 0; r < rounds; ++r) {
            for (std::uint32_t m = 0; m < instrs; ++m) {
                for (std::uint64_t wb = 0; wb < warps_per_block; ++wb) {
                    for (int sm = 0; sm < gpu.sms; ++sm) {
                        const std::uint64_t b = r * gpu.sms + sm;
                        if (b >= blocks) continue;
                        // Coalesce the warp's m-th access into distinct lines, lane order.
                        reqs.clear();
                        for (int lane = 0; lane < gpu.warp; ++lane) {
                            const std::uint64_t in_block = wb * gpu.warp + lane;
                            const std::uint64_t t = b * B + in_block;
                            if (in_block >= B || t >= n) break;
                            const Pixel p = s.map(static_cast<std::uint32_t>(t), w.width, w.height);
                            if (m == 0) check_bijection(seen, p, w.width, w.height, t);
                            const Access a = access_at(w, arrays, p, m);
                            ++result.arrays[a.array].accesses;
                            const std::uint64_t line = a.address / L;
                            const bool dup =
                                std::any_of(reqs.begin(), reqs.end(), [&](const LineReq& q) { return q.line == line; });
                            if (!dup) reqs.push_back({a.array, line, a.write});
                        }
                        if (reqs.empty()) continue;
                        ++result.warp_instructions;
                        for (const auto& q : reqs) {
                            ParallelArrayStats& st = result.arrays[q.array];
                            if (!q.write) {
                                ++st.l1.requests;
                                if (l1[sm].access(q.line)) {
                                    ++st.l1.hits;
                                    continue;
                                }
                            } else if (options.writes == WritePolicy::bypass) {
                                continue;  // stores stream past both levels
                            }
                            ++st.l2.requests;
                            if (l2.access(q.line))
                                ++st.l2.hits;
                            else
                                ++st.dram_fetches;
                        }
                    }
                }
            }
        }
    });
    return result;
}

// ---- predictions ------------------------------------------------------------------

std::string_view to_string(PredictionKind kind) {
    switch (kind) {
        case PredictionKind::lower_bound: return "lower bound";
        case PredictionKind::upper_bound: return "upper bound";
        case PredictionKind::estimate: return "estimate";
        case PredictionKind::requirement: return "requirement";
    }
    return "";
}

std::vector<Prediction> predict(const Workload& w, const ScheduleSpec& schedule, const CacheConfig& cache,
                                const GpuConfig* gpu) {
    validate(w);
    validate(cache);
    std::vector<Prediction> out;
    const std::uint64_t L = static_cast<std::uint64_t>(cache.line_elems);
    const std::uint64_t M = static_cast<std::uint64_t>(cache.lines);
    const std::uint64_t Iw = static_cast<std::uint64_t>(w.width);
    const std::uint64_t Ih = static_cast<std::uint64_t>(w.height);
    const std::string have = " (cache: " + std::to_string(M) + " lines)";
    auto needs = [&](const std::string& what, std::uint64_t lines) {
        return what + " = " + std::to_string(lines) + have;
    };

    // Compulsory misses in our layout: every line of every read array once.
    std::uint64_t compulsory = 0;
    for (const auto& a : layout(w, cache.line_elems)) {
        if (!a.written) compulsory += ceil_div(a.base + a.elems, L) - a.base / L;
    }
    out.push_back({"compulsory", PredictionKind::lower_bound, "every line of the read arrays once = " + num(compulsory),
                   double(compulsory), "equals the simulation when nothing is evicted before its last use", true});

    const bool fa_note = cache.ways != 0;  // the thesis assumes full associativity (sec. 3.1)
    auto add = [&](Prediction p) {
        if (fa_note && !p.precondition.empty()) p.precondition += "; thesis assumes full associativity";
        out.push_back(std::move(p));
    };

    if (w.kind == WorkloadKind::stencil) {
        const std::uint64_t S = static_cast<std::uint64_t>(w.stencil);  // S_w = S_h
        if (row_major(schedule, w.width)) {
            const std::uint64_t row_lines = ceil_div(Iw + S, L);
            const std::uint64_t need = row_lines * S;  // eq. 3.2
            const bool ok = M >= need;
            const std::string pre = "eq. 3.2: M_l >= ceil((Iw+Sw)/L) Sh";
            add({"eq. 3.2 ideal", PredictionKind::estimate,
                 "F = ceil((Iw+Sw)/L) Ih = " + num(row_lines) + "*" + num(Ih) + " = " + num(row_lines * Ih),
                 double(row_lines * Ih), needs(pre, need), ok});
            // The worst case counts each input row once per output row; that
            // silently assumes one thread's window survives along the row.
            const std::uint64_t window = S * (ceil_div(S - 1, L) + 1);
            add({"eq. 3.2 worst", PredictionKind::upper_bound,
                 "F <= ceil((Iw+Sw)/L) Ih Sh = " + num(row_lines) + "*" + num(Ih) + "*" + num(S) + " = " +
                     num(row_lines * Ih * S),
                 double(row_lines * Ih * S), needs("implicit: one thread's window Sh*(ceil((Sw-1)/L)+1)", window),
                 M >= window});
        }
        if (schedule.family == ScheduleFamily::column || schedule.family == ScheduleFamily::zigzag) {
            const std::uint64_t c = std::min<std::uint64_t>(schedule.width, Iw);
            const std::uint64_t strips = ceil_div(Iw, c), lines = ceil_div(c + S, L);
            const std::uint64_t f = strips * lines * (Ih + S);
            add({"eq. 4.8", PredictionKind::upper_bound,
                 "F <= ceil(Iw/c) ceil((c+Sw)/L) (Ih+Sh) = " + num(strips) + "*" + num(lines) + "*" + num(Ih + S) +
                     " = " + num(f),
                 double(f), needs("eq. 3.3 with t=c: M_l >= ceil((c+Sw)/L) Sh", lines * S), M >= lines * S});
        }
        // smem, sep and stream are modelled by their visit order, tile:WxH; the
        // shared-memory staging and register rings they use on the GPU are not simulated.
        const bool tiled = schedule.family == ScheduleFamily::tile || schedule.family == ScheduleFamily::smem ||
                           schedule.family == ScheduleFamily::sep || schedule.family == ScheduleFamily::stream;
        if (tiled && !row_major(schedule, w.width)) {
            const std::uint64_t tw = std::min<std::uint64_t>(schedule.width, Iw);
            const std::uint64_t th = std::min<std::uint64_t>(schedule.height, Ih);
            const std::uint64_t lines = ceil_div(tw + S, L);
            const std::uint64_t f = ceil_div(Iw, tw) * lines * ceil_div(Ih, th) * (th + S);
            add({"eq. 3.5", PredictionKind::upper_bound,
                 "F <= ceil(Iw/tw) ceil((tw+Sw)/L) ceil(Ih/th) (th+Sh) = " + num(ceil_div(Iw, tw)) + "*" + num(lines) +
                     "*" + num(ceil_div(Ih, th)) + "*" + num(th + S) + " = " + num(f) +
                     (tw != th ? " (eq. 3.5 generalised to tw x th tiles)" : ""),
                 double(f), needs("eq. 3.3: M_l >= ceil((t+Sw)/L) Sh", lines * S), M >= lines * S});
        }
        if (gpu) {
            const std::uint64_t W = static_cast<std::uint64_t>(gpu->warp);
            const std::uint64_t one = ceil_div(W + S, L) * S, two = ceil_div(W + 2 * S, L) * S;
            add({"sec. 3.3.1 warp, one row", PredictionKind::requirement,
                 "ceil((32+Sw)/L) Sh = " + num(one) + " L1 lines", double(one), needs("L1 holds it", one), M >= one});
            add({"sec. 3.3.1 warp, two rows", PredictionKind::requirement,
                 "ceil((32+2Sw)/L) Sh = " + num(two) + " L1 lines", double(two), needs("L1 holds it", two), M >= two});
        }
    } else if (w.kind == WorkloadKind::matmul) {
        const std::uint64_t D = static_cast<std::uint64_t>(w.depth);
        const std::uint64_t a_row = ceil_div(D, L);
        if (row_major(schedule, w.width)) {
            const std::uint64_t need36 = a_row + D;
            const bool ok36 = M > need36;
            add({"eq. 3.7", PredictionKind::estimate,
                 "F ~ ceil(D/L) Ih + D Iw Ih = " + num(a_row) + "*" + num(Ih) + " + " + num(D) + "*" + num(Iw) + "*" +
                     num(Ih) + " = " + num(a_row * Ih + D * Iw * Ih),
                 double(a_row * Ih + D * Iw * Ih), "eq. 3.6: M_l > ceil(D/L) + D = " + num(need36) + have, ok36});
            add({"eq. 3.8", PredictionKind::estimate,
                 "F ~ (ceil(D/L) + D) Iw Ih = " + num(a_row + D) + "*" + num(Iw) + "*" + num(Ih) + " = " +
                     num((a_row + D) * Iw * Ih),
                 double((a_row + D) * Iw * Ih), "eq. 3.6 not satisfied: M_l <= " + num(need36) + have, !ok36});
            const std::uint64_t need39 = a_row + ceil_div(Iw * D, L);
            add({"eq. 3.10", PredictionKind::estimate,
                 "F ~ ceil(D/L) Ih + ceil(Iw/L) D = " + num(a_row) + "*" + num(Ih) + " + " + num(ceil_div(Iw, L)) +
                     "*" + num(D) + " = " + num(a_row * Ih + ceil_div(Iw, L) * D),
                 double(a_row * Ih + ceil_div(Iw, L) * D),
                 "eq. 3.9: M_l > ceil(D/L) + ceil(Iw D/L) = " + num(need39) + have, M > need39});
        }
        if (schedule.family == ScheduleFamily::column || schedule.family == ScheduleFamily::zigzag) {
            const std::uint64_t c = std::min<std::uint64_t>(schedule.width, Iw);
            // Written there as ceil(Iw/L) + Ih ceil(c/L) for square matrices:
            // one row of A plus the c-wide strip of B's D rows.
            const std::uint64_t need = a_row + D * ceil_div(c, L);
            add({"sec. 4.4", PredictionKind::requirement,
                 "M_l = ceil(D/L) + D ceil(c/L) = " + num(a_row) + " + " + num(D) + "*" + num(ceil_div(c, L)) + " = " +
                     num(need) + " lines (no fetch formula in the thesis)",
                 double(need), needs("cache holds it", need), M >= need});
        }
    }
    return out;
}

}  // namespace cbi::sim
