// Which allocation a device pointer belongs to, so that a memory
// registration made for one allocation is never reused for another that
// the allocator later placed at the same address (cudaFree, then cudaMalloc).
//
// The CUDA driver gives every allocation a buffer id
// (CU_POINTER_ATTRIBUTE_BUFFER_ID), unique for the life of the process; the
// GDR path (src/device/gdr_path.h) tags its registrations of user buffers with it
// (transport/verbs/registration_cache.h "Identity").
//
// The driver is reached through dlopen("libcuda.so.1"), never linked: a
// libloom built with CUDA still loads on machines without a driver, and
// there every query fails with a message that says so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"

namespace loom::cuda {

struct AllocationIdentity {
  uint64_t bufferId = 0;  // never 0 for a live allocation
  uintptr_t base = 0;     // the allocation's first byte
  size_t size = 0;        // and its length
};

// The identity of the allocation holding `ptr`, or why it is unknown.
using AllocationIdentityFn = std::function<Result<AllocationIdentity>(const void* ptr)>;

// The driver's answer; libcuda.so.1 is loaded on the first call and kept.
// What the GDR path uses unless GdrPathOptions::identify says otherwise.
Result<AllocationIdentity> driverAllocationIdentity(const void* ptr);

// The entry points driverAllocationIdentity() uses, from a driver library
// named by the caller (tests load libraries other than libcuda.so.1).
class CudaDriverQueries {
 public:
  // dlopen(library, RTLD_NOW | RTLD_LOCAL), its symbols, and cuInit(0). The
  // library stays loaded for the life of the process.
  static Result<std::shared_ptr<const CudaDriverQueries>> load(const std::string& library);
  Result<AllocationIdentity> identify(const void* ptr) const;

  struct EntryPoints;  // the driver's functions (CUDA builds only)
  explicit CudaDriverQueries(std::unique_ptr<const EntryPoints> entry, std::string library);
  ~CudaDriverQueries();

 private:
  std::unique_ptr<const EntryPoints> entry_;
  std::string library_;
};

}  // namespace loom::cuda
