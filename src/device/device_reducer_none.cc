// Builds without CUDA: no device to reduce on.
#include "src/device/device_reducer.h"

namespace loom::cuda {

Result<std::unique_ptr<DeviceReducer>> makeCudaReducer(int device) {
  return makeError(Code::kUnhandledCudaError, "GDR reducer for device %d: Loom was built without CUDA", device);
}

}  // namespace loom::cuda
