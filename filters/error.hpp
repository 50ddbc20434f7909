#pragma once
// cbi's exceptions. The library never exits or prints; apps map these to
// one-line messages and exit codes (DESIGN.md section 4):
//   std::invalid_argument -> usage error (exit 2): bad option, kernel size, schedule
//   cbi::Error            -> runtime or data error (exit 1): unreadable, corrupt,
//                            too large, CUDA failure, ...
#include <stdexcept>
#include <string>

namespace cbi {

class Error : public std::runtime_error {
public:
    // `subject` names the file, option or operation the error is about.
    Error(std::string subject, const std::string& reason)
        : std::runtime_error(subject.empty() ? reason : subject + ": " + reason), subject_(std::move(subject)) {}
    const std::string& subject() const { return subject_; }

private:
    std::string subject_;
};

// What this device, build or strategy cannot run although the request is
// well formed: a tile larger than this GPU's shared memory, a strategy that
// does not take this node. Exit 1 (the command may work elsewhere); `auto`
// skips a candidate that throws it, and only it.
class Unsupported : public Error {
public:
    using Error::Error;
};

}  // namespace cbi
