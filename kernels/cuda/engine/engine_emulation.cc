// The host emulation of the device engine with the real memory layer.
#include "kernels/cuda/engine/engine_emulation.h"

namespace loom::kernels::cuda::engine {

EngineStatus runEngineEmulated(const EngineView& view, const EngineCall& call, int threadsPerBlock) {
  return runEngineEmulatedWith<SystemMemory>(view, call, threadsPerBlock);
}

}  // namespace loom::kernels::cuda::engine
