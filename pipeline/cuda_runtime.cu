#include "pipeline/cuda_runtime.hpp"

#include <utility>

#include <oneapi/tbb/task.h>
#include <oneapi/tbb/task_arena.h>

#include "pipeline/error.hpp"

namespace cbi {

int cuda_device_count(std::string& why) {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        why = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
        cudaGetLastError();
        return 0;
    }
    if (count == 0) why = "no CUDA device found";
    return count;
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, bytes);
    if (status == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        throw Error("CUDA cudaMalloc", "out of device memory allocating " + std::to_string(bytes) + " bytes");
    }
    CBI_CUDA_CHECK(status, "cudaMalloc(" + std::to_string(bytes) + " bytes)");
    data_ = static_cast<std::byte*>(p);
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    return *this;
}
DeviceBuffer::~DeviceBuffer() {
    if (data_) cudaFree(data_);  // a destructor cannot throw; errors resurface at the next checked call
}

PinnedBuffer::PinnedBuffer(std::size_t bytes) : bytes_(bytes) {
    void* p = nullptr;
    const cudaError_t status = cudaMallocHost(&p, bytes);
    if (status == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        throw Error("CUDA cudaMallocHost", "out of pinned host memory allocating " + std::to_string(bytes) + " bytes");
    }
    CBI_CUDA_CHECK(status, "cudaMallocHost(" + std::to_string(bytes) + " bytes)");
    data_ = static_cast<std::byte*>(p);
}
PinnedBuffer::PinnedBuffer(PinnedBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    return *this;
}
PinnedBuffer::~PinnedBuffer() {
    if (data_) cudaFreeHost(data_);
}

Stream::Stream() {
    CBI_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
}
Stream::~Stream() {
    if (stream_) cudaStreamDestroy(stream_);
}
void Stream::synchronize(const char* what) const {
    wait_for_stream(stream_, what);
}

void wait_for_stream(cudaStream_t stream, const char* what) {
    if (tbb::this_task_arena::current_thread_index() != tbb::task_arena::not_initialized) {
        int device = 0;
        CBI_CUDA_CHECK(cudaGetDevice(&device), "cudaGetDevice");
        cudaError_t enqueued = cudaSuccess;
        // A stream callback, not cudaLaunchHostFunc: a host function is not
        // called after a device error, which would leave the task suspended
        // for ever; a callback runs exactly once, with the error.
        tbb::task::suspend([&](tbb::task::suspend_point task) {
            enqueued = cudaStreamAddCallback(
                stream,
                [](cudaStream_t, cudaError_t, void* t) { tbb::task::resume(static_cast<tbb::task::suspend_point>(t)); },
                task, 0);
            if (enqueued != cudaSuccess) tbb::task::resume(task);
        });
        use_device(device);
        CBI_CUDA_CHECK(enqueued, what);
    }
    CBI_CUDA_CHECK(cudaStreamSynchronize(stream), what);  // done by now (after a resume); reports the stream's errors
}

EventTimer::EventTimer() {
    CBI_CUDA_CHECK(cudaEventCreate(&start_), "cudaEventCreate");
    CBI_CUDA_CHECK(cudaEventCreate(&stop_), "cudaEventCreate");
}
EventTimer::~EventTimer() {
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
}
void EventTimer::start(cudaStream_t stream) {
    CBI_CUDA_CHECK(cudaEventRecord(start_, stream), "cudaEventRecord");
}
float EventTimer::stop_ms(cudaStream_t stream) {
    CBI_CUDA_CHECK(cudaEventRecord(stop_, stream), "cudaEventRecord");
    CBI_CUDA_CHECK(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    CBI_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms;
}

std::string cuda_device_name(int device) {
    cudaDeviceProp prop{};
    CBI_CUDA_CHECK(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    return prop.name;
}

DeviceImage::DeviceImage(int width, int height, int channels, Depth depth) {
    view = ImageView{nullptr, width, height, channels, depth, 0};
    view.stride = view.row_bytes();
    buffer = DeviceBuffer(view.stride * static_cast<std::size_t>(height));
    view.data = buffer.data();
}

void upload(const ImageView& host, const ImageView& device, cudaStream_t stream) {
    CBI_CUDA_CHECK(cudaMemcpy2DAsync(device.data, device.stride, host.data, host.stride, host.row_bytes(), host.height,
                                     cudaMemcpyHostToDevice, stream),
                   "upload " + describe(host));
}

void download(const ImageView& device, const ImageView& host, cudaStream_t stream) {
    CBI_CUDA_CHECK(cudaMemcpy2DAsync(host.data, host.stride, device.data, device.stride, device.row_bytes(),
                                     device.height, cudaMemcpyDeviceToHost, stream),
                   "download " + describe(device));
}

}  // namespace cbi
