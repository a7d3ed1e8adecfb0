// The process-wide cache behind loomStreamFromCuda (api_cuda.cc).
#pragma once

#include <memory>

#include "loom/loom.h"
#include "src/device/device_stream.h"

namespace loom::api {

// Drops `stream` from the cache if it is bound to a CUDA stream (loomStreamDestroy).
void forgetCudaStream(loomStream_t stream);

// For tests only, and not part of loom.h: a new Loom stream bound to
// `device` as loomStreamFromCuda binds one to a CUDA stream (the host tests
// bind emulated CUDA streams, tests/unit/device/emulated_cuda.h). Destroy it
// with loomStreamDestroy. Exported from libloom for the tests that link it.
__attribute__((visibility("default"))) loomStream_t bindStreamToDeviceForTesting(
    std::unique_ptr<cuda::DeviceStream> device);

}  // namespace loom::api
