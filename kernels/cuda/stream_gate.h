// Launching a stream gate's wait (stream_gate_core.h) on a CUDA stream
// (built only with LOOM_HAVE_CUDA; link loom_kernels_cuda).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/stream_gate_core.h"

namespace loom::kernels::cuda {

// Enqueues a 1-thread kernel on `stream` that returns once `gate` (device
// address of mapped host memory) released `target` or was aborted; work
// enqueued after it on `stream` runs after that. Returns the launch status.
cudaError_t launchStreamGate(const StreamGateWords* gate, uint64_t target, cudaStream_t stream);

// Loads the gate kernel into the current device's context now (see
// preloadEngineKernels in engine/engine_kernel.h: a lazy first load may wait
// for the device to go idle).
cudaError_t preloadStreamGateKernel();

}  // namespace loom::kernels::cuda
