#include "apps/bench/matmul.hpp"

#include <cublas_v2.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "pipeline/cuda_runtime.hpp"
#include "pipeline/error.hpp"

namespace cbi::bench {
namespace {

// Thesis Fig. 5.1b: one thread per element of C, found through the registry's
// schedule (listing 5 applied to C): x = column of C, y = row.
template <class Schedule>
__global__ void matmul_remap(Schedule schedule, const float* __restrict__ a, const float* __restrict__ b,
                             float* __restrict__ c, int m, int n, int k) {
    const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= static_cast<std::uint32_t>(m) * static_cast<std::uint32_t>(n)) return;
    const Pixel p = schedule.map(i, n, m);
    const float* row = a + static_cast<std::size_t>(p.y) * k;
    float acc = 0.f;
    for (int t = 0; t < k; ++t) acc += row[t] * b[static_cast<std::size_t>(t) * n + p.x];
    c[static_cast<std::size_t>(p.y) * n + p.x] = acc;
}

// Seed 004: both operands staged through shared memory in T x T tiles; B's
// tile padded to T + 1 columns against bank conflicts, as the seed advises.
template <int T>
__global__ void __launch_bounds__(T* T)
    matmul_smem(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int m, int n, int k) {
    __shared__ float as[T][T];
    __shared__ float bs[T][T + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    float acc = 0.f;
    for (int kk = 0; kk < k; kk += T) {
        as[ty][tx] = row < m && kk + tx < k ? a[static_cast<std::size_t>(row) * k + kk + tx] : 0.f;
        bs[ty][tx] = kk + ty < k && col < n ? b[static_cast<std::size_t>(kk + ty) * n + col] : 0.f;
        __syncthreads();
#pragma unroll
        for (int t = 0; t < T; ++t) acc += as[ty][t] * bs[t][tx];
        __syncthreads();
    }
    if (row < m && col < n) c[static_cast<std::size_t>(row) * n + col] = acc;
}

// Seed 003: a T x T block computes a (T*R) x (T*R) tile of C, each thread an
// R x R register tile. Thread (tx, ty) owns rows ty*R + i (as the seed) and
// columns tx + j*T (strided, so shared reads and C stores stay coalesced).
template <int T, int R>
__global__ void __launch_bounds__(T* T) matmul_regtile(const float* __restrict__ a, const float* __restrict__ b,
                                                       float* __restrict__ c, int m, int n, int k) {
    __shared__ float as[T * R][T + 1];  // +1: rows ty*R and (ty+1)*R would share a bank
    __shared__ float bs[T][T * R];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * T * R, col0 = blockIdx.x * T * R;
    float acc[R][R];
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
        for (int j = 0; j < R; ++j) acc[i][j] = 0.f;
    for (int kk = 0; kk < k; kk += T) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int ar = row0 + ty + r * T, ac = kk + tx;
            as[ty + r * T][tx] = ar < m && ac < k ? a[static_cast<std::size_t>(ar) * k + ac] : 0.f;
            const int br = kk + ty, bc = col0 + tx + r * T;
            bs[ty][tx + r * T] = br < k && bc < n ? b[static_cast<std::size_t>(br) * n + bc] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int t = 0; t < T; ++t) {
            float av[R], bv[R];
#pragma unroll
            for (int i = 0; i < R; ++i) av[i] = as[ty * R + i][t];
#pragma unroll
            for (int j = 0; j < R; ++j) bv[j] = bs[t][tx + j * T];
#pragma unroll
            for (int i = 0; i < R; ++i)
#pragma unroll
                for (int j = 0; j < R; ++j) acc[i][j] += av[i] * bv[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < R; ++i) {
        const int row = row0 + ty * R + i;
#pragma unroll
        for (int j = 0; j < R; ++j) {
            const int col = col0 + tx + j * T;
            if (row < m && col < n) c[static_cast<std::size_t>(row) * n + col] = acc[i][j];
        }
    }
}

// Seed 001 (Volkov & Demmel, row-major): blockDim.x = W threads own W
// consecutive columns of C and H rows each (registers). Only the H x H block
// of A is shared; B is read straight into a register, coalesced across the warp.
template <int H>
__global__ void matmul_volkov(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int m,
                              int n, int k) {
    __shared__ float as[H][H + 1];
    const int w = blockDim.x, tx = threadIdx.x;
    const int col = blockIdx.x * w + tx, row0 = blockIdx.y * H;
    float acc[H];
#pragma unroll
    for (int i = 0; i < H; ++i) acc[i] = 0.f;
    for (int kk = 0; kk < k; kk += H) {
        for (int e = tx; e < H * H; e += w) {
            const int r = e / H, cc = e % H;
            as[r][cc] = row0 + r < m && kk + cc < k ? a[static_cast<std::size_t>(row0 + r) * k + kk + cc] : 0.f;
        }
        __syncthreads();
        if (col < n) {
#pragma unroll
            for (int t = 0; t < H; ++t) {
                const float bv = kk + t < k ? b[static_cast<std::size_t>(kk + t) * n + col] : 0.f;
#pragma unroll
                for (int i = 0; i < H; ++i) acc[i] += as[i][t] * bv;
            }
        }
        __syncthreads();
    }
    if (col < n) {
#pragma unroll
        for (int i = 0; i < H; ++i)
            if (row0 + i < m) c[static_cast<std::size_t>(row0 + i) * n + col] = acc[i];
    }
}

unsigned ceil_div(long a, long b) {
    return static_cast<unsigned>((a + b - 1) / b);
}

void check_cublas(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS) throw Error(what, "cuBLAS status " + std::to_string(static_cast<int>(s)));
}

}  // namespace

std::string MatmulVariant::name() const {
    switch (kind) {
        case MatmulKind::smem: return "smem:" + std::to_string(p);
        case MatmulKind::regtile: return "regtile:" + std::to_string(p) + "x" + std::to_string(q);
        case MatmulKind::volkov: return "volkov:" + std::to_string(p) + "x" + std::to_string(q);
        case MatmulKind::cublas: return "cublas";
        case MatmulKind::remap: break;
    }
    return schedule.to_string();
}

int MatmulVariant::threads(int block) const {
    switch (kind) {
        case MatmulKind::smem: return p * p;
        case MatmulKind::regtile: return p * p;
        case MatmulKind::volkov: return p;
        case MatmulKind::cublas: return 0;
        case MatmulKind::remap: break;
    }
    return block;
}

MatmulVariant parse_matmul_variant(const std::string& text) {
    MatmulVariant v;
    int p = 0, q = 0;
    char tail = 0;
    if (text == "cublas") {
        v.kind = MatmulKind::cublas;
    } else if (std::sscanf(text.c_str(), "smem:%d%c", &p, &tail) == 1) {
        if (p != 16 && p != 32) throw std::invalid_argument("matmul '" + text + "': smem:T takes T = 16 or 32");
        v = {MatmulKind::smem, {}, p, 0};
    } else if (std::sscanf(text.c_str(), "regtile:%dx%d%c", &p, &q, &tail) == 2) {
        if (!((p == 16 && (q == 4 || q == 8)) || (p == 8 && q == 8)))
            throw std::invalid_argument("matmul '" + text + "': regtile:TxR takes 16x4, 16x8 or 8x8");
        v = {MatmulKind::regtile, {}, p, q};
    } else if (std::sscanf(text.c_str(), "volkov:%dx%d%c", &p, &q, &tail) == 2) {
        if ((q != 16 && q != 32) || p < 32 || p > 1024 || p % 32)
            throw std::invalid_argument("matmul '" + text + "': volkov:WxH takes W a multiple of 32, H = 16 or 32");
        v = {MatmulKind::volkov, {}, p, q};
    } else {
        v.schedule = parse_schedule(text);  // the registry decides what remaps exist
    }
    return v;
}

Cublas::Cublas() {
    cublasHandle_t h = nullptr;
    check_cublas(cublasCreate(&h), "cublasCreate");
    handle_ = h;
}
Cublas::~Cublas() {
    cublasDestroy(static_cast<cublasHandle_t>(handle_));
}

void run_matmul(const MatmulVariant& v, const float* a, const float* b, float* c, int m, int n, int k, int block,
                cudaStream_t stream, Cublas& cublas) {
    const std::string what = "launch matmul " + v.name();
    switch (v.kind) {
        case MatmulKind::remap: {
            const std::uint64_t total = static_cast<std::uint64_t>(m) * n;
            with_schedule(v.schedule, [&](auto schedule) {
                matmul_remap<<<ceil_div(static_cast<long>(total), block), block, 0, stream>>>(schedule, a, b, c, m, n,
                                                                                              k);
            });
            break;
        }
        case MatmulKind::smem: {
            const dim3 grid(ceil_div(n, v.p), ceil_div(m, v.p)), threads(v.p, v.p);
            if (v.p == 16)
                matmul_smem<16><<<grid, threads, 0, stream>>>(a, b, c, m, n, k);
            else
                matmul_smem<32><<<grid, threads, 0, stream>>>(a, b, c, m, n, k);
            break;
        }
        case MatmulKind::regtile: {
            const int tile = v.p * v.q;
            const dim3 grid(ceil_div(n, tile), ceil_div(m, tile)), threads(v.p, v.p);
            if (v.p == 16 && v.q == 4)
                matmul_regtile<16, 4><<<grid, threads, 0, stream>>>(a, b, c, m, n, k);
            else if (v.p == 16 && v.q == 8)
                matmul_regtile<16, 8><<<grid, threads, 0, stream>>>(a, b, c, m, n, k);
            else
                matmul_regtile<8, 8><<<grid, threads, 0, stream>>>(a, b, c, m, n, k);
            break;
        }
        case MatmulKind::volkov: {
            const dim3 grid(ceil_div(n, v.p), ceil_div(m, v.q));
            if (v.q == 16)
                matmul_volkov<16><<<grid, v.p, 0, stream>>>(a, b, c, m, n, k);
            else
                matmul_volkov<32><<<grid, v.p, 0, stream>>>(a, b, c, m, n, k);
            break;
        }
        case MatmulKind::cublas: {
            // Row-major C = A B is column-major C^T = B^T A^T: swap the operands.
            const auto h = static_cast<cublasHandle_t>(cublas.handle());
            check_cublas(cublasSetStream(h, stream), "cublasSetStream");
            const float one = 1.f, zero = 0.f;
            check_cublas(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, n, a, k, &zero, c, n),
                         "cublasSgemm");
            break;
        }
    }
    CBI_CUDA_CHECK(cudaGetLastError(), what);
}

}  // namespace cbi::bench
