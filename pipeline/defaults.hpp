#pragma once
// The default table: the schedule a node runs when none is given (the CLI
// without --schedule, a graph node without one, a pipeline stage without
// @SCHEDULE), per backend, filter, kernel size, depth and channels, from
// cbi-bench runs (the table in defaults.cpp names each run). `auto` starts
// from the same rows: their schedules, fastest first, are its candidates.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "filters/filter.hpp"
#include "pipeline/graph.hpp"

namespace cbi {

// The kind name of a node's op ("gaussian", ..., or "blend").
std::string_view op_kind(const NodeOp& op);

// What the table's choice depends on besides the operation.
struct NodeFormat {
    Depth depth = Depth::u8;
    int channels = 3;  // of the node's input
    bool cuda = false;
};

// A row of the table: a kind's row (FilterKind<F>::defaults, KindDefault)
// with the kind's name, or one of the blend's.
struct DefaultRow {
    std::string_view kind;  // op_kind
    bool cuda;
    int max_ksize;               // nodes whose footprint side is at most this (0: any)
    int depth;                   // -1: any, else static_cast<int>(Depth)
    int channels;                // 0: any
    std::string_view schedules;  // fastest first, space-separated; the first that supports the node wins
};

// Every kind's rows, in the kind list's order, then the blend's.
std::span<const DefaultRow> default_table();

// The first schedule of the first matching row that supports the node
// (cbi::supports); the per-pixel `naive` where no row does.
ScheduleSpec default_schedule(const NodeOp& op, const Border& border, const NodeFormat& format);

// `auto`'s candidates: every schedule of every matching row that supports
// the node, fastest first (the default first), without repeats.
std::vector<ScheduleSpec> default_candidates(const NodeOp& op, const Border& border, const NodeFormat& format);

// Whether a stencil pair fuses by default (RunOptions::StencilPairs::
// measured): where the line-buffer pair kernel (cuda/pair_strip.cuh), on
// the strip height it takes for the image, ran faster than the kernels it
// replaces (the gray conversion's, the stencils' on theirs). 8-bit pairs on
// stream, either
// - read through a gray conversion of 3-channel BGR (the kernel stores
//   neither the gray image nor the first stencil's), at any size; or
// - ending in a kind whose PairFusion says always_second (a 3x3 Sobel or
//   Scharr), 1 or 3 channels, at any size; or
// - a kind with PairFusion::first (Gaussian), then one with ::second
//   (Gaussian, Sobel, Scharr), at any size (filters/kinds/kind.hpp).
// A blur before a blur or Gaussian stays two kernels: slower fused on large
// images, where the unfused blur's running sums are cheap
// (docs/performance.md#stencil-pairs).
// On the CPU (format.cuda false) no pair fuses by default: the line-buffer
// walk (cpu/pair_lines.hpp) was about as often slower as faster
// (docs/performance.md#cpu-chains). --fuse-stencils fuses them there,
// saving the intermediate image's memory.
bool fuses_pair_by_default(const FilterRun& pair, const NodeFormat& format);

// Whether a colour node read only by a stencil fuses into it by default
// (into the stencil alone or into a pair's kernel): on the GPU, yes; on the
// CPU, no: converted a tile's columns at a time, its rows stall on memory
// where the whole-row pass streams (docs/performance.md#color-fusion).
// --fuse-stencils fuses them on the CPU too.
constexpr bool fuses_color_by_default(bool cuda) {
    return cuda;
}

// The default device for one image (`--device auto` outside a batch):
// starting a CUDA device, and staging and copying one image in and out,
// cost a one-image run more than the default CPU schedules take for most
// images on a multicore CPU (docs/performance.md#one-image-device). So the image runs on the CPU when cpu_run_seconds is within
// what the device would add: kCudaStartSeconds plus kCudaSecondsPerByte for
// each byte of the input and the outputs.
inline constexpr double kCudaStartSeconds = 0.4;
inline constexpr double kCudaSecondsPerByte = 0.75e-9;
// The CPU backend's expected seconds for one run of `graph` on a
// width x height image of `channels` channels (an upper bound is fine) on
// `threads` threads, from per-sample costs of its default schedules; -1
// where a node has a named schedule, whose cost is not modelled.
double cpu_run_seconds(const Graph& graph, std::uint64_t width, std::uint64_t height, int channels, Depth depth,
                       int threads);
bool one_image_runs_on_cpu(const Graph& graph, std::uint64_t width, std::uint64_t height, int channels, Depth depth,
                           int threads);
// The default device for a batch (`--device auto` with several inputs): a
// batch pays the device's start once, and then the GPU takes the filters
// (and with nvJPEG the JPEG codec) off the CPU's cores; but a batch whose
// filters the CPU runs before the device has started waits for nothing.
// So a batch of `images` runs on the CPU when cpu_run_seconds of one
// (a width x height image standing for all) times their count is within
// kCudaStartSeconds (docs/performance.md#batch-device).
bool batch_runs_on_cpu(const Graph& graph, std::uint64_t width, std::uint64_t height, int channels, Depth depth,
                       int threads, std::uint64_t images);

}  // namespace cbi
