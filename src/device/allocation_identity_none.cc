// Builds without CUDA: no driver to ask, so no identity is ever known (and
// no GDR path runs: it needs the CUDA reducer too).
#include "src/device/allocation_identity.h"

namespace loom::cuda {

struct CudaDriverQueries::EntryPoints {};

CudaDriverQueries::CudaDriverQueries(std::unique_ptr<const EntryPoints> entry, std::string library)
    : entry_(std::move(entry)), library_(std::move(library)) {}

CudaDriverQueries::~CudaDriverQueries() = default;

Result<std::shared_ptr<const CudaDriverQueries>> CudaDriverQueries::load(const std::string& library) {
  return makeError(Code::kUnhandledCudaError, "the CUDA driver library %s is not used: Loom was built without CUDA",
                   library.c_str());
}

Result<AllocationIdentity> CudaDriverQueries::identify(const void* ptr) const {
  return makeError(Code::kUnhandledCudaError, "identifying the allocation of %p: Loom was built without CUDA", ptr);
}

Result<AllocationIdentity> driverAllocationIdentity(const void* ptr) {
  return makeError(Code::kUnhandledCudaError, "identifying the allocation of %p: Loom was built without CUDA", ptr);
}

}  // namespace loom::cuda
