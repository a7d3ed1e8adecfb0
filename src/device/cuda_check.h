// Turning a cudaError_t into a Status that names the call (CUDA builds only).
#pragma once

#include <cuda_runtime_api.h>

#include "common/status.h"
#include "common/wait.h"

namespace loom::cuda {

inline Status cudaStatus(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return Status::ok();
  return makeError(Code::kUnhandledCudaError, "%s failed: %s (%s)", call, cudaGetErrorString(err),
                   cudaGetErrorName(err));
}

// A wait for GPU work (cudaEventQuery, cudaStreamQuery polls): GPU work ends
// tens to hundreds of microseconds after it is queued, so the wait yields
// the core for up to 2 ms before sleeping in 1 ms slices. With the default
// 200 us, every staged call between two processes sharing a GPU slept at
// least once: 2.3 ms an 8-byte all-reduce on an H200.
inline WaitContext gpuWait(WaitContext wait) {
  if (wait.yieldMicros < 2000) wait.yieldMicros = 2000;
  return wait;
}

// The current device, restored when the guard goes out of scope, so Loom
// never leaves the caller's thread on another device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (device >= 0 && device != previous_) status_ = cudaStatus(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceGuard() {
    if (previous_ >= 0) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  const Status& status() const { return status_; }

 private:
  int previous_ = -1;
  Status status_;
};

#define LOOM_CUDA_TRY(call) LOOM_TRY(::loom::cuda::cudaStatus((call), #call))

}  // namespace loom::cuda
