#pragma once
// Launch helpers the CUDA strategies share: the device's shared-memory
// limit, the one refusal when a block needs more, the opt-in that lets a
// kernel take more than 48 KiB of dynamic shared memory, and how many blocks
// one wave of a launch holds; and the per-pixel kernel.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "filters/cuda/check.hpp"
#include "filters/error.hpp"
#include "filters/kernel_path.hpp"
#include "schedules/schedule.hpp"

namespace cbi::cuda {

// Devices whose answers are kept (ordinals past this are asked every time).
inline constexpr int kCachedDevices = 64;

inline int current_device() {
    int device = 0;
    CBI_CUDA_CHECK(cudaGetDevice(&device), "cudaGetDevice");
    return device;
}

// The most dynamic shared memory one block may use on `device` (the opt-in
// limit), asked once per device.
inline int shared_memory_limit(int device) {
    static std::atomic<int> known[kCachedDevices];  // 0: not asked yet
    if (device >= 0 && device < kCachedDevices)
        if (const int limit = known[device].load(std::memory_order_relaxed)) return limit;
    int limit = 0;
    CBI_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                   "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
    if (device >= 0 && device < kCachedDevices) known[device].store(limit, std::memory_order_relaxed);
    return limit;
}

// Throws Unsupported when a block of `what` needs more shared memory than
// `device` has: the command may work on a larger GPU, or with `remedy`.
inline void require_shared_memory(std::size_t bytes, int device, const std::string& what, const std::string& remedy) {
    const int limit = shared_memory_limit(device);
    if (bytes <= static_cast<std::size_t>(limit)) return;
    throw Unsupported(what, "needs " + std::to_string((bytes + 1023) / 1024) +
                                " KiB of shared memory per block, more than this GPU's " +
                                std::to_string(limit / 1024) + " KiB; " + remedy);
}

// Lets Kernel launch with up to the device's limit of dynamic shared memory
// (above 48 KiB a kernel must opt in, per function and device); the driver
// is asked once per kernel and device. The limit only permits: a launch's
// occupancy follows the shared memory it asks for.
template <auto Kernel>
void allow_shared_memory(int device) {
    static std::atomic<bool> allowed[kCachedDevices];
    const bool cached = device >= 0 && device < kCachedDevices;
    if (cached && allowed[device].load(std::memory_order_relaxed)) return;
    CBI_CUDA_CHECK(
        cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_memory_limit(device)),
        "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
    if (cached) allowed[device].store(true, std::memory_order_relaxed);
}

// The most threads a block of Kernel may have (its registers decide), asked
// once per kernel; 0 when the attributes cannot be read.
template <auto Kernel>
int max_threads_per_block() {
    static const int n = [] {
        cudaFuncAttributes a{};
        return cudaFuncGetAttributes(&a, Kernel) == cudaSuccess ? a.maxThreadsPerBlock : 0;
    }();
    return n;
}

// The blocks of `kernel` with `threads` threads and `shared` bytes of
// dynamic shared memory that all SMs of `device` (the current device) hold
// at once: one wave of a launch. At least 1.
template <class Kernel>
int blocks_per_wave(Kernel* kernel, int threads, std::size_t shared, int device) {
    int per_sm = 0, sms = 0;
    CBI_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, shared),
                   "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    CBI_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
                   "cudaDeviceGetAttribute(MultiProcessorCount)");
    return std::max(per_sm * sms, 1);
}

// Thesis listing 5 generalised: the global thread index goes through the
// node's schedule to find the pixel; the op computes it. __grid_constant__:
// ops that index their own arrays with data (the bilateral weight tables,
// 3.8 KB) read them from the kernel parameter; a plain by-value parameter
// made nvcc copy the whole op into every thread's stack (a 3928-byte frame).
template <class Schedule, class Op>
__global__ void apply_schedule(Schedule schedule, const __grid_constant__ Op op, std::uint32_t n, int width,
                               int height) {
    const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const Pixel p = schedule.map(i, width, height);
    op(p.x, p.y);
}

// One thread per pixel of a width x height output, `block` threads a block.
template <class Schedule, class Op>
void launch_per_pixel(const Schedule& schedule, const Op& op, int width, int height, cudaStream_t stream, int block,
                      const char* what) {
    const auto n = static_cast<std::uint32_t>(width) * static_cast<std::uint32_t>(height);
    const std::uint64_t blocks = (static_cast<std::uint64_t>(n) + block - 1) / block;
    if (blocks > 0x7fffffffull) throw Error("launch", "image too large for --block " + std::to_string(block));
    if (blocks == 0) return;
    note_kernel_path(KernelPath::cuda_index_map);
    apply_schedule<<<static_cast<unsigned>(blocks), block, 0, stream>>>(schedule, op, n, width, height);
    CBI_CUDA_CHECK(cudaGetLastError(), std::string("launch ") + what);
}

}  // namespace cbi::cuda
