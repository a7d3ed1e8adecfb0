// The process-wide cache behind loomStreamFromCuda (api_cuda.cc).
#pragma once

#include "loom/loom.h"

namespace loom::api {

// Drops `stream` from the cache if it is bound to a CUDA stream (loomStreamDestroy).
void forgetCudaStream(loomStream_t stream);

}  // namespace loom::api
