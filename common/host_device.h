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

// LOOM_OUTLINE keeps a large LOOM_HOST_DEVICE function a function of its own
// in device code: a kernel that calls it from many places then holds one
// copy instead of one per call site, which keeps ptxas's time and the
// binary small. The call costs nothing next to the memory traffic of the
// functions it is used for. Host compilers inline as they see fit.
#ifndef LOOM_OUTLINE
#if defined(__CUDACC__)
#define LOOM_OUTLINE __noinline__
#else
#define LOOM_OUTLINE
#endif
#endif
