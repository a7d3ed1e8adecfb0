// What runtime_common.cc needs from the build-specific runtime
// (runtime_cuda.cc or runtime_none.cc).
#pragma once

#include <cstddef>

#include "common/status.h"
#include "src/device/runtime.h"

namespace loom::cuda::detail {

// Asks the runtime once (availability() caches the answer).
Availability probeAvailability();
// Pinned host memory (cudaHostAlloc), or aligned host memory without CUDA.
Result<void*> allocPinned(size_t bytes);
void freePinned(void* data);
// cudaPointerGetAttributes as plain numbers.
RawPointerAttributes pointerAttributes(const void* ptr);

}  // namespace loom::cuda::detail
