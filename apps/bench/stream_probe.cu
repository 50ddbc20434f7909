// Tunes stream:WxH on the GPU host: times the stream kernel for several run
// lengths R (samples per thread), rows-ahead depths D, strip sizes and block
// sizes on random 4096^2 images, next to a device-to-device copy of the same
// bytes (the floor), with CUDA events (median of 20 after 3 warm-ups, inputs
// rotated so L2 does not hold them). Needs only the CUDA runtime (no OpenCV):
//   nvcc -std=c++20 --expt-relaxed-constexpr -O3 -arch=sm_90 -I. apps/bench/stream_probe.cu -o probe   # here
//   ./probe            # GPU host; ./probe stream8: only the 8-bit box/Gaussian kernel (cuda/strip8.cuh)
// Correctness is the test suites' job; the weights here are arbitrary (the
// timing does not depend on them). Results: docs/performance.md#strip-heights.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string_view>
#include <vector>

#include "filters/cuda/strip.cuh"
#include "filters/cuda/strip8.cuh"

using namespace cbi;
using namespace cbi::cuda;

#define CHECK(x)                                                                              \
    do {                                                                                      \
        cudaError_t e = (x);                                                                  \
        if (e != cudaSuccess) {                                                               \
            std::printf("CUDA error %s at %s:%d\n", cudaGetErrorName(e), __FILE__, __LINE__); \
            std::exit(1);                                                                     \
        }                                                                                     \
    } while (0)

struct Buffers {
    int w, h, c, sz;
    std::size_t stride;
    std::vector<std::byte*> in;
    std::byte* out = nullptr;
};

Buffers make(int w, int h, int c, int sz, int rotations) {
    Buffers b{w, h, c, sz, 0, {}, nullptr};
    std::vector<unsigned char> host(static_cast<std::size_t>(w) * c * sz * h);
    std::mt19937 rng(1);
    for (auto& v : host) v = static_cast<unsigned char>(rng());
    if (sz == 4)  // finite floats in [0, 255]
        for (std::size_t i = 0; i < host.size() / 4; ++i)
            reinterpret_cast<float*>(host.data())[i] = static_cast<float>(rng() % 25600) / 100.f;
    for (int r = 0; r < rotations; ++r) {
        std::byte* p;
        CHECK(cudaMallocPitch(reinterpret_cast<void**>(&p), &b.stride, static_cast<std::size_t>(w) * c * sz, h));
        CHECK(cudaMemcpy2D(p, b.stride, host.data(), static_cast<std::size_t>(w) * c * sz,
                           static_cast<std::size_t>(w) * c * sz, h, cudaMemcpyHostToDevice));
        b.in.push_back(p);
    }
    CHECK(cudaMallocPitch(reinterpret_cast<void**>(&b.out), &b.stride, static_cast<std::size_t>(w) * c * sz, h));
    return b;
}

template <class F>
float median_ms(F&& launch, int n_in) {
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    for (int i = 0; i < 3; ++i) launch(i % n_in);
    std::vector<float> t;
    for (int i = 0; i < 20; ++i) {
        CHECK(cudaEventRecord(a));
        launch(i % n_in);
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    CHECK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

ImageView view(std::byte* p, const Buffers& b, Depth d) {
    return ImageView{p, b.w, b.h, b.c, d, b.stride};
}

template <class T>
constexpr Depth depth_of() {
    return sizeof(T) == 1 ? Depth::u8 : sizeof(T) == 2 ? Depth::u16 : Depth::f32;
}

double g_bandwidth = 0;

template <int R, int D, class Op>
void time_variant(const char* name, const Op& proto, const Buffers& b) {
    using T = typename Op::Sample;
    const double floor_ms = 2.0 * b.w * b.h * b.c * b.sz / g_bandwidth * 1e3;
    for (const auto [sw, sh] : {std::pair{128, 64}, {256, 64}, {512, 32}, {256, 128}, {1024, 32}})
        for (int block : {128, 256}) {
            Op op = proto;
            const float ms = median_ms(
                [&](int i) {
                    op.src.view = view(b.in[i], b, depth_of<T>());
                    op.dst = view(b.out, b, depth_of<T>());
                    launch_stream<R, D>(stream_schedule(sw, sh), op, nullptr, block);
                },
                static_cast<int>(b.in.size()));
            std::printf("%-14s %dx%d:%d R=%-2d D=%d stream:%dx%-4d block %-4d %8.4f ms %6.2fx floor\n", name, b.w, b.h,
                        b.c, R, D, sw, sh, block, ms, ms / floor_ms);
        }
}

// The 8-bit box/Gaussian kernel (cuda/strip8.cuh): strip sizes and block sizes.
template <class Op>
void time_stream8(const char* name, const Op& proto, const Buffers& b) {
    const double floor_ms = 2.0 * b.w * b.h * b.c * b.sz / g_bandwidth * 1e3;
    for (const auto [sw, sh] :
         {std::pair{128, 8}, {128, 16}, {256, 16}, {256, 32}, {512, 16}, {512, 32}, {1024, 16}, {1024, 64}})
        for (int block : {256, 512}) {
            Op op = proto;
            const float ms = median_ms(
                [&](int i) {
                    op.src.view = view(b.in[i], b, Depth::u8);
                    op.dst = view(b.out, b, Depth::u8);
                    if (!launch_stream8(stream_schedule(sw, sh), op, nullptr, block)) std::exit(2);
                },
                static_cast<int>(b.in.size()));
            std::printf("%-14s %dx%d:%d stream8 stream:%dx%-4d block %-4d %8.4f ms %6.2fx floor\n", name, b.w, b.h, b.c,
                        sw, sh, block, ms, ms / floor_ms);
        }
}

template <class T, BorderMode B = BorderMode::reflect101>
using Src = AnyBorderSource<T>;

template <class T>
GaussianOp<T, BorderMode::reflect101, Src<T>> gaussian9() {
    GaussianOp<T, BorderMode::reflect101, Src<T>> op{};
    op.src.mode = BorderMode::reflect101;
    op.ksize = 9;
    // 8-bit: OpenCV's fixed-point weights (1/256) for k = 9; float: about the same values.
    const float w[9] = {0.0276f, 0.0663f, 0.1238f, 0.1802f, 0.2042f, 0.1802f, 0.1238f, 0.0663f, 0.0276f};
    const std::uint16_t fixed[9] = {4, 13, 30, 51, 60, 51, 30, 13, 4};
    for (int i = 0; i < 9; ++i) {
        if constexpr (decltype(op)::kFixedPoint)
            op.weights[i] = fixed[i];
        else
            op.weights[i] = w[i];
    }
    return op;
}
template <class T>
BoxOp<T, BorderMode::reflect101, Src<T>> box9() {
    BoxOp<T, BorderMode::reflect101, Src<T>> op{{}, 9};  // ksize 9 (mean_magic follows from it)
    op.src.mode = BorderMode::reflect101;
    return op;
}
template <class T>
SobelOp<T, BorderMode::reflect101, Src<T>> sobel_mag3() {
    SobelOp<T, BorderMode::reflect101, Src<T>> op{};
    op.src.mode = BorderMode::reflect101;
    op.mode = SobelMode::mag;
    op.k = SobelKernels{{-1, 0, 1}, {1, 2, 1}, 3, 3};
    return op;
}

int main(int argc, char** argv) {
    const int n = 4096;
    {  // the floor: a device-to-device copy of 256 MiB (bytes read + written)
        std::byte *a, *b;
        const std::size_t bytes = 256u << 20;
        CHECK(cudaMalloc(&a, bytes));
        CHECK(cudaMalloc(&b, bytes));
        const float ms = median_ms([&](int) { CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); }, 1);
        g_bandwidth = 2.0 * bytes / (ms * 1e-3);
        std::printf("device-to-device copy: %.0f GB/s\n", g_bandwidth / 1e9);
        CHECK(cudaFree(a));
        CHECK(cudaFree(b));
    }
    const Buffers f1 = make(n, n, 1, 4, 3);
    const Buffers u3 = make(n, n, 3, 1, 3);
    if (argc > 1 && std::string_view(argv[1]) == "stream8") {  // the 8-bit kernel only
        const Buffers u1 = make(n, n, 1, 1, 3);
        time_stream8("gaussian:9", gaussian9<std::uint8_t>(), u3);
        time_stream8("blur:9", box9<std::uint8_t>(), u3);
        time_stream8("gaussian:9", gaussian9<std::uint8_t>(), u1);
        time_stream8("blur:9", box9<std::uint8_t>(), u1);
        return 0;
    }
    time_variant<4, 1>("gaussian:9", gaussian9<float>(), f1);
    time_variant<2, 1>("gaussian:9", gaussian9<float>(), f1);
    time_variant<4, 3>("gaussian:9", gaussian9<float>(), f1);
    time_variant<2, 3>("gaussian:9", gaussian9<float>(), f1);
    time_variant<4, 1>("blur:9", box9<float>(), f1);
    time_variant<2, 3>("blur:9", box9<float>(), f1);
    time_variant<4, 1>("sobel:mag:3", sobel_mag3<float>(), f1);
    time_variant<4, 3>("sobel:mag:3", sobel_mag3<float>(), f1);
    time_variant<8, 1>("gaussian:9", gaussian9<std::uint8_t>(), u3);
    time_variant<4, 1>("gaussian:9", gaussian9<std::uint8_t>(), u3);
    time_variant<4, 3>("gaussian:9", gaussian9<std::uint8_t>(), u3);
    time_variant<8, 1>("blur:9", box9<std::uint8_t>(), u3);
    time_variant<4, 3>("blur:9", box9<std::uint8_t>(), u3);
    time_variant<8, 1>("sobel:mag:3", sobel_mag3<std::uint8_t>(), u3);
    time_variant<4, 3>("sobel:mag:3", sobel_mag3<std::uint8_t>(), u3);
    return 0;
}
