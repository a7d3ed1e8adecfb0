// The device engine's CUDA kernel: one __global__ template per (element
// type, reduction) running engine_collectives.h's block body, the collective
// chosen at run time, so compile time stays bounded (10 types x 4 ops plus
// the byte path used by every copy-only collective).
#define LOOM_KERNELS_ISA_NS cuda_engine_device

#include <cuda_runtime.h>

#include "kernels/cuda/engine/engine_collectives.h"
#include "kernels/cuda/engine/engine_kernel.h"
#include "kernels/cuda/engine/memory_layer.h"

namespace loom::kernels::cuda::engine {
namespace {

struct DeviceBlock {
  __device__ int tid() const { return static_cast<int>(threadIdx.x); }
  __device__ int nthreads() const { return static_cast<int>(blockDim.x); }
  __device__ void sync() const { __syncthreads(); }
  __device__ bool syncOr(bool vote) const { return __syncthreads_or(vote ? 1 : 0) != 0; }
};

template <class T, RedOp kOp>
__global__ void __launch_bounds__(kEngineThreadsPerBlock) engineKernel(const EngineView* view, EngineCall call) {
  const DeviceBlock block;
  const EngineStatus status =
      runEngineBlock<T, kOp, SystemMemory>(*view, call, static_cast<int>(blockIdx.x), block);
  if (status != EngineStatus::kOk && threadIdx.x == 0 && call.status)
    atomicCAS(call.status, 0u, static_cast<uint32_t>(status));
}

}  // namespace

cudaError_t launchEngine(const EngineView* deviceView, const EngineLayout& layout, const EngineCall& call,
                         cudaStream_t stream) {
  if (!deviceView || engineCallError(call, layout.nranks) || call.channels > layout.nchannels)
    return cudaErrorInvalidValue;
  const int channels = engineChannels(call, layout.nchannels);
  const int blocks = engineBlocks(call, layout.nranks, channels);
  if (blocks == 0) return cudaSuccess;
  cudaError_t err = cudaSuccess;
  engineDispatch(call, layout.nranks, [&]<class T, RedOp kOp>() {
    engineKernel<T, kOp><<<static_cast<unsigned>(blocks), kEngineThreadsPerBlock, 0, stream>>>(deviceView, call);
    err = cudaGetLastError();
  });
  return err;
}

cudaError_t preloadEngineKernels() {
  cudaError_t err = cudaSuccess;
  // Every (type, reduction) engineDispatch can pick; the byte kernel of the
  // copy-only collectives is (kUint8, kSum). Invalid pairs (a bitwise op on
  // floats) dispatch nothing.
  for (int type = 0; type < kNumDataTypes; ++type) {
    for (int op = 0; op < kNumRedOps; ++op) {
      dispatchReduceCopy(static_cast<DataType>(type), static_cast<RedOp>(op), 2, [&]<class T, RedOp kOp>() {
        cudaFuncAttributes attributes;
        const cudaError_t e = cudaFuncGetAttributes(&attributes, engineKernel<T, kOp>);
        if (err == cudaSuccess) err = e;
      });
    }
  }
  return err;
}

}  // namespace loom::kernels::cuda::engine
