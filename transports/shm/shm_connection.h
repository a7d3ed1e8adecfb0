// The two ends of one shared-memory FIFO (see shm_layout.h), plus the
// stand-ins sendTo()/recvFrom() hand out for ranks without a connection.
//
// Protocol (single producer, single consumer, no locks):
//   sender   acquire: wait until head - tail < slots and the next place is
//                     free; write the chunk there (chunk_ring.h)
//            commit:  bytes[head % slots] = n; head.store(head + 1, release); committed.notify()
//   receiver acquire: wait until tail < head (acquire load); read the chunk
//                     at the place the sizes before it give
//            release: tail.store(tail + 1, release); released.notify()
// Each side keeps a private copy of its own counter and of the last value it
// saw of the other's, so a side with room (or data) already known touches no
// shared cache line at all in acquire().
//
// Ownership: a connection points into a mapping owned by its ShmTransport and
// must not outlive it. Thread safety: one thread drives a connection at a
// time; the two ends may be driven by different threads or processes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "transports/shm/chunk_ring.h"
#include "transports/shm/shm_layout.h"
#include "transports/transport.h"

namespace loom::transport::shm {

// Where one FIFO lives in the caller's address space.
struct FifoView {
  FifoControl* control = nullptr;
  std::byte* slots = nullptr;  // slot i at slots + i * slotStride
  uint32_t slotCount = 0;
  uint64_t slotStride = 0;
  uint64_t chunkBytes = 0;
};

class ShmSendConnection final : public SendConnection {
 public:
  ShmSendConnection(const FifoView& fifo, int selfRank, int peerRank);

  size_t chunkBytes() const override { return fifo_.chunkBytes; }
  Status acquire(std::byte** slot, const WaitContext& wait) override;
  bool tryAcquire(std::byte** slot) override;
  // A commit without a pending acquire, or of more than chunkBytes(), is a
  // caller bug: nothing is published and the next acquire() reports it.
  void commit(size_t bytes) override;

 private:
  bool hasRoom() const {
    if (head_ == tailSeen_) return true;
    return head_ - tailSeen_ < fifo_.slotCount && ring_.roomAfter(starts_[tailSeen_ % fifo_.slotCount], end_);
  }
  std::byte* next();

  FifoView fifo_;
  ChunkRing ring_;
  int selfRank_;
  int peerRank_;
  uint64_t head_ = 0;      // chunks committed (our copy of control->head)
  uint64_t tailSeen_ = 0;  // last control->tail observed
  uint32_t slotIndex_ = 0; // head_ % slotCount, kept incrementally
  uint64_t end_ = 0;       // where the last committed chunk ends
  uint64_t at_ = 0;        // where the acquired chunk starts
  std::vector<uint64_t> starts_;  // start of chunk k at k % slotCount, until released
  bool acquired_ = false;
  Status misuse_;
};

class ShmRecvConnection final : public RecvConnection {
 public:
  ShmRecvConnection(const FifoView& fifo, int selfRank, int peerRank);

  size_t chunkBytes() const override { return fifo_.chunkBytes; }
  Status acquire(const std::byte** data, size_t* bytes, const WaitContext& wait) override;
  bool tryAcquire(const std::byte** data, size_t* bytes) override;
  // A release without a pending acquire is a caller bug: nothing is released
  // and the next acquire() reports it.
  void release() override;

 private:
  FifoView fifo_;
  ChunkRing ring_;
  int selfRank_;
  int peerRank_;
  uint64_t tail_ = 0;      // chunks released (our copy of control->tail)
  uint64_t headSeen_ = 0;  // last control->head observed
  uint32_t slotIndex_ = 0; // tail_ % slotCount
  uint64_t end_ = 0;       // where the last released chunk ends
  uint64_t acquiredBytes_ = 0;
  bool acquired_ = false;
  Status misuse_;
};

// Returned for a peer this transport has no connection to: every acquire()
// fails with `message`; commit()/release() do nothing.
class UnconnectedSend final : public SendConnection {
 public:
  explicit UnconnectedSend(std::string message) : message_(std::move(message)) {}
  size_t chunkBytes() const override { return 0; }
  Status acquire(std::byte** slot, const WaitContext&) override;
  bool tryAcquire(std::byte** slot) override { *slot = nullptr; return false; }
  void commit(size_t) override {}

 private:
  std::string message_;
};

class UnconnectedRecv final : public RecvConnection {
 public:
  explicit UnconnectedRecv(std::string message) : message_(std::move(message)) {}
  size_t chunkBytes() const override { return 0; }
  Status acquire(const std::byte** data, size_t* bytes, const WaitContext&) override;
  bool tryAcquire(const std::byte** data, size_t* bytes) override {
    *data = nullptr;
    *bytes = 0;
    return false;
  }
  void release() override {}

 private:
  std::string message_;
};

}  // namespace loom::transport::shm
