#pragma once
// cbi's exceptions. The library never exits or prints; apps map these to
// one-line messages and exit codes (docs/cli.md#errors-and-exit-codes):
//   std::invalid_argument -> usage error (exit 2): malformed input that no
//                            device could run: an unknown flag or filter, a
//                            kernel size outside 1..255, a malformed schedule
//   cbi::Unsupported      -> exit 1: well formed, but this device, build or
//                            schedule cannot run it (a tile too large for this
//                            GPU's shared memory, a schedule that does not take
//                            this node); the message names the limit and the
//                            alternatives. A cbi::Error: catch it first.
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

// A device that stopped working for the rest of the process (a CUDA error
// that poisons its context). The same work may still succeed on another
// device: a batch over several devices takes this one out and runs the
// image again on another.
class DeviceLost : public Error {
public:
    using Error::Error;
};

}  // namespace cbi
