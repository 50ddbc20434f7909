// A plain main() for a fuzz target's entry point, so ctest replays the
// committed corpus and regressions in every build (no clang or libFuzzer
// needed): runs LLVMFuzzerTestOneInput on every file under the folders (or
// files) given, in name order. A crash, a broken property or an unexpected
// exception fails the run; so does an input that takes longer than
// --max-seconds or lifts the process's peak memory over --max-rss-mb (the
// fuzzer's -timeout and -rss_limit_mb, checked here after each input), or
// makes one allocation over --max-alloc-mb (as -malloc_limit_mb): a decoder
// reserving a buffer for a declared size it then never fills is caught even
// though the untouched pages never count in the peak memory.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace fs = std::filesystem;

namespace {

std::atomic<std::size_t> largest_alloc{0};

void note_alloc(std::size_t n) {
    std::size_t seen = largest_alloc.load(std::memory_order_relaxed);
    while (n > seen && !largest_alloc.compare_exchange_weak(seen, n, std::memory_order_relaxed)) {}
}

}  // namespace

#if defined(__SANITIZE_ADDRESS__)
#define CBI_REPLAY_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CBI_REPLAY_ASAN 1
#endif
#endif

#ifdef CBI_REPLAY_ASAN
// ASan owns malloc: it reports every allocation to a hook. Declared here:
// clang has it in <sanitizer/allocator_interface.h>, gcc 12 ships no such
// header, but both runtimes export it.
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*, std::size_t),
                                                         void (*free_hook)(const volatile void*));
extern "C" void cbi_replay_malloc_hook(const volatile void*, std::size_t size) {
    note_alloc(size);
}
extern "C" void cbi_replay_free_hook(const volatile void*) {}
static void install_alloc_hooks() {
    __sanitizer_install_malloc_and_free_hooks(cbi_replay_malloc_hook, cbi_replay_free_hook);
}
#else
// Plain builds: the program's own allocation functions stand in for glibc's
// (which every library's calls then reach) and note each size.
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);

void* malloc(std::size_t n) {
    note_alloc(n);
    return __libc_malloc(n);
}
void* calloc(std::size_t count, std::size_t n) {
    std::size_t total = 0;
    note_alloc(__builtin_mul_overflow(count, n, &total) ? SIZE_MAX : total);
    return __libc_calloc(count, n);
}
void* realloc(void* p, std::size_t n) {
    note_alloc(n);
    return __libc_realloc(p, n);
}
void* memalign(std::size_t alignment, std::size_t n) {
    note_alloc(n);
    return __libc_memalign(alignment, n);
}
void* aligned_alloc(std::size_t alignment, std::size_t n) {
    return memalign(alignment, n);
}
int posix_memalign(void** out, std::size_t alignment, std::size_t n) {
    if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) return EINVAL;
    void* p = memalign(alignment, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
}
static void install_alloc_hooks() {}
#endif

namespace {

long peak_rss_mb() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss / 1024;  // Linux: KiB
}

}  // namespace

int main(int argc, char** argv) {
    double max_seconds = 10;
    long max_rss_mb = 1024;
    std::size_t max_alloc_mb = 512;
    install_alloc_hooks();
    std::vector<fs::path> files;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg.rfind("--max-seconds=", 0) == 0) {
            max_seconds = std::atof(argv[i] + 14);
        } else if (arg.rfind("--max-rss-mb=", 0) == 0) {
            max_rss_mb = std::atol(argv[i] + 13);
        } else if (arg.rfind("--max-alloc-mb=", 0) == 0) {
            max_alloc_mb = std::strtoull(argv[i] + 15, nullptr, 10);
        } else if (fs::is_directory(arg)) {
            for (const auto& e : fs::recursive_directory_iterator(arg))
                if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e.path());
        } else if (fs::is_regular_file(arg)) {
            files.emplace_back(arg);
        } else {
            std::fprintf(stderr, "replay: %s: no such file or folder\n", argv[i]);
            return 2;
        }
    }
    std::sort(files.begin(), files.end());
    for (const auto& path : files) {
        std::ifstream in(path, std::ios::binary);
        const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        if (!in.eof() && in.fail()) {
            std::fprintf(stderr, "replay: %s: cannot read\n", path.c_str());
            return 1;
        }
        largest_alloc = 0;
        const auto start = std::chrono::steady_clock::now();
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (seconds > max_seconds) {
            std::fprintf(stderr, "replay: %s: took %.1f s, over --max-seconds=%g\n", path.c_str(), seconds,
                         max_seconds);
            return 1;
        }
        if (largest_alloc > max_alloc_mb << 20) {
            std::fprintf(stderr, "replay: %s: allocated %zu MiB at once, over --max-alloc-mb=%zu\n", path.c_str(),
                         largest_alloc.load() >> 20, max_alloc_mb);
            return 1;
        }
        if (peak_rss_mb() > max_rss_mb) {
            std::fprintf(stderr, "replay: %s: peak memory %ld MiB, over --max-rss-mb=%ld\n", path.c_str(),
                         peak_rss_mb(), max_rss_mb);
            return 1;
        }
    }
    std::printf("replay: %zu inputs passed\n", files.size());
    return 0;
}
