// Launching the device engine's kernel (built only with LOOM_HAVE_CUDA, in
// loom_kernels_cuda). The kernel runs exactly the protocol the host
// emulation runs (engine_collectives.h) with the real memory layer.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/cuda/engine/engine_layout.h"

namespace loom::kernels::cuda::engine {

constexpr unsigned kEngineThreadsPerBlock = 256;

// Enqueues this rank's kernel for `call` on `stream`: engineBlocks(...)
// blocks of kEngineThreadsPerBlock threads (none when there is nothing to
// do). `deviceView` is this rank's EngineView in device memory (copied once
// by the caller); `layout` is the engine's layout (for the channel count).
// cudaErrorInvalidValue when engineCallError rejects the call. Failures
// during the run (abort, timeout) are reported through call.status.
// Every rank's kernel must be resident at the same time as its peers'.
cudaError_t launchEngine(const EngineView* deviceView, const EngineLayout& layout, const EngineCall& call,
                         cudaStream_t stream);

}  // namespace loom::kernels::cuda::engine
