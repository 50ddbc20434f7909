// cbi-analyze: replay a workload's memory accesses in the order of any
// registered schedule through an LRU cache model; print line fetches and hit
// rates per array beside the thesis' closed forms, and draw the
// spatial-temporal diagram. See apps/analyze/README.md.
#include <cstdio>
#include <exception>
#include <iostream>
#include <map>
#include <new>
#include <string>

#include <CLI/CLI.hpp>

#include "apps/analyze/cache_sim.hpp"
#include "apps/analyze/diagram.hpp"
#include "schedules/registry.hpp"

namespace {

constexpr const char* prog = "cbi-analyze";

struct Options {
    std::string workload = "stencil:7";
    std::string size = "16x16";
    int depth = 0;
    std::string schedule = "naive";
    std::int64_t cache_lines = 24;
    int line = 4;
    int ways = 0;
    cbi::sim::WritePolicy writes = cbi::sim::WritePolicy::bypass;
    std::string png;
    std::string order_png;
    bool parallel = false;
    int warp = 32;
    int block = 256;
    int sms = 4;
    std::int64_t l1_lines = 64;
    std::int64_t l2_lines = 1024;
    std::uint64_t max_accesses = cbi::sim::default_max_accesses;
    bool list_schedules = false;
};

// A usage error: reported as "<option>: <reason>", exit 2.
struct UsageError {
    std::string option;
    std::string reason;
};

int fail(const std::string& where, const std::string& reason, int code) {
    std::string msg = reason;
    for (auto& c : msg)
        if (c == '\n') c = ' ';
    std::cerr << prog << ": error: " << where << ": " << msg << '\n';
    return code;
}

std::pair<int, int> parse_size(const std::string& text) {
    const auto x = text.find('x');
    auto num = [&](const std::string& s) {
        if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return -1;
        const int v = std::stoi(s);
        return v > 0 ? v : -1;
    };
    if (x == std::string::npos) throw UsageError{"--size", "'" + text + "' is not of the form WxH"};
    const int w = num(text.substr(0, x)), h = num(text.substr(x + 1));
    if (w < 0 || h < 0) throw UsageError{"--size", "'" + text + "' needs two positive integers WxH"};
    return {w, h};
}

std::string percent(double r) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * r);
    return buf;
}

std::string pad(const std::string& s, std::size_t n) {
    return s.size() >= n ? s : std::string(n - s.size(), ' ') + s;
}
std::string padr(const std::string& s, std::size_t n) {
    return s.size() >= n ? s : s + std::string(n - s.size(), ' ');
}

void print_predictions(const std::vector<cbi::sim::Prediction>& preds, double simulated, bool parallel) {
    std::cout << "thesis predictions (line fetches of the read arrays; sec. 3.1 assumes LRU, full associativity):\n";
    for (const auto& p : preds) {
        std::cout << "  " << padr(p.equation, 26) << padr(std::string(to_string(p.kind)), 12) << p.formula << '\n';
        std::string verdict;
        using K = cbi::sim::PredictionKind;
        if (p.kind == K::requirement) {
            verdict = p.precondition_holds ? "met" : "NOT met";
        } else {
            char buf[96];
            std::snprintf(buf, sizeof buf, "simulated %.0f (%.2fx)", simulated,
                          p.value > 0 ? simulated / p.value : 0.0);
            verdict = buf;
            if (p.kind == K::upper_bound)
                verdict += simulated <= p.value ? ": within the bound" : ": EXCEEDS the bound";
            if (p.kind == K::lower_bound) verdict += simulated >= p.value ? ": at or above" : ": BELOW (simulator bug)";
            if (parallel) verdict += " [simulated = DRAM fetches]";
        }
        std::cout << "  " << padr("", 38) << verdict << '\n';
        if (!p.precondition.empty() && p.kind != K::lower_bound && p.kind != K::requirement) {
            std::cout << "  " << padr("", 38)
                      << (p.precondition_holds ? "precondition holds: " : "precondition NOT satisfied: ")
                      << p.precondition << '\n';
        }
    }
}

int run(const Options& o) {
    using namespace cbi::sim;
    if (o.list_schedules) {
        for (const auto& e : cbi::schedule_registry()) {
            std::cout << padr(std::string(e.form), 12) << e.description << "\n"
                      << padr("", 12) << "examples: " << e.examples << '\n';
        }
        return 0;
    }
    const auto [width, height] = parse_size(o.size);
    Workload w;
    try {
        w = parse_workload(o.workload, width, height, o.depth);
    } catch (const std::invalid_argument& e) {
        throw UsageError{"--workload", e.what()};
    }
    cbi::ScheduleSpec spec;
    try {
        spec = cbi::parse_schedule(o.schedule);
    } catch (const std::invalid_argument& e) {
        throw UsageError{"--schedule", e.what()};
    }
    const CacheConfig cache{o.line, o.cache_lines, o.ways};
    try {
        validate(cache);
    } catch (const std::invalid_argument& e) {
        throw UsageError{"--cache-lines", e.what()};
    }
    const std::uint64_t total = w.threads() * w.accesses_per_thread();
    if (total > o.max_accesses) {
        throw UsageError{"--size", "replaying " + std::to_string(total) + " accesses exceeds --max-accesses " +
                                       std::to_string(o.max_accesses)};
    }
    if (!o.png.empty()) {
        if (o.parallel) throw UsageError{"--png", "the diagram draws the sequential model; drop --parallel"};
        if (auto why = cbi::analyze::diagram_too_large(w, o.line); !why.empty()) throw UsageError{"--png", why};
    }
    if (!o.order_png.empty() && (width > cbi::analyze::max_order_side || height > cbi::analyze::max_order_side ||
                                 w.width > cbi::analyze::max_order_side || w.height > cbi::analyze::max_order_side)) {
        throw UsageError{"--order-png",
                         "limited to " + std::to_string(cbi::analyze::max_order_side) + " pixels a side"};
    }

    std::cout << "workload: " << w.to_string() << "; schedule " << spec.to_string() << '\n';
    const char* writes = o.writes == WritePolicy::bypass ? "stores bypass the cache" : "stores allocate lines";
    if (!o.parallel) {
        std::cout << "cache:    " << cache.to_string() << "; " << writes << '\n';
        Trace trace;
        ReplayOptions ro{o.writes, o.max_accesses, o.png.empty() ? nullptr : &trace};
        const SimResult r = simulate(w, spec, cache, ro);
        std::cout << padr("array", 8) << pad("accesses", 12) << pad("hits", 12) << pad("fetches", 10)
                  << pad("hit rate", 10) << '\n';
        for (const auto& a : r.arrays) {
            if (a.bypassed == a.accesses && a.accesses > 0) {
                std::cout << padr(a.name, 8) << pad(std::to_string(a.accesses), 12) << pad("-", 12) << pad("-", 10)
                          << "  (stores bypass; --writes allocate to cache them)\n";
                continue;
            }
            std::cout << padr(a.name, 8) << pad(std::to_string(a.accesses), 12) << pad(std::to_string(a.hits), 12)
                      << pad(std::to_string(a.fetches), 10) << pad(percent(a.hit_rate()), 10) << '\n';
        }
        std::cout << "line fetches of the read arrays: " << r.read_fetches() << "; all arrays: " << r.fetches() << '\n';
        print_predictions(predict(w, spec, cache), double(r.read_fetches()), false);
        if (!o.png.empty()) {
            const auto title = w.to_string() + ", " + spec.to_string() + ", " + std::to_string(cache.lines) +
                               " lines of " + std::to_string(cache.line_elems) + ": " +
                               std::to_string(r.read_fetches()) + " fetches";
            cbi::analyze::write_png(o.png, cbi::analyze::render_spacetime(trace, title));
            std::cout << "wrote " << o.png << '\n';
        }
    } else {
        GpuConfig gpu{o.warp, o.block, o.sms, {o.line, o.l1_lines, o.ways}, {o.line, o.l2_lines, o.ways}};
        try {
            validate(gpu.l1);
            validate(gpu.l2);
        } catch (const std::invalid_argument& e) {
            throw UsageError{"--l1-lines/--l2-lines", e.what()};
        }
        std::cout << "gpu model: " << gpu.to_string() << "; " << writes << '\n';
        const ParallelResult r = simulate_parallel(w, spec, gpu, {o.writes, o.max_accesses, nullptr});
        std::cout << padr("array", 8) << pad("accesses", 12) << pad("L1 req", 10) << pad("L1 hit", 9)
                  << pad("L2 req", 10) << pad("L2 hit", 9) << pad("DRAM", 10) << '\n';
        std::uint64_t dram_read = 0;
        for (const auto& a : r.arrays) {
            if (!a.written) dram_read += a.dram_fetches;
            std::cout << padr(a.name, 8) << pad(std::to_string(a.accesses), 12)
                      << pad(std::to_string(a.l1.requests), 10)
                      << pad(a.l1.requests ? percent(a.l1.hit_rate()) : "-", 9)
                      << pad(std::to_string(a.l2.requests), 10)
                      << pad(a.l2.requests ? percent(a.l2.hit_rate()) : "-", 9)
                      << pad(std::to_string(a.dram_fetches), 10) << '\n';
        }
        std::cout << "warp memory instructions: " << r.warp_instructions
                  << "; DRAM fetches of the read arrays: " << dram_read << '\n';
        print_predictions(predict(w, spec, gpu.l1, &gpu), double(dram_read), true);
    }
    if (!o.order_png.empty()) {
        const auto order = visit_order(spec, w.width, w.height);
        const auto title = spec.to_string() + " on " + std::to_string(w.width) + "x" + std::to_string(w.height) +
                           ": first (dark) to last (yellow)";
        cbi::analyze::write_png(o.order_png, cbi::analyze::render_order(order, w.width, w.height, title));
        std::cout << "wrote " << o.order_png << '\n';
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"Cache simulation of cbi thread schedules (thesis section 3.2)", prog};
    app.set_version_flag("--version", "cbi-analyze 0.1.0");
    app.add_option("--workload", o.workload, "stencil:K | matmul | matmul:N | matmul:MxNxK | color | color:C")
        ->capture_default_str();
    app.add_option("--size", o.size, "image (or C) size WxH")->capture_default_str();
    app.add_option("--depth", o.depth, "matmul depth K for plain 'matmul' (default: the width)");
    app.add_option("--schedule", o.schedule, "a registered schedule, see --list-schedules")->capture_default_str();
    app.add_option("--cache-lines", o.cache_lines, "cache size in lines (M_l)")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    app.add_option("--line", o.line, "line size in elements (L)")->check(CLI::Range(1, 1 << 20))->capture_default_str();
    app.add_option("--ways", o.ways, "set associativity, 0 = fully associative")
        ->check(CLI::Range(0, 1 << 20))
        ->capture_default_str();
    const std::map<std::string, cbi::sim::WritePolicy> policies{{"bypass", cbi::sim::WritePolicy::bypass},
                                                                {"allocate", cbi::sim::WritePolicy::allocate}};
    app.add_option("--writes", o.writes, "stores: bypass (the thesis ignores them) or allocate")
        ->transform(CLI::CheckedTransformer(policies, CLI::ignore_case));
    app.add_option("--png", o.png, "write the spatial-temporal diagram to this PNG");
    app.add_option("--order-png", o.order_png, "write the visit-order view to this PNG");
    app.add_flag("--parallel", o.parallel, "GPU-like model: warps, blocks round-robin on SMs, L1 per SM, shared L2");
    app.add_option("--warp", o.warp, "lanes per warp")->check(CLI::Range(1, 1024))->capture_default_str();
    app.add_option("--block", o.block, "threads per block")->check(CLI::Range(1, 4096))->capture_default_str();
    app.add_option("--sms", o.sms, "multiprocessors")->check(CLI::Range(1, 4096))->capture_default_str();
    app.add_option("--l1-lines", o.l1_lines, "L1 lines per SM")->check(CLI::PositiveNumber)->capture_default_str();
    app.add_option("--l2-lines", o.l2_lines, "shared L2 lines")->check(CLI::PositiveNumber)->capture_default_str();
    app.add_option("--max-accesses", o.max_accesses, "refuse replays longer than this")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    app.add_flag("--list-schedules", o.list_schedules, "list the registered schedules and exit");

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ExtrasError& e) {
        return fail("arguments", e.what(), 2);
    } catch (const CLI::ParseError& e) {
        // CLI11 names the option first ("--line: Value 0 not in range ...").
        const std::string what = e.what();
        const auto colon = what.find(": ");
        if (what.rfind("--", 0) == 0 && colon != std::string::npos)
            return fail(what.substr(0, colon), what.substr(colon + 2), 2);
        return fail("options", what, 2);
    }
    try {
        return run(o);
    } catch (const UsageError& e) {
        return fail(e.option, e.reason, 2);
    } catch (const std::bad_alloc&) {
        return fail("memory", "out of memory", 1);
    } catch (const std::invalid_argument& e) {  // sizes the checks above let through
        return fail("--workload", e.what(), 2);
    } catch (const std::logic_error& e) {  // a schedule that is not a bijection
        return fail("--schedule", e.what(), 1);
    } catch (const std::runtime_error& e) {  // PNG writing: the message starts with the path
        const std::string what = e.what();
        const auto colon = what.find(": ");
        return colon == std::string::npos ? fail("output", what, 1)
                                          : fail(what.substr(0, colon), what.substr(colon + 2), 1);
    } catch (const std::exception& e) {
        return fail("internal", e.what(), 1);
    }
}
