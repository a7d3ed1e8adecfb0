#include "shim/nccl/cuda_binding.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <set>

namespace loom::nccl_shim {

loomResult_t streamFor(cudaStream_t stream, loomStream_t* out) {
  // Loom caches one stream per CUDA stream and owns it; NULL without a usable device.
  return loomStreamFromCuda(static_cast<void*>(stream), out);
}

int currentCudaDevice() {
  // RTLD_NOLOAD: only a driver the program already loaded (through the CUDA
  // runtime) counts; a process that never touched CUDA has device 0. Looked
  // up on each call (communicator creation only): CUDA may be loaded later.
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!driver) return 0;
  using CtxGetDevice = int (*)(int*);  // CUresult cuCtxGetDevice(CUdevice*)
  const auto ctxGetDevice = reinterpret_cast<CtxGetDevice>(dlsym(driver, "cuCtxGetDevice"));
  int device = 0;
  if (!ctxGetDevice || ctxGetDevice(&device) != 0) device = 0;  // no current context: no device chosen
  dlclose(driver);  // drops only the reference RTLD_NOLOAD added
  return device;
}

namespace {

// A driver the program loaded, or null (the reference is dropped at once:
// the program keeps the driver loaded).
void* loadedDriver() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (driver) dlclose(driver);
  return driver;
}

std::mutex hostBlocksMu;
std::set<void*>& hostBlocks() {
  static std::set<void*>* blocks = new std::set<void*>;  // never destroyed: frees may come at exit
  return *blocks;
}

}  // namespace

loomResult_t allocMemory(void** ptr, size_t bytes, const char** why) {
  if (void* driver = loadedDriver()) {
    using MemAlloc = int (*)(unsigned long long*, size_t);  // CUresult cuMemAlloc_v2(CUdeviceptr*, size_t)
    const auto memAlloc = reinterpret_cast<MemAlloc>(dlsym(driver, "cuMemAlloc_v2"));
    unsigned long long device = 0;
    if (!memAlloc) {
      *why = "the CUDA driver has no cuMemAlloc_v2";
      return loomSystemError;
    }
    if (memAlloc(&device, bytes) != 0) {
      *why = "cuMemAlloc failed (out of device memory, or no current CUDA context: call cudaSetDevice first)";
      return loomUnhandledCudaError;
    }
    *ptr = reinterpret_cast<void*>(device);
    return loomSuccess;
  }
  void* block = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (!block) {
    *why = "out of host memory";
    return loomSystemError;
  }
  std::lock_guard<std::mutex> lock(hostBlocksMu);
  hostBlocks().insert(block);
  *ptr = block;
  return loomSuccess;
}

loomResult_t freeMemory(void* ptr, const char** why) {
  {
    std::lock_guard<std::mutex> lock(hostBlocksMu);
    if (hostBlocks().erase(ptr)) {
      std::free(ptr);
      return loomSuccess;
    }
  }
  void* driver = loadedDriver();
  using MemFree = int (*)(unsigned long long);  // CUresult cuMemFree_v2(CUdeviceptr)
  const auto memFree = driver ? reinterpret_cast<MemFree>(dlsym(driver, "cuMemFree_v2")) : nullptr;
  if (!memFree) {
    *why = "the pointer is not one ncclMemAlloc returned";
    return loomInvalidArgument;
  }
  if (memFree(reinterpret_cast<unsigned long long>(ptr)) != 0) {
    *why = "cuMemFree failed: the pointer is not one ncclMemAlloc returned";
    return loomInvalidArgument;
  }
  return loomSuccess;
}

}  // namespace loom::nccl_shim
