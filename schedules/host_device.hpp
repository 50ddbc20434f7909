#pragma once
// Shared headers compile both as plain C++ and under nvcc: CBI_HOST_DEVICE
// marks a function callable from host and device code.
// CBI_HOST_DEVICE_NOINLINE keeps one out-of-line copy (for rarely taken
// paths that would bloat unrolled kernels if inlined everywhere).
#if defined(__CUDACC__)
#define CBI_HOST_DEVICE __host__ __device__ __forceinline__
#define CBI_HOST_DEVICE_NOINLINE __host__ __device__ __noinline__
#else
#define CBI_HOST_DEVICE inline
#define CBI_HOST_DEVICE_NOINLINE inline
#endif
