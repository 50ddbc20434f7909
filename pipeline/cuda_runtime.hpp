#pragma once
// CUDA resources (only in builds with CBI_HAVE_CUDA): devices, buffers,
// streams, timers, device images, copies. The error check (CBI_CUDA_CHECK,
// use_device) is in filters/cuda/check.hpp, included here.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

#include "filters/cuda/check.hpp"
#include "pipeline/image.hpp"

namespace cbi {

// Usable CUDA devices; 0 with `why` filled in when there are none.
int cuda_device_count(std::string& why);

class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(std::size_t bytes);
    DeviceBuffer(DeviceBuffer&& other) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
    ~DeviceBuffer();
    std::byte* data() const { return data_; }
    std::size_t size() const { return bytes_; }

private:
    std::byte* data_ = nullptr;
    std::size_t bytes_ = 0;
};

// Page-locked host memory, so uploads and downloads are true async DMA.
class PinnedBuffer {
public:
    PinnedBuffer() = default;
    explicit PinnedBuffer(std::size_t bytes);
    PinnedBuffer(PinnedBuffer&& other) noexcept;
    PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
    ~PinnedBuffer();
    std::byte* data() const { return data_; }
    std::size_t size() const { return bytes_; }

private:
    std::byte* data_ = nullptr;
    std::size_t bytes_ = 0;
};

// Waits until the work enqueued on `stream` is done; errors as CBI_CUDA_CHECK
// (`what`). Inside a TBB task (a batch's process stage) the task is
// suspended until a callback enqueued on the stream resumes it: the
// worker thread meanwhile runs other tasks (other images' decode and encode)
// instead of spinning in cudaStreamSynchronize. The task may resume on
// another thread; the calling thread's current device is made current there.
void wait_for_stream(cudaStream_t stream, const char* what);

class Stream {
public:
    Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    ~Stream();
    cudaStream_t get() const { return stream_; }
    void synchronize(const char* what) const;

private:
    cudaStream_t stream_ = nullptr;
};

// Times work enqueued on a stream between start() and stop_ms() with a pair
// of CUDA events (used by schedule tuning).
class EventTimer {
public:
    EventTimer();
    EventTimer(const EventTimer&) = delete;
    EventTimer& operator=(const EventTimer&) = delete;
    ~EventTimer();
    void start(cudaStream_t stream);
    float stop_ms(cudaStream_t stream);  // waits for the work to finish

private:
    cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// The device's model name, e.g. "NVIDIA H100 80GB HBM3".
std::string cuda_device_name(int device);

// A device image: contiguous rows in a DeviceBuffer.
struct DeviceImage {
    DeviceBuffer buffer;
    ImageView view;  // points into buffer
    DeviceImage() = default;
    DeviceImage(int width, int height, int channels, Depth depth);
};

// Host <-> device copies on `stream` (host views may be strided).
void upload(const ImageView& host, const ImageView& device, cudaStream_t stream);
void download(const ImageView& device, const ImageView& host, cudaStream_t stream);

}  // namespace cbi
