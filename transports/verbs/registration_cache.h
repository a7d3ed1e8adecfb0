// Memory registrations kept for reuse, keyed by address range.
//
// ibv_reg_mr pins pages and programs the NIC's translation tables: tens of
// microseconds per call, too slow per transfer. The cache registers a range
// once (widened to whole pages), returns it to every later request that it
// covers with the access rights asked for, and keeps at most `maxEntries`
// registrations, dropping the least recently used first.
//
// Overlap: a request that overlaps cached ranges without being covered by
// one gets a single new registration of the union (with the union of access
// rights), which replaces the overlapped entries in the cache, so the cache
// never holds two ranges for the same page.
//
// Identity: a caller may tag a request with a 64-bit identity of the memory
// behind the range (CUDA's buffer id, unique per allocation). A cached range
// serves only requests with the same identity; a request whose identity
// differs from an overlapping entry's means that memory was freed and the
// address reused, so that entry is dropped (stale) and the range registered
// anew, never merged with it. Untagged requests have identity 0.
//
// Lifetime: get() returns a shared handle. An entry leaving the cache
// (eviction, replacement, invalidate()) is deregistered once its last handle
// is released, so a region in use is never pulled from under a transfer.
// Memory about to be freed must be invalidate()d first: a registration pins
// the old physical pages, and a later allocation at the same address would
// otherwise hit a stale entry and send the wrong bytes.
//
// Thread safety: all methods may be called from any thread. The protection
// domain must outlive the cache and every handle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>

#include "transports/verbs/verbs_api.h"

namespace loom::transport::verbs {

class RegistrationCache {
 public:
  using Handle = std::shared_ptr<const MemoryRegion>;
  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;         // each one ibv_reg_mr call
    uint64_t evictions = 0;      // dropped for capacity
    uint64_t merged = 0;         // replaced by a registration of their union with a new range
    uint64_t invalidations = 0;  // dropped by invalidate()
    uint64_t stale = 0;          // dropped for a request with another identity on overlapping pages
  };

  RegistrationCache(ProtectionDomain& pd, size_t maxEntries);
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  // A registration covering [addr, addr + length) with at least `access`,
  // of the memory known as `identity` (see above).
  Result<Handle> get(void* addr, size_t length, uint32_t access, uint64_t identity = 0);
  // Drops every entry overlapping [addr, addr + length).
  void invalidate(void* addr, size_t length);

  Stats stats() const;
  size_t size() const;

 private:
  struct Entry {
    uintptr_t end = 0;
    uint64_t identity = 0;
    Handle region;
    std::list<uintptr_t>::iterator lru;  // position in lru_ (front: most recent)
  };
  using Index = std::map<uintptr_t, Entry>;  // by page-aligned start; ranges never overlap

  void eraseLocked(Index::iterator it);

  ProtectionDomain& pd_;
  const size_t maxEntries_;
  mutable std::mutex mutex_;
  Index entries_;
  std::list<uintptr_t> lru_;
  Stats stats_;
};

}  // namespace loom::transport::verbs
