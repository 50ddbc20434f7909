#pragma once
// Launch helpers the CUDA strategies share: the device's shared-memory
// limit, the one refusal when a block needs more, the opt-in that lets a
// kernel take more than 48 KiB of dynamic shared memory, and how many blocks
// one wave of a launch holds.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <string>

#include "filters/cuda/check.hpp"
#include "filters/error.hpp"

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
    throw Unsupported(what, "needs " + std::to_string((bytes + 1023) / 1024) + " KiB of shared memory per block, more than this GPU's " +
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
    CBI_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_memory_limit(device)),
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

}  // namespace cbi::cuda
