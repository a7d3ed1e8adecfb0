// src/device/runtime.h for a build without CUDA: no device exists, every pointer is
// host memory, and "pinned" staging memory is ordinary aligned host memory.
// The calls that only make sense with a device say so with kUnhandledCudaError.
#include <cstdlib>

#include "src/device/runtime_internal.h"

namespace loom::cuda {
namespace {

Status noCuda(const char* call) {
  return makeError(Code::kUnhandledCudaError, "%s: Loom was built without CUDA", call);
}

}  // namespace

namespace detail {

Availability probeAvailability() {
  Availability a;
  a.compiledWithCuda = false;
  a.errorString = "Loom was built without CUDA";
  return a;
}

Result<void*> allocPinned(size_t bytes) {
  void* data = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (!data) return makeError(Code::kSystemError, "staging buffer of %zu bytes: out of host memory", bytes);
  return data;
}

void freePinned(void* data) { std::free(data); }

RawPointerAttributes pointerAttributes(const void*) { return {}; }

}  // namespace detail

Result<std::unique_ptr<CopyEngine>> makeCudaCopyEngine(int) { return noCuda("makeCudaCopyEngine"); }
Result<std::unique_ptr<DeviceStream>> bindCudaStream(void*) { return noCuda("loomStreamFromCuda"); }
Result<int> currentDevice() { return noCuda("cudaGetDevice"); }
Status preloadKernels(int) { return Status::ok(); }
Status setDevice(int) { return noCuda("cudaSetDevice"); }
Result<bool> canAccessPeer(int, int) { return false; }
Status enablePeerAccess(int) { return noCuda("cudaDeviceEnablePeerAccess"); }
Result<IpcExport> exportDeviceBuffer(const void*) { return noCuda("cudaIpcGetMemHandle"); }
Result<void*> openIpcHandle(const IpcHandle&) { return noCuda("cudaIpcOpenMemHandle"); }
void closeIpcHandle(void*) {}
Result<void*> deviceAlloc(size_t) { return noCuda("cudaMalloc"); }
void deviceFree(void*) {}

}  // namespace loom::cuda
