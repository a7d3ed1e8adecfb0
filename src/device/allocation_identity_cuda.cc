// Allocation identities from the CUDA driver, reached through dlopen: only
// the toolkit's header is used here (types and enum values), so libloom has
// no link-time dependency on libcuda.
#include <cuda.h>
#include <dlfcn.h>

#include <type_traits>

#include "common/format.h"
#include "src/device/allocation_identity.h"

namespace loom::cuda {

struct CudaDriverQueries::EntryPoints {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuPointerGetAttribute) pointerGetAttribute = nullptr;
  decltype(&::cuGetErrorName) getErrorName = nullptr;  // optional: only improves messages
};

namespace {

std::string resultText(const CudaDriverQueries::EntryPoints& entry, CUresult result) {
  const char* name = nullptr;
  if (entry.getErrorName && entry.getErrorName(result, &name) == CUDA_SUCCESS && name)
    return strprintf("%s (%d)", name, static_cast<int>(result));
  return strprintf("CUresult %d", static_cast<int>(result));
}

}  // namespace

CudaDriverQueries::CudaDriverQueries(std::unique_ptr<const EntryPoints> entry, std::string library)
    : entry_(std::move(entry)), library_(std::move(library)) {}

CudaDriverQueries::~CudaDriverQueries() = default;

Result<std::shared_ptr<const CudaDriverQueries>> CudaDriverQueries::load(const std::string& library) {
  // Never dlclose()d: the driver keeps threads and state of its own.
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return makeError(Code::kUnhandledCudaError, "the CUDA driver library %s could not be loaded (%s)", library.c_str(),
                     why ? why : "no reason given");
  }
  auto entry = std::make_unique<EntryPoints>();
  auto find = [&](const char* symbol, auto* slot) -> Status {
    void* address = dlsym(handle, symbol);
    if (!address)
      return makeError(Code::kUnhandledCudaError, "the CUDA driver library %s has no %s", library.c_str(), symbol);
    *slot = reinterpret_cast<std::remove_reference_t<decltype(*slot)>>(address);
    return Status::ok();
  };
  LOOM_TRY(find("cuInit", &entry->init));
  LOOM_TRY(find("cuPointerGetAttribute", &entry->pointerGetAttribute));
  (void)find("cuGetErrorName", &entry->getErrorName);
  // Normally the runtime has initialized the driver already; this is cheap then.
  const CUresult init = entry->init(0);
  if (init != CUDA_SUCCESS)
    return makeError(Code::kUnhandledCudaError, "cuInit from %s failed: %s", library.c_str(),
                     resultText(*entry, init).c_str());
  return std::make_shared<const CudaDriverQueries>(std::move(entry), library);
}

Result<AllocationIdentity> CudaDriverQueries::identify(const void* ptr) const {
  const auto address = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(ptr));
  AllocationIdentity id;
  unsigned long long bufferId = 0;
  CUdeviceptr start = 0;
  size_t size = 0;
  // Pointer attributes need no current context (unified addressing).
  const struct {
    CUpointer_attribute attribute;
    void* out;
    const char* name;
  } queries[] = {
      {CU_POINTER_ATTRIBUTE_BUFFER_ID, &bufferId, "CU_POINTER_ATTRIBUTE_BUFFER_ID"},
      {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, &start, "CU_POINTER_ATTRIBUTE_RANGE_START_ADDR"},
      {CU_POINTER_ATTRIBUTE_RANGE_SIZE, &size, "CU_POINTER_ATTRIBUTE_RANGE_SIZE"},
  };
  for (const auto& q : queries) {
    const CUresult result = entry_->pointerGetAttribute(q.out, q.attribute, address);
    if (result != CUDA_SUCCESS)
      return makeError(Code::kUnhandledCudaError, "cuPointerGetAttribute(%s) on %p failed: %s", q.name, ptr,
                       resultText(*entry_, result).c_str());
  }
  if (bufferId == 0)
    return makeError(Code::kUnhandledCudaError, "the CUDA driver (%s) reports no buffer id for %p", library_.c_str(),
                     ptr);
  id.bufferId = bufferId;
  id.base = static_cast<uintptr_t>(start);
  id.size = size;
  return id;
}

Result<AllocationIdentity> driverAllocationIdentity(const void* ptr) {
  // Loaded once: a failure (no driver on this machine) is remembered too.
  static Result<std::shared_ptr<const CudaDriverQueries>> driver = CudaDriverQueries::load("libcuda.so.1");
  if (!driver.isOk())
    return driver.status().withContext(strprintf("identifying the allocation of %p: ", ptr));
  return driver.value()->identify(ptr);  // the static is never written after its initialization
}

}  // namespace loom::cuda
