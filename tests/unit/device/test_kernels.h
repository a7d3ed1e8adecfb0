// Kernels for the GPU tests, behind a plain C++ interface.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace loom::testing {

// Occupies the stream for about `cycles` GPU clock cycles (one thread).
cudaError_t launchSpin(long long cycles, cudaStream_t stream);
// out[i] = int32(i) * mul + add.
cudaError_t launchFill(int32_t* out, size_t n, int32_t mul, int32_t add, cudaStream_t stream);
// buf[i] *= factor.
cudaError_t launchScale(int32_t* buf, size_t n, int32_t factor, cudaStream_t stream);
// Loads the kernels above into the current device's context now: a lazy
// first launch may wait for the device to go idle, which never happens
// while a rank's collective kernel waits for a peer whose thread is the
// one launching (CUDA_MODULE_LOADING=LAZY, the default).
cudaError_t preloadTestKernels();

}  // namespace loom::testing
