// The reduce-copy kernel run on the host: every (block, thread) of the grid
// executes the kernel's own per-thread body (reduce_copy_core.h) in turn, so
// tests check the device code path, vector split and grid-stride walk
// included, on machines without a GPU. Pointers are host memory.
// Always built (no CUDA needed). Thread safety: none needed, pure function.
#pragma once

#include "kernels/cuda/reduce_copy_args.h"

namespace loom::kernels::cuda {

// Runs the launch of `args` over `shape` ({0, 0}: chooseLaunchShape, as
// launchReduceCopy does). Returns nullptr, or the argument error (nothing written).
const char* emulateReduceCopy(const ReduceCopyArgs& args, LaunchShape shape = {});

}  // namespace loom::kernels::cuda
