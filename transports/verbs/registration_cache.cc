#include "transports/verbs/registration_cache.h"

#include <algorithm>

namespace loom::transport::verbs {
namespace {

constexpr uintptr_t kPage = 4096;

uintptr_t pageDown(uintptr_t a) { return a & ~(kPage - 1); }
uintptr_t pageUp(uintptr_t a) { return (a + kPage - 1) & ~(kPage - 1); }

}  // namespace

RegistrationCache::RegistrationCache(ProtectionDomain& pd, size_t maxEntries)
    : pd_(pd), maxEntries_(std::max<size_t>(maxEntries, 1)) {}

RegistrationCache::~RegistrationCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();  // regions still held elsewhere are deregistered on their release
  lru_.clear();
}

void RegistrationCache::eraseLocked(Index::iterator it) {
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

Result<RegistrationCache::Handle> RegistrationCache::get(void* addr, size_t length, uint32_t access,
                                                         uint64_t identity) {
  LOOM_ENFORCE(addr != nullptr && length > 0, Code::kInvalidArgument,
               "verbs: registering %zu bytes at %p (an empty or null range)", length, addr);
  const uintptr_t begin = pageDown(reinterpret_cast<uintptr_t>(addr));
  const uintptr_t end = pageUp(reinterpret_cast<uintptr_t>(addr) + length);
  std::lock_guard<std::mutex> lock(mutex_);

  // The entry starting at or before `begin` is the only one that can cover it.
  auto it = entries_.upper_bound(begin);
  if (it != entries_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end >= end && prev->second.identity == identity &&
        (prev->second.region->access & access) == access) {
      ++stats_.hits;
      lru_.splice(lru_.begin(), lru_, prev->second.lru);
      return prev->second.region;
    }
  }

  // Miss: register the union with every overlapping entry of the same
  // identity, which it replaces; overlapping entries of another identity
  // describe memory that is gone, and are only dropped.
  uintptr_t lo = begin, hi = end;
  uint32_t rights = access;
  auto first = entries_.upper_bound(begin);
  if (first != entries_.begin() && std::prev(first)->second.end > begin) --first;
  auto last = first;
  while (last != entries_.end() && last->first < end) {
    if (last->second.identity == identity) {
      lo = std::min(lo, last->first);
      hi = std::max(hi, last->second.end);
      rights |= last->second.region->access;
    }
    ++last;
  }
  auto registered = pd_.registerMemory(reinterpret_cast<void*>(lo), hi - lo, rights);
  if (!registered.isOk())
    return registered.status().withContext("verbs: registering memory for the registration cache: ");
  ++stats_.misses;
  while (first != last) {
    auto next = std::next(first);
    ++(first->second.identity == identity ? stats_.merged : stats_.stale);
    eraseLocked(first);
    first = next;
  }
  ProtectionDomain* pd = &pd_;
  Handle region(new MemoryRegion(registered.value()), [pd](const MemoryRegion* mr) {
    (void)pd->deregisterMemory(*mr);  // nothing to do about a failure at this point
    delete mr;
  });
  lru_.push_front(lo);
  entries_[lo] = Entry{hi, identity, region, lru_.begin()};
  while (entries_.size() > maxEntries_) {
    ++stats_.evictions;
    eraseLocked(entries_.find(lru_.back()));
  }
  return region;
}

void RegistrationCache::invalidate(void* addr, size_t length) {
  if (!addr || length == 0) return;
  const uintptr_t begin = pageDown(reinterpret_cast<uintptr_t>(addr));
  const uintptr_t end = pageUp(reinterpret_cast<uintptr_t>(addr) + length);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.upper_bound(begin);
  if (it != entries_.begin() && std::prev(it)->second.end > begin) --it;
  while (it != entries_.end() && it->first < end) {
    auto next = std::next(it);
    ++stats_.invalidations;
    eraseLocked(it);
    it = next;
  }
}

RegistrationCache::Stats RegistrationCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

size_t RegistrationCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

}  // namespace loom::transport::verbs
