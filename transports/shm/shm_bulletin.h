// The shared-memory bulletin (transport.h's Bulletin): each rank's message
// of round k lives in its own segment, in buffer k mod kBulletinBuffers, as
// LL lines (shm_ll_connection.h's wire format): a header line holding the
// byte count, then one line per 4 payload bytes, every line carrying the
// round's flag. A reader polls the lines in place; nothing else is shared,
// so a round costs the writer one pass of stores and each reader one pass
// of loads, with no counters to bump or give back.
//
// Why reusing buffers is safe: see transport.h's round contract. Stale
// lines: a buffer's lines that a short message leaves untouched keep an
// older round's flag; flags repeat every flagPeriod rounds, so the writer
// rewrites a buffer in full whenever its oldest line would otherwise be a
// whole period old when read next (as the LL FIFO does per slot).
//
// Ordering: lines are stored with release and loaded with acquire, so a
// reader's loads of round k happen before its round k+1 stores, which
// happen before the writer's stores of any later round into the same buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transports/shm/shm_layout.h"
#include "transports/transport.h"

namespace loom::transport::shm {

// Where one rank's bulletin lives in the caller's address space.
struct BulletinView {
  BulletinControl* control = nullptr;  // null: no bulletin of this rank is mapped
  std::byte* buffers = nullptr;        // buffer b at buffers + b * stride, 8-byte aligned
  uint64_t stride = 0;
  uint64_t capacity = 0;  // message bytes: a multiple of 4, below 2^32
  // Flags cycle through 1 .. flagPeriod; tests shrink it (it must exceed kBulletinBuffers).
  uint32_t flagPeriod = kLLFlagPeriod;
};

class ShmBulletin final : public Bulletin {
 public:
  // `views` is indexed by rank: this rank's own (written) and every peer's
  // (read); a peer whose view has no control block cannot be read.
  ShmBulletin(int selfRank, std::vector<BulletinView> views);

  Status post(const void* data, size_t bytes) override;
  Status read(int peer, void* out, size_t bytes, const WaitContext& wait) override;
  bool peersPosted() const override;
  void announceStart(uint64_t seq) override;
  bool peersStarted(uint64_t seq) const override;

 private:
  int selfRank_;
  std::vector<BulletinView> views_;
  uint64_t rounds_ = 0;          // rounds posted; the current one is rounds_ - 1
  int unread_ = 0;               // peers not yet read in the current round
  int peers_ = 0;                // views with a bulletin, other than our own
  std::vector<uint64_t> readIn_; // per rank: 1 + the last round read from it (0: none)
  uint64_t fullWrite_[kBulletinBuffers];        // per buffer: the last round that wrote all its lines
  // Per peer with a bulletin: where its header line of the round this rank
  // posted last lies, and the flag it carries once written. Set by post():
  // callers poll peersPosted in tight loops, where recomputing them (a
  // 64-bit division per peer) would lengthen every poll.
  struct AwaitedHeader {
    int rank = -1;
    uint64_t* line = nullptr;  // in the peer's segment, read only
    uint32_t flag = 0;
  };
  std::vector<AwaitedHeader> awaited_;
  Status misuse_;
};

}  // namespace loom::transport::shm
