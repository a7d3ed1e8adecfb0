#include "tests/unit/device/test_kernels.h"

namespace loom::testing {
namespace {

__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void fill(int32_t* out, size_t n, int32_t mul, int32_t add) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    out[i] = static_cast<int32_t>(i) * mul + add;
}

__global__ void scale(int32_t* buf, size_t n, int32_t factor) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    buf[i] *= factor;
}

unsigned blocksFor(size_t n) { return static_cast<unsigned>(n / 256 + 1 < 1024 ? n / 256 + 1 : 1024); }

}  // namespace

cudaError_t preloadTestKernels() {
  cudaFuncAttributes attributes;
  for (const void* kernel : {reinterpret_cast<const void*>(spin), reinterpret_cast<const void*>(fill),
                             reinterpret_cast<const void*>(scale)}) {
    const cudaError_t err = cudaFuncGetAttributes(&attributes, kernel);
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t launchSpin(long long cycles, cudaStream_t stream) {
  spin<<<1, 1, 0, stream>>>(cycles);
  return cudaGetLastError();
}

cudaError_t launchFill(int32_t* out, size_t n, int32_t mul, int32_t add, cudaStream_t stream) {
  fill<<<blocksFor(n), 256, 0, stream>>>(out, n, mul, add);
  return cudaGetLastError();
}

cudaError_t launchScale(int32_t* buf, size_t n, int32_t factor, cudaStream_t stream) {
  scale<<<blocksFor(n), 256, 0, stream>>>(buf, n, factor);
  return cudaGetLastError();
}

}  // namespace loom::testing
