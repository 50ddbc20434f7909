#include "filters/cuda/check.hpp"

#include <cstring>
#include <map>
#include <mutex>

#include "filters/error.hpp"

namespace cbi {
namespace {

// Errors after which the CUDA context is unusable for the process.
bool is_sticky(cudaError_t e) {
    switch (e) {
        case cudaErrorIllegalAddress:
        case cudaErrorLaunchFailure:
        case cudaErrorHardwareStackError:
        case cudaErrorIllegalInstruction:
        case cudaErrorMisalignedAddress:
        case cudaErrorInvalidAddressSpace:
        case cudaErrorInvalidPc:
        case cudaErrorAssert:
        case cudaErrorLaunchTimeout:
        case cudaErrorECCUncorrectable: return true;
        default: return false;
    }
}

std::mutex poisoned_mutex;
std::map<int, std::string> poisoned;  // device -> the error that poisoned it
thread_local int current_device = 0;

}  // namespace

void cuda_check(cudaError_t status, const std::string& operation, const char* file, int line) {
    if (status == cudaSuccess) return;
    std::string message = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
    if (is_sticky(status)) {
        std::lock_guard lock(poisoned_mutex);
        poisoned.emplace(current_device, operation + ": " + message);
        message += " (the device is unusable for the rest of this process)";
    } else {
        cudaGetLastError();  // clear a recoverable error so it is not reported again
    }
    const char* base = std::strrchr(file, '/');
    const std::string where = " [" + std::string(base ? base + 1 : file) + ":" + std::to_string(line) + "]";
    if (is_sticky(status)) throw DeviceLost("CUDA " + operation, message + where);
    throw Error("CUDA " + operation, message + where);
}

void use_device(int device) {
    {
        std::lock_guard lock(poisoned_mutex);
        if (auto it = poisoned.find(device); it != poisoned.end())
            throw DeviceLost("CUDA device " + std::to_string(device), "unusable after an earlier error: " + it->second);
    }
    current_device = device;
    CBI_CUDA_CHECK(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
}

}  // namespace cbi
