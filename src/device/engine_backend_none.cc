// Builds without CUDA have no device engine on a GPU (the emulated backend
// stays available to tests).
#include "src/device/engine_backend.h"

namespace loom::cuda {

Result<std::unique_ptr<EngineBackend>> makeCudaEngineBackend() {
  return makeError(Code::kInvalidUsage, "this build of Loom has no CUDA kernels");
}

}  // namespace loom::cuda
