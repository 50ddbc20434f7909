#include "filters/kernel_path.hpp"

namespace cbi {
namespace {
thread_local KernelPath last = KernelPath::none;
}

const char* to_string(KernelPath path) {
    switch (path) {
        case KernelPath::cpu_index_map: return "cpu index map";
        case KernelPath::cpu_rows: return "cpu rows";
        case KernelPath::cpu_color_rows: return "cpu colour rows";
        case KernelPath::cpu_blend_rows: return "cpu blend rows";
        case KernelPath::cpu_separable_tiles: return "cpu separable tiles";
        case KernelPath::cpu_chain: return "cpu chain through line buffers";
        case KernelPath::cuda_index_map: return "cuda index map";
        case KernelPath::cuda_smem: return "cuda smem";
        case KernelPath::cuda_sep: return "cuda sep";
        case KernelPath::cuda_stream: return "cuda stream";
        case KernelPath::cuda_stream8: return "cuda stream 8-bit";
        case KernelPath::cuda_vec: return "cuda vec";
        case KernelPath::cuda_chain: return "cuda fused pair";
        case KernelPath::cuda_chain_stream: return "cuda fused pair, streamed";
        case KernelPath::cuda_blend_stream8: return "cuda fused blend, stream 8-bit";
        case KernelPath::cuda_morph: return "cuda morphology van Herk";
        case KernelPath::cuda_median: return "cuda median words";
        case KernelPath::cuda_staged_window: return "cuda staged window";
        case KernelPath::none: break;
    }
    return "none";
}

KernelPath last_kernel_path() {
    return last;
}
void note_kernel_path(KernelPath path) {
    last = path;
}

}  // namespace cbi
