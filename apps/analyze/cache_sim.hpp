#pragma once
// Cache simulation of thread schedules (thesis section 3.2): replay the memory
// accesses of a workload in the order a registered schedule visits the
// pixels, through an LRU cache, and count line fetches and hits per array.
// Plain C++: no OpenCV, no TBB. Deterministic: same inputs, same counts.
//
// Two models:
//  - sequential (the thesis' model): one thread after the other in schedule
//    order, each thread's accesses in program order, one cache;
//  - parallel (GPU-like): warps of 32 lanes coalesce each memory instruction
//    into distinct lines; blocks of B threads are dealt round-robin to S
//    multiprocessors, each with its own L1, all sharing one L2.
//
// Memory layout: every array is dense and row-major (pitch = row width, as
// cudaMalloc'd buffers in listings 3 and 4), arrays lie one after the other,
// each starting on a line boundary. Addresses are in elements, not bytes.
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "schedules/registry.hpp"

namespace cbi::sim {

// ---- cache model -----------------------------------------------------------

struct CacheConfig {
    int line_elems = 4;       // L: elements per line
    std::int64_t lines = 24;  // M_l: lines in the cache
    int ways = 0;             // set associativity; 0 = fully associative (the thesis' assumption)
    std::string to_string() const;
};

// Throws std::invalid_argument when the geometry is impossible.
void validate(const CacheConfig& config);

// An LRU cache of line numbers. With ways > 0, line n lives in set n % sets.
class LruCache {
public:
    explicit LruCache(const CacheConfig& config);
    // Looks up `line`; on a miss inserts it, evicting the set's LRU line.
    // Returns true on a hit.
    bool access(std::uint64_t line);
    bool contains(std::uint64_t line) const;
    // Resident lines, ascending.
    std::vector<std::uint64_t> resident() const;
    std::size_t size() const { return size_; }
    const CacheConfig& config() const { return config_; }

private:
    // One set: lines ordered most recently used first. Sets are small
    // (or one, fully associative), so eviction pops the back of a list and
    // lookups go through one hash map for the whole cache.
    struct Node {
        std::uint64_t line;
        std::int64_t prev;
        std::int64_t next;
    };
    void unlink(std::int64_t node);
    void push_front(std::int64_t set, std::int64_t node);

    CacheConfig config_;
    std::int64_t sets_ = 1;
    std::int64_t ways_ = 0;
    std::vector<Node> nodes_;                                // pool, one node per cache line
    std::vector<std::int64_t> head_, tail_;                  // per set, -1 when empty
    std::vector<std::int64_t> count_;                        // lines held per set
    std::unordered_map<std::uint64_t, std::int64_t> where_;  // line -> node
    std::size_t size_ = 0;
};

// How stores are treated. The thesis ignores the output ("writing does not
// block any further instructions"), which is `bypass`: stores are counted
// but never occupy a line. `allocate` is write-allocate (GPU L2 behaviour).
enum class WritePolicy { bypass, allocate };

// ---- workloads --------------------------------------------------------------

enum class WorkloadKind { stencil, matmul, color };

// stencil:K   K x K footprint over a width x height input, border clamped as in
//             thesis listing 3 (reads stay inside the image), one output.
// matmul      C = A B, C is height (M) x width (N), A is M x depth (K),
//             B is K x N; thread (x = column j, y = row i) computes c_ij as
//             listing 4: for k: a[i][k], b[k][j]; then writes c[i][j].
// color:C     a 3x4 colour matrix on interleaved pixels of C channels
//             (3 or 4): each thread reads its pixel's channels, writes 3.
struct Workload {
    WorkloadKind kind = WorkloadKind::stencil;
    int width = 16;    // image width, or N (columns of C)
    int height = 16;   // image height, or M (rows of C)
    int stencil = 7;   // K for stencil
    int depth = 16;    // K for matmul
    int channels = 3;  // C for color
    std::string to_string() const;
    std::uint64_t threads() const { return std::uint64_t(width) * std::uint64_t(height); }
    std::uint64_t accesses_per_thread() const;
};

// Parses "stencil:K", "matmul", "matmul:N", "matmul:MxNxK", "color", "color:C".
// `width`/`height` come from --size (ignored by matmul:N and matmul:MxNxK);
// `depth` <= 0 means "same as width" for plain "matmul".
// Throws std::invalid_argument with a one-line reason.
Workload parse_workload(std::string_view text, int width, int height, int depth = 0);

struct ArrayInfo {
    std::string name;        // "input", "output", "A", "B", "C"
    std::uint64_t base = 0;  // first element address, line-aligned
    std::uint64_t elems = 0;
    int row_elems = 0;  // pitch, for the diagram's labels
    bool written = false;
};

// The arrays of a workload and where they lie.
std::vector<ArrayInfo> layout(const Workload& w, int line_elems);

// Calls f(array_index, element_address, is_write) for every access of the
// thread that computes pixel (x, y), in program order.
template <class F>
void for_each_access(const Workload& w, const std::vector<ArrayInfo>& arrays, Pixel p, F&& f);

// ---- results ------------------------------------------------------------------

struct ArrayStats {
    std::string name;
    bool written = false;
    std::uint64_t accesses = 0;  // element accesses
    std::uint64_t hits = 0;
    std::uint64_t fetches = 0;   // lines brought in from the next level
    std::uint64_t bypassed = 0;  // stores that did not go through the cache
    double hit_rate() const;     // hits / cached accesses; 0 when none
};

struct SimResult {
    std::vector<ArrayStats> arrays;
    std::uint64_t fetches() const;       // all arrays
    std::uint64_t read_fetches() const;  // arrays that are only read (what the thesis counts)
};

// Per thread, in time order: what the diagrams draw.
struct ThreadRecord {
    Pixel pixel{};
    std::vector<std::uint64_t> accessed;  // element addresses, program order
    std::vector<std::uint64_t> fetched;   // lines fetched by this thread
    std::vector<std::uint64_t> resident;  // lines resident after the thread, ascending
};

struct Trace {
    std::vector<ArrayInfo> arrays;
    int line_elems = 0;
    std::vector<ThreadRecord> threads;
};

// Refuses a replay of more than this many accesses (seconds of work at
// ~50M accesses/s): callers pass a larger cap deliberately.
inline constexpr std::uint64_t default_max_accesses = 200'000'000;

struct ReplayOptions {
    WritePolicy writes = WritePolicy::bypass;
    std::uint64_t max_accesses = default_max_accesses;
    Trace* trace = nullptr;  // filled when non-null
};

// Sequential model. Throws std::invalid_argument for bad sizes or a replay
// over max_accesses, std::logic_error if the schedule is not a bijection.
SimResult simulate(const Workload& w, const ScheduleSpec& schedule, const CacheConfig& cache,
                   const ReplayOptions& options = {});

// The visit order alone: pixel of each thread index, checked to be a bijection.
std::vector<Pixel> visit_order(const ScheduleSpec& schedule, int width, int height);

// ---- parallel (GPU-like) model -----------------------------------------------

struct GpuConfig {
    int warp = 32;    // lanes per warp
    int block = 256;  // threads per block
    int sms = 4;      // multiprocessors; block b runs on SM b % sms
    CacheConfig l1{4, 64, 0};
    CacheConfig l2{4, 1024, 0};
    std::string to_string() const;
};

// Per array and level. Requests are coalesced: one per distinct line per
// warp memory instruction (not per lane).
struct LevelStats {
    std::uint64_t requests = 0;
    std::uint64_t hits = 0;
    double hit_rate() const;
};

struct ParallelArrayStats {
    std::string name;
    bool written = false;
    std::uint64_t accesses = 0;  // lane accesses
    LevelStats l1;
    LevelStats l2;
    std::uint64_t dram_fetches = 0;  // L2 misses
};

struct ParallelResult {
    std::vector<ParallelArrayStats> arrays;
    std::uint64_t warp_instructions = 0;
};

// One block resident per SM at a time; SMs advance in lockstep, one warp
// memory instruction each per step, warps of a block taking turns (as a
// round-robin warp scheduler). Stores skip L1 (write-through, no allocate,
// as on NVIDIA L1) and meet L2 under `writes`.
ParallelResult simulate_parallel(const Workload& w, const ScheduleSpec& schedule, const GpuConfig& gpu,
                                 const ReplayOptions& options = {});

// ---- the thesis' analytical predictions -----------------------------------------

enum class PredictionKind {
    lower_bound,  // F >= value: every line of the read arrays once (compulsory misses)
    upper_bound,  // F <= value
    estimate,     // the thesis' "F =" or "F approx": compare, expect differences
    requirement,  // a cache size in lines the thesis asks for (value = lines)
};

struct Prediction {
    std::string equation;  // "eq. 4.8"
    PredictionKind kind = PredictionKind::estimate;
    std::string formula;       // the formula with the numbers substituted
    double value = 0;          // fetches (or lines for requirements)
    std::string precondition;  // what the thesis assumes, with numbers; empty if none
    bool precondition_holds = true;
};

// Predictions for the read-only arrays' line fetches (the thesis ignores
// writes), for the schedule's family: eq. 3.2 for row-major orders, eq. 3.5
// for tiles, eq. 4.8 for columns and zigzags, eqs. 3.6-3.10 and section 4.4
// for matrix multiplication. Always includes the compulsory lower bound.
// With `gpu`, `cache` is its L1 and the stencil's warp footprints of
// section 3.3.1 are added as requirements.
std::vector<Prediction> predict(const Workload& w, const ScheduleSpec& schedule, const CacheConfig& cache,
                                const GpuConfig* gpu = nullptr);

std::string_view to_string(PredictionKind kind);

// ---- implementation of the access generator -------------------------------------

struct Access {
    int array = 0;
    std::uint64_t address = 0;  // element address
    bool write = false;
};

// The m-th access (m < w.accesses_per_thread()) of the thread computing p.
// Random access by m lets the parallel model step lanes one memory
// instruction at a time; for_each_access walks m in order.
inline Access access_at(const Workload& w, const std::vector<ArrayInfo>& arrays, Pixel p, std::uint32_t m) {
    switch (w.kind) {
        case WorkloadKind::stencil: {
            // Listing 3: rows outer, columns inner, coordinates clamped.
            const std::uint32_t k = static_cast<std::uint32_t>(w.stencil);
            if (m == k * k) return {1, arrays[1].base + std::uint64_t(p.y) * w.width + p.x, true};
            const int r = w.stencil / 2;
            int y = p.y + static_cast<int>(m / k) - r;
            int x = p.x + static_cast<int>(m % k) - r;
            y = y < 0 ? 0 : (y >= w.height ? w.height - 1 : y);
            x = x < 0 ? 0 : (x >= w.width ? w.width - 1 : x);
            return {0, arrays[0].base + std::uint64_t(y) * w.width + x, false};
        }
        case WorkloadKind::matmul: {
            // Listing 4: x is the column j of C, y the row i; a[i][k], b[k][j] alternate.
            const std::uint32_t d = static_cast<std::uint32_t>(w.depth);
            if (m == 2 * d) return {2, arrays[2].base + std::uint64_t(p.y) * w.width + p.x, true};
            const std::uint64_t k = m / 2;
            if (m % 2 == 0) return {0, arrays[0].base + std::uint64_t(p.y) * w.depth + k, false};
            return {1, arrays[1].base + k * w.width + p.x, false};
        }
        case WorkloadKind::color: {
            const std::uint64_t pixel = std::uint64_t(p.y) * w.width + p.x;
            const std::uint32_t c = static_cast<std::uint32_t>(w.channels);
            if (m < c) return {0, arrays[0].base + pixel * c + m, false};
            return {1, arrays[1].base + pixel * 3 + (m - c), true};
        }
    }
    return {};
}

template <class F>
void for_each_access(const Workload& w, const std::vector<ArrayInfo>& arrays, Pixel p, F&& f) {
    const auto n = static_cast<std::uint32_t>(w.accesses_per_thread());
    for (std::uint32_t m = 0; m < n; ++m) {
        const Access a = access_at(w, arrays, p, m);
        f(a.array, a.address, a.write);
    }
}

}  // namespace cbi::sim
