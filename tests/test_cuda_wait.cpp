// wait_for_stream (pipeline/cuda_runtime.hpp) inside TBB tasks: the waiting
// task is suspended, so the thread runs other tasks meanwhile (a batch's
// decode and encode), and it resumes once the stream's work is done.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>

#include <gtest/gtest.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include "gpu.hpp"
#include "pipeline/cuda_runtime.hpp"

namespace cbi {
namespace {

using Clock = std::chrono::steady_clock;

TEST(CudaWait, OneThreadRunsAnotherTaskWhileATaskWaits) {
    REQUIRE_GPU();
    // Two tasks on an arena of one thread, each enqueueing ~10 ms of device
    // work and then waiting for it. A blocking wait would run them one after
    // the other; suspended, the thread enqueues the second task's work while
    // the first task's is still running.
    constexpr std::size_t bytes = std::size_t{1} << 30;
    std::array<DeviceBuffer, 2> buffers{DeviceBuffer(bytes), DeviceBuffer(bytes)};
    std::array<Stream, 2> streams;
    std::array<Clock::time_point, 2> enqueued{}, done{};
    std::atomic<int> tasks{0};
    tbb::task_arena arena(1);
    arena.execute([&] {
        tbb::parallel_for(
            0, 2, 1,
            [&](int i) {
                ++tasks;
                for (int r = 0; r < 20; ++r)
                    CBI_CUDA_CHECK(cudaMemsetAsync(buffers[i].data(), r, bytes, streams[i].get()), "cudaMemsetAsync");
                enqueued[i] = Clock::now();
                wait_for_stream(streams[i].get(), "cudaStreamSynchronize in the test");
                done[i] = Clock::now();
            },
            tbb::simple_partitioner());
    });
    ASSERT_EQ(tasks.load(), 2);
    EXPECT_LT(std::max(enqueued[0], enqueued[1]), std::min(done[0], done[1]))
        << "the second task started only after the first one's wait returned";
    for (const Stream& s : streams) EXPECT_EQ(cudaStreamQuery(s.get()), cudaSuccess);
}

TEST(CudaWait, OutsideTbbItWaitsInPlace) {
    REQUIRE_GPU();
    DeviceBuffer buffer(std::size_t{1} << 20);
    const Stream stream;
    CBI_CUDA_CHECK(cudaMemsetAsync(buffer.data(), 1, buffer.size(), stream.get()), "cudaMemsetAsync");
    wait_for_stream(stream.get(), "cudaStreamSynchronize in the test");
    EXPECT_EQ(cudaStreamQuery(stream.get()), cudaSuccess);
}

}  // namespace
}  // namespace cbi
