// A plain main() for a fuzz target's entry point, so ctest replays the
// committed corpus and regressions in every build (no clang or libFuzzer
// needed): runs LLVMFuzzerTestOneInput on every file under the folders (or
// files) given, in name order. A crash, a broken property or an unexpected
// exception fails the run; so does an input that takes longer than
// --max-seconds or lifts the process's peak memory over --max-rss-mb (the
// fuzzer's -timeout and -rss_limit_mb, checked here after each input).
#include <sys/resource.h>

#include <algorithm>
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

long peak_rss_mb() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss / 1024;  // Linux: KiB
}

}  // namespace

int main(int argc, char** argv) {
    double max_seconds = 10;
    long max_rss_mb = 1024;
    std::vector<fs::path> files;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg.rfind("--max-seconds=", 0) == 0) {
            max_seconds = std::atof(argv[i] + 14);
        } else if (arg.rfind("--max-rss-mb=", 0) == 0) {
            max_rss_mb = std::atol(argv[i] + 13);
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
        const auto start = std::chrono::steady_clock::now();
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (seconds > max_seconds) {
            std::fprintf(stderr, "replay: %s: took %.1f s, over --max-seconds=%g\n", path.c_str(), seconds, max_seconds);
            return 1;
        }
        if (peak_rss_mb() > max_rss_mb) {
            std::fprintf(stderr, "replay: %s: peak memory %ld MiB, over --max-rss-mb=%ld\n", path.c_str(), peak_rss_mb(),
                         max_rss_mb);
            return 1;
        }
    }
    std::printf("replay: %zu inputs passed\n", files.size());
    return 0;
}
