// A sticky CUDA error (an illegal address) poisons the context: cbi reports
// it with CUDA's error name, marks the device unusable and refuses later
// work on it instead of retrying. Its own executable, since the poisoned
// context lasts for the rest of the process; not run under memcheck (the
// illegal access is deliberate). The wait runs inside a TBB task, as in a
// batch: the suspended wait (wait_for_stream) must resume with the error,
// not hang.
#include <gtest/gtest.h>
#include <oneapi/tbb/task_arena.h>

#include "filters/cuda/backend.hpp"
#include "pipeline/cuda_runtime.hpp"
#include "pipeline/error.hpp"

namespace cbi {
namespace {

TEST(CudaErrors, IllegalAddressMarksTheDeviceUnusable) {
    std::string why;
    if (cuda_device_count(why) == 0) GTEST_SKIP() << "no CUDA device: " << why;
    use_device(0);
    const Stream stream;
    // A view whose pointer is no device allocation.
    const ImageView bogus{reinterpret_cast<std::byte*>(std::uintptr_t{0x1000}), 512, 512, 1, Depth::u8, 512};
    const FilterRun node{parse_filter("blur:3"), Border{}, ScheduleSpec{}};
    try {
        run_node_cuda(node, bogus, bogus, stream.get(), 256);
        tbb::task_arena(1).execute([&] { stream.synchronize("after a kernel on a bogus pointer"); });
        FAIL() << "no error reported";
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("cudaErrorIllegalAddress"), std::string::npos) << what;
        EXPECT_NE(what.find("unusable"), std::string::npos) << what;
    }
    try {
        use_device(0);
        FAIL() << "device 0 accepted after a sticky error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("unusable after an earlier error"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace cbi
