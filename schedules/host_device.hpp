#pragma once
// Shared headers compile both as plain C++ and under nvcc: CBI_HOST_DEVICE
// marks a function callable from host and device code.
#if defined(__CUDACC__)
#define CBI_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define CBI_HOST_DEVICE inline
#endif
