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

// Loads every instantiation of the kernel into the current device's context
// now. CUDA loads kernels lazily by default (CUDA_MODULE_LOADING=LAZY), and
// a first launch may wait for the whole device to go idle: a rank's first
// launch of, say, the max all-reduce would then wait for a peer's kernel
// that spins until this very launch runs, a deadlock. Call it before any
// engine kernel of the process can be running on the device.
cudaError_t preloadEngineKernels();

}  // namespace loom::kernels::cuda::engine
