#pragma once
// CUDA backend: one kernel per (filter, depth, border, schedule family);
// thread i computes the pixel schedule.map(i, w, h). Views point to device
// memory. Enqueues on `stream`; does not synchronise.
#include <cuda_runtime_api.h>

#include <cstddef>

#include "filters/filter.hpp"

namespace cbi {

void run_node_cuda(const FilterRun& node, const ImageView& src, const ImageView& dst, cudaStream_t stream, int block);
// Whether the kernel that runs `node` on images of `depth` applies its
// `then` (a per-sample node) as it stores: a stencil (without a fused
// stencil) on sep:WxH or stream:WxH, but not an 8-bit kind that looks its
// results up (looks_up_8bit: scale, gamma). The fused blends
// (run_blend_fused_cuda) apply BlendRun::then too, on the same terms.
bool cuda_applies_then(const FilterRun& node, Depth depth);
// Device memory a node needs beyond its images, in bytes: 0, or for an otsu
// threshold its histogram and level. The overload with `scratch` (at least
// that many bytes, owned by the caller and used in stream order) is the
// executor's, which keeps one buffer; without it the call allocates on the
// stream (cudaMallocAsync) and frees after its kernels.
std::size_t cuda_scratch_bytes(const FilterRun& node);
void run_node_cuda(const FilterRun& node, const ImageView& src, const ImageView& dst, cudaStream_t stream, int block,
                   void* scratch);

// A node of a window kind (cuda/window.cu; run_node_cuda passes them there).
void run_window_cuda(const FilterRun& node, const ImageView& src, const ImageView& dst, cudaStream_t stream, int block);
// Whether that kernel reads through the node's fused_color for a colour
// output of `channels` (the executor asks before it fuses): median:5 on
// the naive schedule, 1-channel colour outputs (gray).
bool cuda_window_takes_colour(const FilterRun& node, int channels);

// A node with a fused_stencil: both stencils in one kernel (cuda/pair.cu).
// run_node_cuda passes such nodes here.
void run_chain_cuda(const FilterRun& node, const ImageView& src, const ImageView& dst, cudaStream_t stream, int block);
// Whether that kernel's tile fits the shared memory of `device` for an
// intermediate image of `channels` samples per pixel (the executor asks
// before it fuses).
bool cuda_chain_fits(const FilterRun& node, Depth depth, int src_channels, int channels, int device);
// The strip height a stencil (or pair) on stream:WxH runs best at on
// `device` (the current device) for a width x height image, with `block`
// threads per block at most: the 8-bit kernels' strip_height_by_waves
// (cuda/strip8.cuh; pairs: cuda/pair_strip.cuh, chain_stream_strip_height).
// `channels`: the output's (a pair's: its intermediate image's). 0 for
// other schedules and kernels.
int cuda_strip_height(const FilterRun& node, Depth depth, int src_channels, int channels, int width, int height,
                      int device, int block);
// The same for a pair (cuda/pair.cu; cuda_strip_height passes pairs here).
int cuda_chain_strip_height(const FilterRun& node, Depth depth, int src_channels, int channels, int width, int height,
                            int device, int block);

// `then` (a per-sample filter) applied as each output is stored, where
// cuda_blend_applies_then: on vec:N, but not an 8-bit kind that looks its
// results up (looks_up_8bit).
void run_blend_cuda(const BlendFilter& blend, const ScheduleSpec& schedule, const ImageView& a, const ImageView& b,
                    const ImageView& dst, cudaStream_t stream, int block,
                    const std::optional<Filter>& then = std::nullopt);
bool cuda_blend_applies_then(const ScheduleSpec& schedule, Depth depth, const Filter& then);

// A blend with the stencils it reads in one kernel (cuda/blend.cu: the 8-bit
// stream kernel; one stencil on sep:WxH, any depth: run_blend_of_stencil_cuda): src is
// the stencils' input. cuda_blend_fits: whether that kernel takes the node
// for an input of `channels` (the executor asks before it fuses).
void run_blend_fused_cuda(const BlendRun& node, const ImageView& src, const ImageView& dst, cudaStream_t stream,
                          int block);
bool cuda_blend_fits(const BlendRun& node, Depth depth, int channels);
// A blend of one stencil and the stencil's input on sep:WxH (cuda/backend.cu;
// run_blend_fused_cuda passes such nodes here): the stencil's sep kernel
// blends each output with the staged source sample under it as it stores.
// Any stencil kind, depth and channel count.
bool cuda_sep_blend_fits(const BlendRun& node);
void run_blend_of_stencil_cuda(const BlendRun& node, const ImageView& src, const ImageView& dst, cudaStream_t stream,
                               int block);
// The strip height that kernel runs best at (as cuda_strip_height); 0 where it does not take the node.
int cuda_blend_strip_height(const BlendRun& node, Depth depth, int channels, int width, int height, int device,
                            int block);

}  // namespace cbi
