// The reduce-copy kernels: one __global__ template over (element type, op),
// instantiated for the 10 types x 4 ops (kAvg runs as kSum plus the post
// step), each calling the shared per-thread body.
#define LOOM_KERNELS_ISA_NS device_nvcc
#include "kernels/cuda/reduce_copy.h"

#include "kernels/cuda/reduce_copy_core.h"

namespace loom::kernels::cuda {
namespace {

template <class T, RedOp kOp>
__global__ void __launch_bounds__(kMaxThreadsPerBlock) reduceCopyKernel(ReduceCopyParams params) {
  const size_t thread = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t threads = static_cast<size_t>(gridDim.x) * blockDim.x;
  reduceCopyThread<T, kOp>(params, thread, threads);
}

}  // namespace

cudaError_t launchReduceCopy(const ReduceCopyArgs& args, cudaStream_t stream, LaunchShape shape) {
  if (reduceCopyArgsError(args) != nullptr || launchShapeError(shape) != nullptr) return cudaErrorInvalidValue;
  if (args.count == 0) return cudaSuccess;
  if (shape.blocks == 0) shape = chooseLaunchShape(args);
  const ReduceCopyParams params = planReduceCopy(args);
  dispatchReduceCopy(args.type, args.op, args.nsrcs, [&]<class T, RedOp kOp>() {
    reduceCopyKernel<T, kOp><<<shape.blocks, shape.threadsPerBlock, 0, stream>>>(params);
  });
  return cudaGetLastError();
}

cudaError_t preloadReduceCopyKernels() {
  cudaError_t err = cudaSuccess;
  for (int type = 0; type < kNumDataTypes; ++type) {
    for (int op = 0; op < kNumRedOps; ++op) {
      dispatchReduceCopy(static_cast<DataType>(type), static_cast<RedOp>(op), 2, [&]<class T, RedOp kOp>() {
        cudaFuncAttributes attributes;
        const cudaError_t e = cudaFuncGetAttributes(&attributes, reduceCopyKernel<T, kOp>);
        if (err == cudaSuccess) err = e;
      });
    }
  }
  return err;
}

}  // namespace loom::kernels::cuda
