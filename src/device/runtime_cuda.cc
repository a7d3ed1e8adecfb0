// src/device/runtime.h over the CUDA runtime (cudart). The CUDA stream binding is
// in stream_binding_cuda.cc.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "src/device/cuda_check.h"
#include "src/device/runtime_internal.h"

namespace loom::cuda {

// runtime_common.cc maps these values without the CUDA headers.
static_assert(cudaMemoryTypeUnregistered == 0 && cudaMemoryTypeHost == 1 && cudaMemoryTypeDevice == 2 &&
              cudaMemoryTypeManaged == 3);
static_assert(cudaErrorInvalidValue == 1);
static_assert(sizeof(IpcHandle) == sizeof(cudaIpcMemHandle_t));

namespace {

// Frees that may synchronize the device (cudaFree, cudaFreeHost,
// cudaIpcCloseMemHandle) run on this thread, never on the caller's. An
// operation runs on a communicator's executor while peers' stream gates
// (stream_gate.h) may wait on the same device for operations that need this
// one: a device-wide synchronize there would wait for them, and they for it.
// Here it only waits until they open. The memory is no longer used by
// anything when it is handed over; the thread is never joined (a free left
// at exit is returned by the process's end).
class Reaper {
 public:
  static void defer(std::function<void()> free) {
    static Reaper* reaper = new Reaper;
    {
      std::lock_guard<std::mutex> lock(reaper->mu_);
      reaper->queue_.push_back(std::move(free));
    }
    reaper->cv_.notify_one();
  }

 private:
  Reaper() {
    std::thread([this] {
      for (;;) {
        std::function<void()> free;
        {
          std::unique_lock<std::mutex> lock(mu_);
          cv_.wait(lock, [this] { return !queue_.empty(); });
          free = std::move(queue_.front());
          queue_.pop_front();
        }
        free();
      }
    }).detach();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
};

// The caller's current device, for a free that runs on the reaper's thread.
int callerDevice() {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) device = -1;
  return device;
}

}  // namespace

namespace detail {

Availability probeAvailability() {
  Availability a;
  a.compiledWithCuda = true;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  a.error = static_cast<int>(err);
  if (err != cudaSuccess) {
    a.errorString = cudaGetErrorString(err);
    (void)cudaGetLastError();  // not sticky: later calls must not see it
    return a;
  }
  a.deviceCount = count;
  if (count == 0) a.errorString = "no devices";
  return a;
}

Result<void*> allocPinned(size_t bytes) {
  void* data = nullptr;
  if (!devicesUsable()) {
    // Nothing to pin for: plain host memory (the staged path's tests run here).
    data = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!data) return makeError(Code::kSystemError, "staging buffer of %zu bytes: out of host memory", bytes);
    return data;
  }
  // Portable: pinned for every device, so one pool serves all communicators.
  LOOM_TRY(cudaStatus(cudaHostAlloc(&data, bytes, cudaHostAllocPortable), "cudaHostAlloc (staging buffer)"));
  return data;
}

void freePinned(void* data) {
  if (!devicesUsable()) std::free(data);  // usable never changes within a process
  else Reaper::defer([data] { (void)cudaFreeHost(data); });
}

RawPointerAttributes pointerAttributes(const void* ptr) {
  cudaPointerAttributes attrs{};
  const cudaError_t err = cudaPointerGetAttributes(&attrs, ptr);
  if (err != cudaSuccess) (void)cudaGetLastError();
  return {static_cast<int>(err), static_cast<int>(attrs.type), attrs.device};
}

}  // namespace detail

namespace {

// Copies on a private stream, so they never wait behind (or delay) the
// caller's kernels; the executor waits for them by polling.
class CudaCopyEngine final : public CopyEngine {
 public:
  CudaCopyEngine(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  ~CudaCopyEngine() override {
    DeviceGuard guard(device_);
    (void)cudaStreamSynchronize(stream_);
    (void)cudaStreamDestroy(stream_);
  }
  Status copy2D(void* dst, size_t dstPitch, const void* src, size_t srcPitch, size_t width, size_t height) override {
    DeviceGuard guard(device_);
    LOOM_TRY(guard.status());
    if (height == 1)
      return cudaStatus(cudaMemcpyAsync(dst, src, width, cudaMemcpyDefault, stream_), "cudaMemcpyAsync (staging)");
    return cudaStatus(cudaMemcpy2DAsync(dst, dstPitch, src, srcPitch, width, height, cudaMemcpyDefault, stream_),
                      "cudaMemcpy2DAsync (staging)");
  }
  Status finish(const WaitContext& wait) override {
    cudaError_t state = cudaErrorNotReady;
    LOOM_TRY(waitUntil(
        [&] {
          state = cudaStreamQuery(stream_);
          return state != cudaErrorNotReady;
        },
        nullptr, gpuWait(wait), [] { return std::string("staging copies between device and host"); }));
    return cudaStatus(state, "staging copy");
  }

 private:
  int device_;
  cudaStream_t stream_;
};

}  // namespace

Result<std::unique_ptr<CopyEngine>> makeCudaCopyEngine(int device) {
  DeviceGuard guard(device);
  LOOM_TRY(guard.status());
  cudaStream_t stream = nullptr;
  LOOM_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return std::unique_ptr<CopyEngine>(new CudaCopyEngine(device, stream));
}

Result<int> currentDevice() {
  int device = -1;
  LOOM_CUDA_TRY(cudaGetDevice(&device));
  return device;
}

Status setDevice(int device) { return cudaStatus(cudaSetDevice(device), "cudaSetDevice"); }

Result<bool> canAccessPeer(int device, int peer) {
  if (device == peer) return true;
  int can = 0;
  LOOM_CUDA_TRY(cudaDeviceCanAccessPeer(&can, device, peer));
  return can != 0;
}

Status enablePeerAccess(int peer) {
  const cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();
    return Status::ok();
  }
  return cudaStatus(err, "cudaDeviceEnablePeerAccess");
}

Result<IpcExport> exportDeviceBuffer(const void* devicePtr) {
  // cudaIpcGetMemHandle describes the whole allocation; the peer maps its
  // base, so it also needs our pointer's offset, which only the driver API
  // tells (cuMemGetAddressRange, reached through the runtime: no libcuda link).
  static PFN_cuMemGetAddressRange_v3020 getRange = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<PFN_cuMemGetAddressRange_v3020>(fn);
  }();
  LOOM_ENFORCE(getRange, Code::kUnhandledCudaError, "cuMemGetAddressRange is not available from the CUDA driver");
  CUdeviceptr base = 0;
  size_t size = 0;
  const CUresult r = getRange(&base, &size, reinterpret_cast<CUdeviceptr>(devicePtr));
  LOOM_ENFORCE(r == CUDA_SUCCESS, Code::kUnhandledCudaError, "cuMemGetAddressRange(%p) failed with CUresult %d",
               devicePtr, static_cast<int>(r));
  IpcExport out;
  cudaIpcMemHandle_t handle;
  LOOM_CUDA_TRY(cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(base)));
  std::memcpy(out.handle.bytes, &handle, sizeof(handle));
  out.offset = reinterpret_cast<uintptr_t>(devicePtr) - static_cast<uintptr_t>(base);
  return out;
}

Result<void*> openIpcHandle(const IpcHandle& h) {
  cudaIpcMemHandle_t handle;
  std::memcpy(&handle, h.bytes, sizeof(handle));
  void* base = nullptr;
  LOOM_CUDA_TRY(cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess));
  return base;
}

void closeIpcHandle(void* base) {
  Reaper::defer([base, device = callerDevice()] {
    DeviceGuard guard(device);
    (void)cudaIpcCloseMemHandle(base);
  });
}

Result<void*> deviceAlloc(size_t bytes) {
  void* p = nullptr;
  LOOM_CUDA_TRY(cudaMalloc(&p, bytes));
  return p;
}

void deviceFree(void* ptr) {
  Reaper::defer([ptr, device = callerDevice()] {
    DeviceGuard guard(device);
    (void)cudaFree(ptr);
  });
}

}  // namespace loom::cuda
