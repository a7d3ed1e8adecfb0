// The shared-memory windows (transport.h's SharedWindows): every rank's
// window lives in its own segment after a control page holding its phase
// count. A phase end is one release store of the owner's count plus a poll
// of each peer's, so it costs a cache-line hand-off per peer and nothing to
// give back; the data itself is never copied by the transport.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transports/shm/shm_layout.h"
#include "transports/transport.h"

namespace loom::transport::shm {

// Where one rank's window lives in the caller's address space.
struct WindowView {
  WindowControl* control = nullptr;  // null: this rank's window is not mapped here
  std::byte* data = nullptr;
  uint64_t bytes = 0;
};

class ShmWindows final : public SharedWindows {
 public:
  // `views` is indexed by rank; every rank's must be mapped.
  ShmWindows(int selfRank, std::vector<WindowView> views);

  size_t bytes() const override { return static_cast<size_t>(views_[selfRank_].bytes); }
  std::byte* own() override { return views_[selfRank_].data; }
  const std::byte* of(int rank) const override;
  Status arrive(uint64_t tag, const WaitContext& wait) override;
  uint64_t phasesEnded() const override { return phases_; }

  // Checks that this process can copy straight from and to every peer's
  // memory, and if so turns peerCopies() on. A peer in this process (ranks
  // as threads) is copied with memcpy; one in another process with
  // process_vm_readv/writev, which the kernel allows only where this process
  // may ptrace the peer (same user, Yama's ptrace_scope, a container's
  // seccomp profile, the same PID namespace): so each peer's control block is
  // read back through it once, here, rather than assumed.
  void enablePeerCopies();
  bool peerCopies() const override { return peerCopies_; }
  bool peerCopiesInProcess() const override;
  Status readPeer(int rank, void* local, const void* remote, size_t bytes) override;
  Status writePeer(int rank, const void* local, void* remote, size_t bytes) override;

 private:
  // readPeer (toPeer false) and writePeer (true).
  Status copyWithPeer(int rank, std::byte* local, std::byte* remote, size_t bytes, bool toPeer);
  // For ThreadSanitizer (shm_windows.cc): rank's control block at its
  // owner's address, where the owner is this process; else null.
  void* syncKey(int rank) const;

  int selfRank_;
  std::vector<WindowView> views_;
  uint64_t phases_ = 0;  // phases this rank has ended
  bool peerCopies_ = false;
  std::vector<int> pids_;  // by rank, for peerCopies_; 0: this process (plain memcpy)
  Status misuse_;
};

}  // namespace loom::transport::shm
