#include "shim/nccl/cuda_binding.h"

#include <dlfcn.h>

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

}  // namespace loom::nccl_shim
