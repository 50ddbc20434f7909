#pragma once
// A Processor over run_chain: the chain executor behind the batch runner's
// factory boundary, on the CPU or a CUDA device (each call makes its own
// stream and buffers). The graph executor's reusable processor replaces it
// by changing the factory the app passes.
#include <vector>

#include "filters/filter.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/processor.hpp"

namespace cbi {

class ChainProcessor : public Processor {
public:
    ChainProcessor(std::vector<Node> nodes, RunOptions options);
    Image process(const ImageView& input) override;

private:
    std::vector<Node> nodes_;
    RunOptions options_;
};

// Each call returns a new ChainProcessor over copies of nodes and options.
ProcessorFactory chain_processor_factory(std::vector<Node> nodes, RunOptions options);

}  // namespace cbi
