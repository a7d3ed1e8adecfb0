// The CUDA DeviceReducer: scratch from cudaMalloc, the reduce-copy kernel on
// a private non-blocking stream, and the GPUDirect RDMA write flush.
#include <cuda_runtime_api.h>

#include "common/format.h"
#include "src/device/cuda_check.h"
#include "src/device/device_reducer.h"
#include "src/device/runtime.h"
#include "kernels/cuda/reduce_copy.h"

namespace loom::cuda {
namespace {

class CudaReducer final : public DeviceReducer {
 public:
  CudaReducer(int device, cudaStream_t stream, bool flushes) : device_(device), stream_(stream), flushes_(flushes) {}
  ~CudaReducer() override {
    DeviceGuard guard(device_);
    (void)cudaStreamDestroy(stream_);
  }

  Result<void*> allocate(size_t bytes) override {
    DeviceGuard guard(device_);
    LOOM_TRY(guard.status());
    return deviceAlloc(bytes);
  }
  void release(void* ptr) override {
    DeviceGuard guard(device_);
    deviceFree(ptr);
  }
  Status flushRemoteWrites() override {
    // Without the flush call (drivers before R465, or a device that lacks
    // it) nothing is done here; NCCL would fall back to a loopback RDMA READ.
    if (!flushes_) return Status::ok();
    DeviceGuard guard(device_);
    LOOM_TRY(guard.status());
    LOOM_CUDA_TRY(cudaDeviceFlushGPUDirectRDMAWrites(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
                                                     cudaFlushGPUDirectRDMAWritesToOwner));
    return Status::ok();
  }
  Status reduceCopy(const kernels::cuda::ReduceCopyArgs& args, const WaitContext& wait) override {
    DeviceGuard guard(device_);
    LOOM_TRY(guard.status());
    LOOM_CUDA_TRY(kernels::cuda::launchReduceCopy(args, stream_));
    cudaError_t state = cudaErrorNotReady;
    LOOM_TRY(waitUntil(
        [&] {
          state = cudaStreamQuery(stream_);
          return state != cudaErrorNotReady;
        },
        nullptr, gpuWait(wait), [this] { return strprintf("the GDR reduce-copy kernel on device %d", device_); }));
    return cudaStatus(state, "GDR reduce-copy kernel");
  }

 private:
  const int device_;
  cudaStream_t stream_;
  const bool flushes_;
};

}  // namespace

Result<std::unique_ptr<DeviceReducer>> makeCudaReducer(int device) {
  LOOM_TRY(preloadKernels(device));
  DeviceGuard guard(device);
  LOOM_TRY(guard.status());
  int options = 0;
  if (cudaDeviceGetAttribute(&options, cudaDevAttrGPUDirectRDMAFlushWritesOptions, device) != cudaSuccess) options = 0;
  (void)cudaGetLastError();
  cudaStream_t stream = nullptr;
  LOOM_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const bool flushes = (options & cudaFlushGPUDirectRDMAWritesOptionHost) != 0;
  return std::unique_ptr<DeviceReducer>(std::make_unique<CudaReducer>(device, stream, flushes));
}

}  // namespace loom::cuda
