#pragma once
// Matrix-multiplication workloads of cbi-bench: C[m x n] = A[m x k] * B[k x n],
// row-major float32, device pointers.
//   remap      one thread per element of C; thread i computes the element at
//              schedule.map(i, n, m) of any registered schedule ("naive",
//              "column:32", ...: thesis Fig. 5.1b / 5.4)
//   smem:T     T x T shared-memory block tiling (seed 004), T = 16 or 32
//   regtile:TxR  block tiling plus an R x R register tile per thread (seed 003),
//              T x T threads, (T*R) x (T*R) elements of C per block
//   volkov:WxH W threads per block, each keeps an H-element column of C in
//              registers; only the H x H block of A goes to shared memory, B
//              streams from global memory into a register (seed 001)
//   cublas     cublasSgemm, FP32 (the reference peer)
#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "schedules/registry.hpp"

namespace cbi::bench {

enum class MatmulKind { remap, smem, regtile, volkov, cublas };

struct MatmulVariant {
    MatmulKind kind = MatmulKind::remap;
    ScheduleSpec schedule;  // remap only
    int p = 0;              // smem: T; regtile: T; volkov: W
    int q = 0;              // regtile: R; volkov: H
    std::string name() const;
    // Threads per block this variant launches with (remap: the caller's block).
    int threads(int block) const;
};

// "naive", any registered schedule, "smem:T", "regtile:TxR", "volkov:WxH",
// "cublas". Throws std::invalid_argument for unknown forms and unsupported
// template parameters.
MatmulVariant parse_matmul_variant(const std::string& text);

// Owns a cuBLAS handle (created once, outside the timed region).
class Cublas {
public:
    Cublas();
    ~Cublas();
    Cublas(const Cublas&) = delete;
    Cublas& operator=(const Cublas&) = delete;
    void* handle() const { return handle_; }

private:
    void* handle_ = nullptr;
};

// Enqueues C = A * B on `stream`; checks the launch. `block` is the thread
// count of remap variants (the others fix theirs from their parameters).
void run_matmul(const MatmulVariant& v, const float* a, const float* b, float* c, int m, int n, int k, int block,
                cudaStream_t stream, Cublas& cublas);

}  // namespace cbi::bench
