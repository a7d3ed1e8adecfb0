// The tests' DeviceReducer: host memory, and the reduce-copy kernel's own
// per-thread code run on the host (kernels/cuda/reduce_copy_emulation.h).
#include <cstdlib>

#include "src/device/device_reducer.h"
#include "kernels/cuda/reduce_copy_emulation.h"

namespace loom::cuda {
namespace {

class EmulatedReducer final : public DeviceReducer {
 public:
  Result<void*> allocate(size_t bytes) override {
    void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!p) return makeError(Code::kSystemError, "emulated device scratch of %zu bytes: out of memory", bytes);
    return p;
  }
  void release(void* ptr) override { std::free(ptr); }
  Status flushRemoteWrites() override { return Status::ok(); }
  Status reduceCopy(const kernels::cuda::ReduceCopyArgs& args, const WaitContext&) override {
    if (const char* why = kernels::cuda::emulateReduceCopy(args))
      return makeError(Code::kInternalError, "emulated reduce-copy: %s", why);
    return Status::ok();
  }
};

}  // namespace

std::unique_ptr<DeviceReducer> makeEmulatedReducer() { return std::make_unique<EmulatedReducer>(); }

}  // namespace loom::cuda
