#pragma once
// Which kernel a node's launch took, recorded per calling thread by the
// launchers of both backends: tests pin routing with it, so that a node
// quietly running a slower kernel than its schedule names fails a test, not
// only a benchmark.
namespace cbi {

enum class KernelPath {
    none,
    cpu_index_map,        // per pixel, in the schedule's index order
    cpu_rows,             // per pixel, row by row (naive, vec)
    cpu_color_rows,       // colour matrix a row at a time, vectorised (cpu/color.cpp)
    cpu_blend_rows,       // blend a row at a time, vectorised (cpu/color.cpp)
    cpu_separable_tiles,  // separable passes tile by tile (cpu/separable.hpp)
    cpu_chain,            // a fused colour node or stencil pair, tiles through line buffers (cpu/pair_lines.hpp)
    cuda_index_map,       // one thread per pixel through the schedule's map
    cuda_smem,
    cuda_sep,
    cuda_stream,   // the generic streaming kernel (cuda/strip.cuh)
    cuda_stream8,  // the 8-bit streaming kernel (cuda/strip8.cuh)
    cuda_vec,
    cuda_chain,          // a fused stencil pair, tile by tile (cuda/pair.cu)
    cuda_chain_stream,   // a fused stencil pair, strips through line buffers (cuda/pair_strip.cuh)
    cuda_blend_stream8,  // a blend with its stencils, on the 8-bit streaming kernel (cuda/blend.cu)
    cuda_morph,          // morphology: van Herk / Gil-Werman passes, small rectangles in one, runs (cuda/morph.cuh)
    cuda_median,         // median 3 or 5 a word of samples per thread, 8-bit K >= 7 histograms (cuda/median.cuh)
    cuda_staged_window,  // a block's tile staged in shared memory (cuda/bilateral.cuh, cuda/filter2d.cuh)
};

const char* to_string(KernelPath path);
// The path of the last launch on this thread (none before any).
KernelPath last_kernel_path();
void note_kernel_path(KernelPath path);

}  // namespace cbi
