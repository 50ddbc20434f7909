#pragma once
// What the batch runner needs from the filter graph: something that turns
// one image into its result. One Processor is used by one thread at a time;
// a CUDA processor owns its stream and staging buffers, so K processors
// give K images in flight. Implemented by GraphExecutor
// (pipeline/executor.hpp).
#include <functional>
#include <memory>

#include "pipeline/image.hpp"

namespace cbi {

class Processor {
public:
    virtual ~Processor() = default;
    // Throws cbi::Error for runtime and data errors, among them
    // cbi::Unsupported for what this device or schedule cannot run (the
    // batch runner records them per file and carries on);
    // std::invalid_argument for usage errors (malformed options).
    virtual Image process(const ImageView& input) = 0;
};

using ProcessorFactory = std::function<std::unique_ptr<Processor>()>;

}  // namespace cbi
