#include "transports/shm/shm_windows.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/format.h"

// ThreadSanitizer cannot see that two mappings of one page are one memory,
// so a phase end between ranks that are threads of one process, published
// through their segments, orders nothing in its eyes; a direct copy between
// their private buffers would then look like a race. Each phase end also
// releases, and each wait acquires, the owner's own address of its control
// block: one address in this process, so TSan sees the same order the
// atomics give.
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define LOOM_TSAN_ACQUIRE(key) (key ? __tsan_acquire(key) : void())
#define LOOM_TSAN_RELEASE(key) (key ? __tsan_release(key) : void())
#else
#define LOOM_TSAN_ACQUIRE(key) ((void)(key))
#define LOOM_TSAN_RELEASE(key) ((void)(key))
#endif

namespace loom::transport::shm {

ShmWindows::ShmWindows(int selfRank, std::vector<WindowView> views) : selfRank_(selfRank), views_(std::move(views)) {
  const int n = static_cast<int>(views_.size());
  if (selfRank_ < 0 || selfRank_ >= n) {
    misuse_ = makeError(Code::kInternalError, "shm windows: rank %d outside its %d views", selfRank_, n);
    views_.assign(1, WindowView{});
    selfRank_ = 0;
    return;
  }
  for (int r = 0; r < n; ++r) {
    const WindowView& v = views_[r];
    if (v.control == nullptr || v.data == nullptr || v.bytes != views_[selfRank_].bytes) {
      misuse_ = makeError(Code::kInternalError, "shm windows of rank %d: rank %d's window is %s", selfRank_, r,
                          v.control == nullptr ? "not mapped" : "of another size");
      return;
    }
  }
}

const std::byte* ShmWindows::of(int rank) const {
  if (rank < 0 || rank >= static_cast<int>(views_.size())) return nullptr;
  return views_[rank].data;
}

Status ShmWindows::arrive(uint64_t tag, const WaitContext& wait) {
  if (!misuse_.isOk()) return misuse_;
  const uint64_t phase = phases_ + 1;
  WindowControl& mine = *views_[selfRank_].control;
  LOOM_TSAN_RELEASE(syncKey(selfRank_));
  mine.tags[phase % 2].store(tag, std::memory_order_relaxed);
  mine.phase.store(phase, std::memory_order_release);  // orders the tag and the phase's window writes
  mine.arrived.notify();
  phases_ = phase;
  const int n = static_cast<int>(views_.size());
  int failedPeer = -1;  // the first peer that ended the phase with kFailedTag
  // Peers in turn from the next one: with every rank polling, the first
  // peers each one waits for differ, which spreads the cache-line traffic.
  for (int k = 1; k < n; ++k) {
    const int peer = (selfRank_ + k) % n;
    WindowControl& theirs = *views_[peer].control;
    auto ended = [&] { return theirs.phase.load(std::memory_order_acquire) >= phase; };
    auto what = [&] {
      return strprintf("rank %d to end phase %llu of the shared windows (rank %d waits; rank %d has ended %llu)", peer,
                       static_cast<unsigned long long>(phase), selfRank_, peer,
                       static_cast<unsigned long long>(theirs.phase.load(std::memory_order_relaxed)));
    };
    LOOM_TRY(waitUntil(ended, &theirs.arrived, wait, what));
    LOOM_TSAN_ACQUIRE(syncKey(peer));
    const uint64_t theirTag = theirs.tags[phase % 2].load(std::memory_order_relaxed);
    if (tag == kFailedTag) continue;  // this rank failed: its peers' tags do not matter
    if (theirTag == kFailedTag) {
      if (failedPeer < 0) failedPeer = peer;
      continue;  // the peers after it may have died, which says more
    }
    if (theirTag != tag)
      return makeError(Code::kInvalidUsage,
                       "rank %d ended phase %llu of the shared windows with tag %llu where rank %d used %llu "
                       "(do all ranks call the same collective with the same count and type?)",
                       peer, static_cast<unsigned long long>(phase), static_cast<unsigned long long>(theirTag),
                       selfRank_, static_cast<unsigned long long>(tag));
  }
  // A peer that failed the phase most often found another one dead, which
  // may have ended this phase just before it died: then that death is the
  // news, named as the peer monitor names it.
  if (failedPeer >= 0) {
    Status dead = peerFailureWithin(wait, strprintf("rank %d, which failed phase %llu of the shared windows",
                                                    failedPeer, static_cast<unsigned long long>(phase)));
    if (!dead.isOk()) return dead;
    return makeError(Code::kRemoteError, "rank %d failed within phase %llu of the shared windows (rank %d; see its error)",
                     failedPeer, static_cast<unsigned long long>(phase), selfRank_);
  }
  return Status::ok();
}

namespace {

// One process_vm_readv/writev call moves at most what the kernel takes in
// one go (it may stop short, e.g. at IOV_MAX pages); loop over the rest.
template <class Fn>
ssize_t copyAll(Fn call, std::byte* local, std::byte* remote, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    iovec l{local + done, bytes - done}, r{remote + done, bytes - done};
    const ssize_t n = call(&l, &r);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? -1 : static_cast<ssize_t>(done);
    done += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

}  // namespace

void ShmWindows::enablePeerCopies() {
  peerCopies_ = false;
  if (!misuse_.isOk()) return;
  const int n = static_cast<int>(views_.size());
  const uint64_t self = static_cast<uint64_t>(getpid());
  std::vector<int> pids(static_cast<size_t>(n), 0);
  for (int r = 0; r < n; ++r) {
    const WindowControl& c = *views_[r].control;
    if (c.ownerPid == 0 || c.ownerAddress == 0) return;
    // The same process (ranks as threads) copies with memcpy; the block is
    // then either this very mapping or the owner's own one of the segment.
    const bool here = c.ownerPid == self;
    if (here && c.ownerAddress == reinterpret_cast<uintptr_t>(&c)) continue;
    // Read the owner's own record of its address, at that address, in its
    // process: only the right process (and a kernel that allows the read)
    // gives it back, and a wrong address fails instead of faulting.
    uint64_t seen = 0;
    iovec l{&seen, sizeof seen};
    const auto field = reinterpret_cast<const std::byte*>(&c.ownerAddress) - reinterpret_cast<const std::byte*>(&c);
    iovec rem{reinterpret_cast<void*>(c.ownerAddress + static_cast<uint64_t>(field)), sizeof seen};
    if (process_vm_readv(static_cast<pid_t>(c.ownerPid), &l, 1, &rem, 1, 0) != sizeof seen || seen != c.ownerAddress)
      return;
    if (!here) pids[r] = static_cast<int>(c.ownerPid);
  }
  pids_ = std::move(pids);
  peerCopies_ = true;
}

bool ShmWindows::peerCopiesInProcess() const {
  if (!peerCopies_) return false;
  for (int pid : pids_)
    if (pid != 0) return false;
  return true;
}

void* ShmWindows::syncKey(int rank) const {
  if (!peerCopies_ || pids_[rank] != 0) return nullptr;  // another process: TSan sees neither side
  return reinterpret_cast<void*>(views_[rank].control->ownerAddress);
}

Status ShmWindows::readPeer(int rank, void* local, const void* remote, size_t bytes) {
  return copyWithPeer(rank, static_cast<std::byte*>(local), static_cast<std::byte*>(const_cast<void*>(remote)),
                      bytes, false);
}

Status ShmWindows::writePeer(int rank, const void* local, void* remote, size_t bytes) {
  return copyWithPeer(rank, static_cast<std::byte*>(const_cast<void*>(local)), static_cast<std::byte*>(remote), bytes,
                      true);
}

Status ShmWindows::copyWithPeer(int rank, std::byte* local, std::byte* remote, size_t bytes, bool toPeer) {
  const char* what = toPeer ? "writing" : "reading";
  LOOM_ENFORCE(peerCopies_ && rank >= 0 && rank < static_cast<int>(pids_.size()), Code::kInternalError,
               "shm windows of rank %d: no direct copies with rank %d (%s)", selfRank_, rank, what);
  if (bytes == 0) return Status::ok();
  const pid_t pid = pids_[rank];
  if (pid == 0) {
    std::memcpy(toPeer ? remote : local, toPeer ? local : remote, bytes);
    return Status::ok();
  }
  const ssize_t n = copyAll(
      [&](iovec* l, iovec* r) {
        return toPeer ? process_vm_writev(pid, l, 1, r, 1, 0) : process_vm_readv(pid, l, 1, r, 1, 0);
      },
      local, remote, bytes);
  if (n == static_cast<ssize_t>(bytes)) return Status::ok();
  return makeError(Code::kSystemError, "rank %d %s %zu bytes at %p of rank %d (pid %d): %s", selfRank_, what, bytes,
                   static_cast<void*>(remote), rank, static_cast<int>(pid),
                   n < 0 ? std::strerror(errno) : "short copy");
}

}  // namespace loom::transport::shm
