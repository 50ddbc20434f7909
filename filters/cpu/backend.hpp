#pragma once
// CPU backend: runs one node by visiting the schedule's index range, split
// across TBB tasks, so the schedule decides the visit order here too.
#include "filters/filter.hpp"

namespace cbi {

// src and dst must not overlap; dst has the node's output geometry. A
// node's `then` is applied to each part of dst as its task stores it.
void run_node_cpu(const FilterRun& node, const ImageView& src, const ImageView& dst);
// A node of a window kind (cpu/window.cpp; run_node_cpu passes them there).
// With a fused_color, src is the colour node's input.
void run_window_cpu(const FilterRun& node, const ImageView& src, const ImageView& dst);
// Whether a window node's op reads through a fused colour node on the CPU
// (the median's row kernels convert each source row as they border it).
bool window_takes_colour_cpu(const FilterRun& node);

// dst = blend of a and b (same geometry; dst may alias neither), then
// `then` (a per-sample filter) applied to each sample as it is stored.
void run_blend_cpu(const BlendFilter& blend, const ScheduleSpec& schedule, const ImageView& a, const ImageView& b,
                   const ImageView& dst, const std::optional<Filter>& then = std::nullopt);

// A fused blend of one stencil (run.a or run.b) and its source `src`: the
// stencil's tasks apply the blend (and run.then) to what they store.
void run_blend_of_stencil_cpu(const BlendRun& run, const ImageView& src, const ImageView& dst);

}  // namespace cbi
