// Builds without the CUDA kernels have no direct path.
#include "src/device/p2p_direct.h"

namespace loom::cuda {

std::unique_ptr<DirectPath> makeDirectPath(int, int, bootstrap::Bootstrap*) { return nullptr; }
bool directPathBuilt() { return false; }

}  // namespace loom::cuda
