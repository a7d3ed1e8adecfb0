// The two ends of one TCP connection direction as the executor sees them,
// and the link state they share with the progress thread (tcp_progress.h).
//
// Each direction is a ring of `slots` private buffers of chunkBytes each.
//   sender   acquire: wait until head - sent < slots (or the link failed)
//            commit:  bytes[slot] = n; head += 1 (release); wake the progress thread
//   progress writes chunk i on socket i % nsocks once i < head, and advances
//            `sent` over the contiguous prefix of chunks fully written
//   progress reads chunk i from socket i % nsocks once i < tail + slots (its
//            slot is free), and advances `arrived` over the contiguous prefix
//   receiver acquire: wait until tail < arrived (or the link failed)
//            release: tail += 1 (release); wake the progress thread
// So at most `slots` chunks wait on either side per direction, and the
// receiver's kernel buffer plus TCP flow control hold back a fast sender.
//
// Thread safety: one executor thread drives each end; the progress thread
// touches only the progress-side members (marked below).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transports/transport.h"

namespace loom::transport::tcp {

// std::chrono::steady_clock in nanoseconds.
int64_t steadyNanos();

// Wakes the progress thread (an eventfd write).
class ProgressWaker {
 public:
  virtual void wake() = 0;

 protected:
  ~ProgressWaker() = default;
};

// Whether the link to one peer still works; the first failure wins.
class LinkState {
 public:
  LinkState(int selfRank, int peerRank, std::string peerHost)
      : selfRank_(selfRank), peerRank_(peerRank), peerHost_(std::move(peerHost)) {}
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // `clean`: the peer closed normally (its communicator was destroyed); a
  // wait for data still fails, but the peer does not count as unhealthy.
  void fail(Status status, bool clean = false);
  bool failedUncleanly() const { return failed() && !clean_.load(std::memory_order_acquire); }
  Status error() const;
  int selfRank() const { return selfRank_; }
  int peerRank() const { return peerRank_; }
  const std::string& peerHost() const { return peerHost_; }
  // Signals the executor may sleep on: notified on every change it waits for.
  WaitSignal sendSignal;
  WaitSignal recvSignal;

 private:
  const int selfRank_;
  const int peerRank_;
  const std::string peerHost_;
  std::atomic<bool> failed_{false};
  std::atomic<bool> clean_{false};
  mutable std::mutex mutex_;
  Status error_;
};

// Page-aligned storage for `slots` chunks.
class SlotRing {
 public:
  SlotRing(size_t chunkBytes, int slots);
  std::byte* slot(uint64_t chunk) { return base_.get() + (chunk % slots_) * chunkBytes_; }
  size_t chunkBytes() const { return chunkBytes_; }
  uint32_t slots() const { return slots_; }

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  size_t chunkBytes_;
  uint32_t slots_;
  std::unique_ptr<std::byte, Free> base_;
};

class TcpSendConnection final : public SendConnection {
 public:
  TcpSendConnection(size_t chunkBytes, int slots, LinkState* link, ProgressWaker* waker);

  size_t chunkBytes() const override { return ring_.chunkBytes(); }
  Status acquire(std::byte** slot, const WaitContext& wait) override;
  bool tryAcquire(std::byte** slot) override;
  void commit(size_t bytes) override;

  // Test only (LOOM_TCP_TEST_DELAY_US, emulated link latency): each chunk
  // may be sent no earlier than `nanos` after its commit. Set before use.
  void holdChunksFor(int64_t nanos);

  // Progress side.
  uint64_t committed() const { return head_.load(std::memory_order_acquire); }
  // Steady-clock nanoseconds before which `chunk` must not be sent (0: none).
  int64_t sendableAt(uint64_t chunk) const { return holdNanos_ ? readyAt_[chunk % ring_.slots()] : 0; }
  std::byte* chunkData(uint64_t chunk) { return ring_.slot(chunk); }
  uint32_t chunkBytesOf(uint64_t chunk) const { return bytes_[chunk % ring_.slots()]; }
  void markSent(uint64_t chunk);
  bool allSent() const { return sent_.load(std::memory_order_acquire) == head_.load(std::memory_order_acquire); }

 private:
  bool hasRoom() const { return headLocal_ - sentSeen_ < ring_.slots(); }

  SlotRing ring_;
  LinkState* link_;
  ProgressWaker* waker_;
  std::vector<uint32_t> bytes_;      // per slot, written before head_ moves
  int64_t holdNanos_ = 0;            // test-only delay (holdChunksFor)
  std::vector<int64_t> readyAt_;     // per slot, written before head_ moves (only with a delay)
  std::atomic<uint64_t> head_{0};    // chunks committed
  std::atomic<uint64_t> sent_{0};    // chunks fully written to their socket (contiguous)
  uint64_t headLocal_ = 0;           // executor's copy of head_
  uint64_t sentSeen_ = 0;            // executor's last view of sent_
  bool acquired_ = false;
  Status misuse_;
  std::vector<char> sentFlags_;      // progress side: per slot, written but not yet counted
  uint64_t sentLocal_ = 0;           // progress side
};

class TcpRecvConnection final : public RecvConnection {
 public:
  TcpRecvConnection(size_t chunkBytes, int slots, LinkState* link, ProgressWaker* waker);

  size_t chunkBytes() const override { return ring_.chunkBytes(); }
  Status acquire(const std::byte** data, size_t* bytes, const WaitContext& wait) override;
  bool tryAcquire(const std::byte** data, size_t* bytes) override;
  void release() override;

  // Progress side.
  bool slotFree(uint64_t chunk) const { return chunk < tail_.load(std::memory_order_acquire) + ring_.slots(); }
  std::byte* chunkData(uint64_t chunk) { return ring_.slot(chunk); }
  void markArrived(uint64_t chunk, uint32_t bytes);

 private:
  SlotRing ring_;
  LinkState* link_;
  ProgressWaker* waker_;
  std::vector<uint32_t> bytes_;       // per slot, written before arrived_ moves
  std::atomic<uint64_t> arrived_{0};  // chunks fully read (contiguous)
  std::atomic<uint64_t> tail_{0};     // chunks released
  uint64_t tailLocal_ = 0;
  uint64_t arrivedSeen_ = 0;
  bool acquired_ = false;
  Status misuse_;
  std::vector<char> arrivedFlags_;    // progress side
  uint64_t arrivedLocal_ = 0;         // progress side
};

}  // namespace loom::transport::tcp
