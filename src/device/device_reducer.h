// What the GPUDirect RDMA path (src/device/gdr_path.h) asks of the device its
// buffers live on, behind an interface so the path's protocol is tested on
// machines without a GPU:
//   makeCudaReducer     the CUDA one: cudaMalloc scratch, the reduce-copy
//                       kernel (launchReduceCopy) on a private stream;
//   makeEmulatedReducer the tests' one: host memory as "device memory" and
//                       the kernel's host emulation (emulateReduceCopy), so
//                       the same per-thread code computes the result.
// One reducer serves one device. Used by one thread at a time.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "common/status.h"
#include "common/wait.h"
#include "kernels/cuda/reduce_copy_args.h"

namespace loom::cuda {

class DeviceReducer {
 public:
  virtual ~DeviceReducer() = default;
  // Scratch memory on this device (the NIC writes peers' slices into it).
  virtual Result<void*> allocate(size_t bytes) = 0;
  virtual void release(void* ptr) = 0;
  // Makes the NIC's completed writes into this device's memory visible to
  // the device's next reads (GPUDirect RDMA writes are posted PCIe writes;
  // the CQ entry reaching the CPU does not order them before a kernel's
  // loads). A no-op where nothing needs flushing.
  virtual Status flushRemoteWrites() = 0;
  // dst = op(srcs...) as described by `args` (device pointers), finished on return.
  virtual Status reduceCopy(const kernels::cuda::ReduceCopyArgs& args, const WaitContext& wait) = 0;
};

// A reducer for `device`, or why there is none (no CUDA in this build or process).
using ReducerFactory = std::function<Result<std::unique_ptr<DeviceReducer>>(int device)>;

Result<std::unique_ptr<DeviceReducer>> makeCudaReducer(int device);
// Host memory and the host emulation of the kernel (tests; every build).
std::unique_ptr<DeviceReducer> makeEmulatedReducer();

}  // namespace loom::cuda
