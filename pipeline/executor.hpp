#pragma once
// The graph executor: runs a pipeline graph on the CPU (TBB) or on a CUDA
// device (chosen with pipeline/device.hpp, included here).
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "filters/filter.hpp"
#include "pipeline/device.hpp"
#include "pipeline/graph.hpp"
#include "pipeline/image.hpp"
#include "pipeline/processor.hpp"
#include "pipeline/tuning.hpp"

// cudaStream_t without the CUDA headers (the same type: cuda_runtime_api.h
// declares `typedef struct CUstream_st* cudaStream_t`).
struct CUstream_st;

namespace cbi {

class Backend;  // pipeline/backend.hpp

struct RunOptions {
    ResolvedDevice device;
    int block = 256;  // CUDA threads per block
    // Where `auto` schedules are looked up and recorded; shared by the
    // executors of a batch. Empty: each executor keeps its own, in memory.
    std::shared_ptr<TuningCache> tuning;
    // Fuse a colour node into the stencil that reads it when that stencil
    // stages tiles (smem/sep): one kernel, the colour image never stored
    // (by default on the GPU only: fuses_color_by_default); and stencil
    // pairs, below (by default on the GPU only: fuses_pair_by_default).
    bool fuse = true;
    // With fuse: which stencil pairs fuse (one kernel, the first stencil's
    // output never stored; on smem/sep per tile in shared memory, on stream
    // through line buffers, with a colour node before the pair).
    //   measured: those fuses_pair_by_default names (defaults.hpp), where the
    //     line-buffer kernel was measured faster than the kernels it
    //     replaces; the others run unfused, which is faster for them;
    //   all: every pair a kernel takes, and every colour node
    //     (cbi-filter --fuse-stencils);
    //   none.
    enum class StencilPairs { measured, all, none };
    StencilPairs stencil_pairs = StencilPairs::measured;
};

// Executes a graph on the CPU or a CUDA device. Prepared per image format
// (size, channels, depth): the topological order, the channel count of every
// node and an assignment of intermediate buffers by lifetime (a buffer is
// reused once its last reader has run) are computed once, and the buffers
// (plus, on CUDA, the stream and pinned staging) are allocated once. Running
// again on an image of the same format allocates nothing. On CUDA every node
// is enqueued on the executor's one stream with no host synchronisation in
// between; run() synchronises once, after the downloads.
// One executor serves one thread at a time.
class GraphExecutor : public Processor {
public:
    GraphExecutor(Graph graph, RunOptions options);
    ~GraphExecutor() override;
    GraphExecutor(const GraphExecutor&) = delete;
    GraphExecutor& operator=(const GraphExecutor&) = delete;

    // Checks the graph against an input format and plans buffers for it,
    // allocating nothing (describe() then shows the plan). Throws cbi::Error
    // naming the node when a node cannot take its input.
    void plan(int width, int height, int channels, Depth depth);

    // plan() (unless already planned for this format), then allocates the
    // buffers (and CUDA stream and staging).
    void prepare(int width, int height, int channels, Depth depth);

    // Runs on `input`; returns host views of the outputs, in the graph's
    // output order, valid until the next run or prepare.
    std::span<const ImageView> run(const ImageView& input);

    // Runs on `input` (host memory) and writes the outputs into `outputs`
    // (host views, one per graph output in its order, each of the format
    // channels_of gives that output; rows may be strided, as a NumPy ROI),
    // then returns. On the CPU the output nodes write straight into
    // `outputs`: no staging and no copy; on CUDA the outputs are downloaded
    // into them. Allocates nothing on a format already prepared. An output
    // must not overlap the input or another output. Throws
    // std::invalid_argument for outputs of the wrong number or format.
    void run_into(const ImageView& input, std::span<const ImageView> outputs);

    // CUDA executors only: `input` and `outputs` are device memory on the
    // executor's device (rows may be strided). Every node is enqueued on
    // `stream` (nullptr: the legacy default stream), after the work already
    // there, reading `input` in place and writing the output nodes straight
    // into `outputs` (no staging, no copy), and the call returns without
    // waiting for the device. The executor's buffers are used by its next
    // run only after this work (an event orders them), so runs on other
    // streams need nothing from the caller; `input` and `outputs` must stay
    // valid until the work on `stream` is done. The calling thread's
    // current device is the same on return. Allocates nothing on a format
    // already prepared. Throws std::logic_error on a CPU executor.
    void enqueue(const ImageView& input, std::span<const ImageView> outputs, CUstream_st* stream);

    // Benchmarks (CUDA only): runs every node again on the device copy of
    // the last run's input, between two CUDA events on the executor's stream;
    // no copies. Returns the milliseconds between the events.
    float time_kernels_ms();

    // Processor: a copy of the first output.
    Image process(const ImageView& input) override;
    // Processor: JPEG decoded (and the output encoded) on the device, where
    // the backend can (CUDA with nvJPEG).
    bool decodes_jpeg() const override;
    std::optional<FileResult> process_jpeg(std::span<const std::uint8_t> jpeg, int jpeg_quality, bool wait,
                                           bool hardware = true) override;
    bool jpeg_codec_ready() override;
    bool jpeg_decoder_ready() override;
    FileResult process_file(const ImageView& input, int jpeg_quality) override;
    PathTimes path_times() const override;

    // Output channels of node `id` for the planned format.
    int channels_of(NodeId id) const;

    // The schedule node `id` runs with for the prepared format: an auto
    // node's choice once it is cached or timed (before that: naive).
    ScheduleSpec schedule_of(NodeId id) const;

    // The resolved graph: nodes, schedules, borders, buffers and reuse.
    std::string describe() const;

    // Buffers (host, device or pinned) this executor has allocated so far.
    std::size_t allocations() const { return allocations_; }

    // The graph as given (ids as given to channels_of and schedule_of).
    const Graph& graph() const { return user_graph_; }

private:
    struct Plan;
    bool planned_for(int width, int height, int channels, Depth depth) const;
    // Plans (again, after tuning) and allocates for the format of `input` (its data unused).
    void prepare_for(const ImageView& input);
    ImageView view_of(NodeId id) const;  // the image node `id` writes (the input: what nodes read it through)
    // run_into/enqueue: the caller's outputs (empty otherwise), in the order
    // of the graph's outputs, which the output nodes write instead of their
    // buffers.
    void check_outputs(std::span<const ImageView> outputs) const;
    void run_node(NodeId id, const ScheduleSpec& schedule, int first_row, int rows);
    void run_nodes();
    // After run_nodes: the first output, encoded as JPEG on the device when
    // jpeg_quality > 0 and it can be one, else downloaded.
    FileResult file_result(int jpeg_quality);
    // Times the candidates of auto node `id` (or takes another executor's
    // fresh choice from the cache) and records the winner.
    void tune(NodeId id);
    Graph user_graph_;
    // What runs: user_graph_ with compound nodes expanded (expand_compound);
    // user_ids_ maps user_graph_'s node ids to its.
    Graph graph_;
    std::vector<NodeId> user_ids_;
    RunOptions options_;
    std::unique_ptr<Plan> plan_;
    std::unique_ptr<Backend> backend_;
    ImageView input_;  // the last run's input, as the backend's nodes read it
    std::vector<ImageView> outputs_;
    std::span<const ImageView> direct_outputs_;
    std::size_t allocations_ = 0;
    PathTimes times_;        // process_jpeg and process_file
    bool prepared_ = false;  // buffers allocated for plan_
    bool ran_ = false;       // the backend holds an input (time_kernels_ms)
    bool replan_ = false;    // auto nodes were tuned: plan again (fusion) before the next run
};

// A factory for the batch runner: each call returns a new GraphExecutor over
// a copy of the graph, so each image in flight has its own buffers (and, on
// CUDA, its own stream and pinned staging), reused from image to image.
ProcessorFactory graph_processor_factory(Graph graph, RunOptions options);

// Runs a chain of nodes once (a convenience over GraphExecutor).
Image run_sequence(std::span<const FilterRun> nodes, const ImageView& input, const RunOptions& options);

}  // namespace cbi
