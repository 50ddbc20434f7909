#pragma once
// Test helpers for running the real cbi-filter binary (CBI_FILTER_BIN) in a
// child process and for scratch folders. Used by test_batch and test_cli.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace cbi::test {

namespace fs = std::filesystem;

// A fresh folder under the system temp dir, removed with everything in it.
class TempDir {
public:
    TempDir() {
        std::string templ = (fs::temp_directory_path() / "cbi-test-XXXXXX").string();
        if (!::mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
        path_ = templ;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    const fs::path& path() const { return path_; }
    fs::path operator/(const std::string& name) const { return path_ / name; }

private:
    fs::path path_;
};

struct CliResult {
    int code = -1;  // exit code, or 128 + signal
    std::string out, err;
};

struct ChildSetup {
    bool as_nobody = false;
    std::optional<rlim_t> file_size_limit;
};

inline std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
}

// fork + exec of cbi-filter. Everything the child needs is prepared before
// the fork: between fork and exec only async-signal-safe calls (the parent
// has TBB threads).
inline pid_t spawn_cli(const std::vector<std::string>& args, const fs::path& out_file, const fs::path& err_file,
                       const ChildSetup& setup = {}) {
    std::vector<std::string> all{CBI_FILTER_BIN};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int out_fd = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    const int err_fd = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (out_fd < 0 || err_fd < 0) throw std::runtime_error("cannot create the capture files");
    const rlimit lim{setup.file_size_limit.value_or(0), setup.file_size_limit.value_or(0)};
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(out_fd, STDOUT_FILENO);
        ::dup2(err_fd, STDERR_FILENO);
        if (setup.as_nobody && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(77);
        if (setup.file_size_limit) {
            ::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG, as on a full disk
            ::setrlimit(RLIMIT_FSIZE, &lim);
        }
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    ::close(out_fd);
    ::close(err_fd);
    return pid;
}

inline int wait_code(pid_t pid) {
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

inline CliResult run_cli(const std::vector<std::string>& args, const fs::path& scratch, const ChildSetup& setup = {}) {
    const fs::path out = scratch / "stdout.txt", err = scratch / "stderr.txt";
    CliResult r;
    r.code = wait_code(spawn_cli(args, out, err, setup));
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
}

}  // namespace cbi::test
