// LOOM_HOST_DEVICE marks functions that compile for both the host and a CUDA
// device (__host__ __device__ under nvcc, nothing under a host compiler), so
// pure arithmetic shared by host algorithms and CUDA kernels is written once.
#pragma once

#ifndef LOOM_HOST_DEVICE
#if defined(__CUDACC__)
#define LOOM_HOST_DEVICE __host__ __device__
#else
#define LOOM_HOST_DEVICE
#endif
#endif
