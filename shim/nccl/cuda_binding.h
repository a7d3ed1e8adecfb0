// Where the NCCL shim meets CUDA: the Loom stream a cudaStream_t maps to and
// the CUDA device a communicator belongs to. the shim does not link the
// CUDA runtime; both answers come from Loom or from a CUDA driver that the
// program itself has loaded.
#pragma once

#include <loom/loom.h>

#include "nccl.h"

namespace loom::nccl_shim {

// The Loom stream bound to `stream` (loomStreamFromCuda): work on it starts
// after the CUDA stream's earlier work and the CUDA stream's later work waits
// for it. *out is NULL when Loom has no usable CUDA device (built without
// CUDA, no GPU or driver): the call then runs blocking, which keeps stream
// order for host buffers trivially. The returned stream belongs to Loom.
loomResult_t streamFor(cudaStream_t stream, loomStream_t* out);

// The CUDA device current on this thread (cuCtxGetDevice through a driver
// the program already loaded), or 0 when the process uses no CUDA.
int currentCudaDevice();

// ncclMemAlloc / ncclMemFree: device memory of the current CUDA context
// (cuMemAlloc through a driver the program already loaded, so cudaFree works
// on it too); where the process uses no CUDA, page-aligned host memory,
// which Loom's collectives take as host buffers. Host blocks are tracked so
// that freeMemory tells the two apart.
loomResult_t allocMemory(void** ptr, size_t bytes, const char** why);
loomResult_t freeMemory(void* ptr, const char** why);

}  // namespace loom::nccl_shim
