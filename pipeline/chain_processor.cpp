#include "pipeline/chain_processor.hpp"

#include <utility>

namespace cbi {

ChainProcessor::ChainProcessor(std::vector<Node> nodes, RunOptions options)
    : nodes_(std::move(nodes)), options_(std::move(options)) {}

Image ChainProcessor::process(const ImageView& input) { return run_chain(nodes_, input, options_); }

ProcessorFactory chain_processor_factory(std::vector<Node> nodes, RunOptions options) {
    return [nodes = std::move(nodes), options = std::move(options)]() -> std::unique_ptr<Processor> {
        return std::make_unique<ChainProcessor>(nodes, options);
    };
}

}  // namespace cbi
