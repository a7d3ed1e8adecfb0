// Launching the reduce-copy kernels on a CUDA stream (built only when
// LOOM_HAVE_CUDA is defined; link loom_kernels_cuda). Pointers are device
// memory (or memory the device can address: peer, managed, mapped host).
//
// Every DataType x RedOp; semantics in reduce_copy_args.h. The launch is
// asynchronous: errors of the kernel itself surface at the next
// synchronization, as with any CUDA launch.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/cuda/reduce_copy_args.h"

namespace loom::kernels::cuda {

// Enqueues dst[j][i] = post(op(srcs[0][i], ...)) on `stream`. Returns
// cudaErrorInvalidValue for invalid arguments (reduceCopyArgsError(args) and
// launchShapeError(shape) say which), else the launch's status. count == 0
// launches nothing and succeeds. `shape` {0, 0} picks chooseLaunchShape(args).
cudaError_t launchReduceCopy(const ReduceCopyArgs& args, cudaStream_t stream, LaunchShape shape = {});

// Loads every instantiation into the current device's context now, rather
// than at a first launch that may wait for the device to go idle while a
// peer's kernel spins (see preloadEngineKernels in engine/engine_kernel.h).
cudaError_t preloadReduceCopyKernels();

// dst[j][i] = src[i] * *scalar for every destination (`scalar`: a host
// pointer to one element of `type`, read before returning).
inline cudaError_t launchScaleCopy(DataType type, void* const* dsts, int ndsts, const void* src, size_t count,
                                   const void* scalar, cudaStream_t stream) {
  if (scalar == nullptr) return cudaErrorInvalidValue;
  return launchReduceCopy(makeScaleCopyArgs(type, dsts, ndsts, src, count, scalar), stream);
}

}  // namespace loom::kernels::cuda
