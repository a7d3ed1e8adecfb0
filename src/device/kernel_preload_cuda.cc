// Loads Loom's kernels into a device's context once per process, before any
// of them can be running there. CUDA loads kernels lazily by default, and a
// lazy first launch may wait for the whole device to go idle; with ranks of
// one process sharing a device, a rank's first launch of one kernel would
// then wait for a peer's kernel that spins until this very rank's launch
// runs. Seen on an H200: a first max all-reduce after sum all-reduces, and
// a test's own kernel launched behind a collective, hung until LOOM_TIMEOUT.
#include <cuda_runtime_api.h>

#include <mutex>
#include <set>

#include "kernels/cuda/engine/engine_kernel.h"
#include "kernels/cuda/reduce_copy.h"
#include "kernels/cuda/stream_gate.h"
#include "src/device/cuda_check.h"
#include "src/device/runtime.h"

namespace loom::cuda {

Status preloadKernels(int device) {
  static std::mutex mu;
  static std::set<int> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded.count(device)) return Status::ok();
  DeviceGuard guard(device);
  LOOM_TRY(guard.status());
  LOOM_TRY(cudaStatus(kernels::cuda::engine::preloadEngineKernels(), "loading the device engine's kernels"));
  LOOM_TRY(cudaStatus(kernels::cuda::preloadReduceCopyKernels(), "loading the reduce-copy kernels"));
  LOOM_TRY(cudaStatus(kernels::cuda::preloadStreamGateKernel(), "loading the stream gate kernel"));
  loaded.insert(device);
  return Status::ok();
}

}  // namespace loom::cuda
