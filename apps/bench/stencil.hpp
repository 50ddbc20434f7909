#pragma once
// The thesis' stencil workload (chapter 5.1): a 9x9 box over a float image,
// summed in float, edges clamped (replicate), one thread per output pixel
// found through the registry's schedule. Kept apart from cbi's own `blur:9`
// (which sums in double and reads through the general border rule) so the
// sweep of Fig. 5.1a/5.2 measures the kernel shape the thesis timed.
#include <cuda_runtime_api.h>

#include "schedules/registry.hpp"

namespace cbi::bench {

// out[y][x] = (1/81) * sum of in[clamp(y+j)][clamp(x+i)], |i|,|j| <= 4; both
// images w x h contiguous floats on the device. Checks the launch.
void run_thesis_box9(const ScheduleSpec& schedule, const float* in, float* out, int w, int h, int block,
                     cudaStream_t stream);

}  // namespace cbi::bench
