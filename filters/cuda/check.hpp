#pragma once
// CUDA error checking (only in builds with CBI_HAVE_CUDA), in the filters
// layer because the kernels' launchers need it; pipeline/cuda_runtime.hpp
// adds the CUDA resources on top.
// Every CUDA call goes through CBI_CUDA_CHECK: a failure becomes a
// cbi::Error carrying the operation, CUDA's error name and message. Errors
// that poison the context (illegal address, launch failure, ...) mark the
// device unusable for the rest of the process: later use reports the first
// error instead of retrying. Out-of-memory is reported and recoverable.
#include <cuda_runtime_api.h>

#include <string>

namespace cbi {

// Throws cbi::Error for `status` (no-op for cudaSuccess). `operation` names
// what was attempted, e.g. "cudaMalloc(4194304 bytes)".
void cuda_check(cudaError_t status, const std::string& operation, const char* file, int line);
#define CBI_CUDA_CHECK(call, operation) ::cbi::cuda_check((call), (operation), __FILE__, __LINE__)

// Makes `device` current; throws if an earlier sticky error made it unusable
// (here because it reads the state cuda_check keeps).
void use_device(int device);

}  // namespace cbi
