// The first line of every GPU test of tests/unit/device: without a CUDA
// device the test is skipped, and says why.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#define SKIP_WITHOUT_DEVICE()                                                                \
  do {                                                                                       \
    int count_ = 0;                                                                          \
    const cudaError_t err_ = cudaGetDeviceCount(&count_);                                    \
    if (err_ != cudaSuccess || count_ == 0)                                                  \
      GTEST_SKIP() << "no CUDA device found (cudaGetDeviceCount: "                           \
                   << (err_ == cudaSuccess ? "0 devices" : cudaGetErrorString(err_)) << ")"; \
  } while (0)
