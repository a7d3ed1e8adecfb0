// The stream gate's kernel: one thread runs the wait protocol of
// stream_gate_core.h with __nanosleep backoff.
#include "kernels/cuda/stream_gate.h"

namespace loom::kernels::cuda {
namespace {

struct DevicePause {
  __device__ void operator()(uint32_t round) const {
    // 32 ns doubling up to ~2 us: a fresh gate opens within a poll or two of
    // the release, a long collective costs one bus read every ~2 us.
    const uint32_t shift = round < 6 ? round : 6;
    __nanosleep(32u << shift);
  }
};

__global__ void streamGateKernel(const StreamGateWords* gate, uint64_t target) {
  (void)gateWait(gate, target, DevicePause{});
}

}  // namespace

cudaError_t launchStreamGate(const StreamGateWords* gate, uint64_t target, cudaStream_t stream) {
  if (gate == nullptr) return cudaErrorInvalidValue;
  streamGateKernel<<<1, 1, 0, stream>>>(gate, target);
  return cudaGetLastError();
}

cudaError_t preloadStreamGateKernel() {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, streamGateKernel);
}

}  // namespace loom::kernels::cuda
