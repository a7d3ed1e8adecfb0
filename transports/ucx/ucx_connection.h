// The two ends of one UCX connection direction as the executor sees them, and
// the link state they share with the progress thread (ucx_progress.h).
//
// Each direction is a ring of `slots` private buffers of chunkBytes each on
// either side; the progress thread turns ring positions into UCP operations:
//   sender   acquire: wait until head - sent < slots (its slot's last send completed)
//            commit:  bytes[slot] = n; head += 1 (release); wake the progress thread
//   progress posts the tagged send of chunk i once i < head and the receiver
//            has granted credit for it; `sent` advances over the contiguous
//            prefix of completed sends
//   progress keeps a tagged receive posted into every free receive slot
//            (chunk i into slot i % slots once i < tail + slots) and returns
//            each release to the sender as credit; `arrived` advances over the
//            contiguous prefix of completed receives
//   receiver acquire: wait until tail < arrived (or the link failed)
//            release: tail += 1 (release); wake the progress thread
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

namespace loom::transport::ucx {

// Wakes the progress thread.
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
  // `clean`: the peer said goodbye (its communicator was destroyed); a wait
  // for more data still fails, but the peer does not count as unhealthy.
  void fail(Status status, bool clean = false);
  bool failedUncleanly() const { return failed() && !clean_.load(std::memory_order_acquire); }
  bool closedCleanly() const { return failed() && clean_.load(std::memory_order_acquire); }
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

// Advances a counter over the contiguous prefix of completions that may
// arrive out of order (a rendezvous send can finish after a later eager one).
class CompletionTracker {
 public:
  explicit CompletionTracker(uint32_t slots) : done_(slots, 0) {}
  // Marks chunk `chunk` done; returns how many chunks are done contiguously.
  uint64_t complete(uint64_t chunk);
  uint64_t contiguous() const { return next_; }

 private:
  std::vector<char> done_;
  uint64_t next_ = 0;
};

class UcxSendConnection final : public SendConnection {
 public:
  UcxSendConnection(size_t chunkBytes, int slots, LinkState* link, ProgressWaker* waker);

  size_t chunkBytes() const override { return ring_.chunkBytes(); }
  Status acquire(std::byte** slot, const WaitContext& wait) override;
  bool tryAcquire(std::byte** slot) override;
  void commit(size_t bytes) override;

  // Progress side.
  uint32_t slots() const { return ring_.slots(); }
  uint64_t committed() const { return head_.load(std::memory_order_acquire); }
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
  std::atomic<uint64_t> head_{0};    // chunks committed
  std::atomic<uint64_t> sent_{0};    // chunks whose send completed (contiguous)
  uint64_t headLocal_ = 0;           // executor's copy of head_
  uint64_t sentSeen_ = 0;            // executor's last view of sent_
  bool acquired_ = false;
  Status misuse_;
  CompletionTracker sentTracker_;    // progress side
};

class UcxRecvConnection final : public RecvConnection {
 public:
  UcxRecvConnection(size_t chunkBytes, int slots, LinkState* link, ProgressWaker* waker);

  size_t chunkBytes() const override { return ring_.chunkBytes(); }
  Status acquire(const std::byte** data, size_t* bytes, const WaitContext& wait) override;
  bool tryAcquire(const std::byte** data, size_t* bytes) override;
  void release() override;

  // Progress side.
  uint32_t slots() const { return ring_.slots(); }
  uint64_t released() const { return tail_.load(std::memory_order_acquire); }
  std::byte* chunkData(uint64_t chunk) { return ring_.slot(chunk); }
  void markArrived(uint64_t chunk, uint32_t bytes);

 private:
  SlotRing ring_;
  LinkState* link_;
  ProgressWaker* waker_;
  std::vector<uint32_t> bytes_;       // per slot, written before arrived_ moves
  std::atomic<uint64_t> arrived_{0};  // chunks fully received (contiguous)
  std::atomic<uint64_t> tail_{0};     // chunks released
  uint64_t tailLocal_ = 0;
  uint64_t arrivedSeen_ = 0;
  bool acquired_ = false;
  Status misuse_;
  CompletionTracker arrivedTracker_;  // progress side
};

}  // namespace loom::transport::ucx
