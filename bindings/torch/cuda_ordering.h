// CUDA tensors: how an operation is ordered against the caller's CUDA
// streams, as ProcessGroupNCCL orders its own stream. Each process group has
// one internal CUDA stream per device; an operation on it first waits (an
// event) for the caller's current stream, then runs through Loom's device
// engine on the Loom stream bound to it (loomStreamFromCuda), then records an
// end event. Work::wait() makes the caller's current stream wait for that
// event; the host waits only for Work.is_completed(), a timeout or a future.
// Tensors stay referenced by the op until the end event has fired, so the
// caching allocator cannot reuse their memory early.
#pragma once

#include <c10/core/Device.h>
#include <c10/util/Exception.h>

#include <functional>
#include <memory>

#include "bindings/torch/loom_op.h"

namespace loom_torch {

struct CudaStreams;  // per process group: device index -> internal stream

#ifdef LOOM_TORCH_CUDA
// The DeviceSide of one operation on `device`; creates `streams` on first use.
std::shared_ptr<DeviceSide> cudaSideFor(const at::Device& device, std::shared_ptr<CudaStreams>& streams);
// Runs `fn` (tensor copies) with `side`'s stream as the current CUDA stream,
// so its kernels are queued after the operation.
void runOnDeviceStream(DeviceSide& side, const std::function<void()>& fn);
#else
inline std::shared_ptr<DeviceSide> cudaSideFor(const at::Device& device, std::shared_ptr<CudaStreams>&) {
  TORCH_CHECK(false, "loom: got a tensor on ", device, ", but this loom_torch was built without CUDA");
}
inline void runOnDeviceStream(DeviceSide&, const std::function<void()>& fn) { fn(); }
#endif

}  // namespace loom_torch
