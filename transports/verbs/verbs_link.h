// One peer of the verbs transport: an RC queue pair carrying both
// directions, the two chunk FIFOs of transport.h on top of it, and the
// credit protocol that keeps the sender from overrunning the receiver.
//
// Each side owns two registered rings of `slots` x chunkBytes: a staging
// ring the local algorithm writes into (send side) and a receive ring the
// peer writes into (recv side).
//   sender   acquire: wait until chunk `head` has a slot: head - released < slots
//                     (credits) and head - written < slots (staging slot's
//                     previous write completed)
//            commit:  RDMA WRITE WITH IMMEDIATE of the staging slot into the
//                     peer's receive slot head % slots; imm = kData | head
//   receiver acquire: wait for the receive completion of chunk `tail` (RC
//                     delivers them in order); its byte_len is the chunk size
//            release: tail += 1, and a zero-byte WRITE WITH IMMEDIATE
//                     (imm = kCredit | tail, the cumulative count) returns
//                     the credit; at most two are in flight, later releases
//                     ride on the next one
// Every message consumes one receive the peer posted; each side keeps
// 2 x slots + 4 posted (the most that can arrive between two of its polls:
// slots chunks, slots + 2 credits, one goodbye) and reposts one per
// receive completion, so the peer never meets an empty receive queue.
//
// Failure: the first error completion fails the link with a message naming
// the peer's rank and host; every later wait on it returns that error.
// Chunks that arrived before a failure are still delivered. A peer that
// closes cleanly sends kGoodbye first, which fails waits without counting
// as a dead peer for health().
//
// Threading: completions are dispatched by the CompletionPump (under its
// lock); the counters it moves are atomics read by the executor thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transports/transport.h"
#include "transports/verbs/registration_cache.h"
#include "transports/verbs/verbs_api.h"

namespace loom::transport::verbs {

class CompletionPump;

// The immediate: two type bits, then a 30-bit cumulative count.
constexpr uint32_t kImmTypeShift = 30;
constexpr uint32_t kImmCountMask = (1u << kImmTypeShift) - 1;
enum ImmType : uint32_t { kImmData = 0, kImmCredit = 1, kImmGoodbye = 2 };
inline uint32_t makeImm(ImmType type, uint64_t count) {
  return (static_cast<uint32_t>(type) << kImmTypeShift) | (static_cast<uint32_t>(count) & kImmCountMask);
}

// Work request ids: the kind in the top byte, a count below.
enum WrKind : uint64_t { kWrData = 1, kWrCredit = 2, kWrProbe = 3, kWrGoodbye = 4, kWrRecv = 5 };
inline uint64_t makeWrId(WrKind kind, uint64_t n) { return (static_cast<uint64_t>(kind) << 56) | (n & ((1ull << 56) - 1)); }
inline WrKind wrKindOf(uint64_t wrId) { return static_cast<WrKind>(wrId >> 56); }

// Page-aligned memory of `slots` chunks, registered through the cache.
class RegisteredRing {
 public:
  static Result<std::unique_ptr<RegisteredRing>> create(size_t chunkBytes, int slots, uint32_t access,
                                                        RegistrationCache& cache);
  ~RegisteredRing();
  std::byte* slot(uint64_t chunk) const { return base_ + (chunk % slots_) * chunkBytes_; }
  uint64_t address() const { return reinterpret_cast<uint64_t>(base_); }
  uint32_t lkey() const { return region_->lkey; }
  uint32_t rkey() const { return region_->rkey; }

 private:
  RegisteredRing(std::byte* base, size_t bytes, size_t chunkBytes, uint32_t slots, RegistrationCache& cache)
      : base_(base), bytes_(bytes), chunkBytes_(chunkBytes), slots_(slots), cache_(cache) {}
  std::byte* base_;
  size_t bytes_;
  size_t chunkBytes_;
  uint32_t slots_;
  RegistrationCache& cache_;
  RegistrationCache::Handle region_;
};

struct LinkIdentity {
  int selfRank = 0;
  int peerRank = 0;
  std::string peerHost;
};

// Where the peer writes our chunks, and how to reach its QP.
struct RemoteRing {
  uint64_t address = 0;
  uint32_t rkey = 0;
};

class VerbsLink;

class VerbsSendConnection final : public SendConnection {
 public:
  explicit VerbsSendConnection(VerbsLink& link) : link_(link) {}
  size_t chunkBytes() const override;
  Status acquire(std::byte** slot, const WaitContext& wait) override;
  bool tryAcquire(std::byte** slot) override;
  void commit(size_t bytes) override;

 private:
  VerbsLink& link_;
  bool acquired_ = false;
  Status misuse_;
};

class VerbsRecvConnection final : public RecvConnection {
 public:
  explicit VerbsRecvConnection(VerbsLink& link) : link_(link) {}
  size_t chunkBytes() const override;
  Status acquire(const std::byte** data, size_t* bytes, const WaitContext& wait) override;
  bool tryAcquire(const std::byte** data, size_t* bytes) override;
  void release() override;

 private:
  VerbsLink& link_;
  bool acquired_ = false;
  Status misuse_;
};

class VerbsLink {
 public:
  static int recvDepth(int slots) { return 2 * slots + 4; }
  static int sendDepth(int slots) { return slots + 4; }  // data + 2 credits + probe + goodbye

  VerbsLink(LinkIdentity who, size_t chunkBytes, int slots, std::unique_ptr<QueuePair> qp,
            std::unique_ptr<RegisteredRing> staging, std::unique_ptr<RegisteredRing> inbox, CompletionPump& pump);
  ~VerbsLink();

  // RESET -> INIT, with the receives posted (before any peer can write).
  Status prepare(uint8_t portNum);
  // INIT -> RTR -> RTS against the peer's QP; `ring` is its receive ring for us.
  Status connect(const PortAttributes& local, const RemoteQp& remote, uint32_t localPsn, const RemoteRing& ring);

  uint32_t qpn() const { return qp_->qpn(); }
  uint64_t inboxAddress() const { return inbox_->address(); }
  uint32_t inboxRkey() const { return inbox_->rkey(); }
  const LinkIdentity& who() const { return who_; }
  size_t chunkBytes() const { return chunkBytes_; }
  QpState qpState() const { return qp_->state(); }

  // Failure state: the first failure wins.
  void fail(Status status, bool clean = false);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  bool failedUncleanly() const { return failed() && !clean_.load(std::memory_order_acquire); }
  Status error() const;

  // Called by the pump, under its lock.
  void onCompletion(const WorkCompletion& wc);

  // A zero-byte RDMA WRITE (no immediate) that only the peer's HCA sees: it
  // fails with IBV_WC_RETRY_EXC_ERR if the peer is gone, which is how a wait
  // that hears nothing learns the peer died. At most one in flight.
  void probe();
  // Destruction: whether every committed chunk's write completed, and the goodbye.
  bool allWritten() const { return written_.load(std::memory_order_acquire) == head_.load(std::memory_order_acquire); }
  void sayGoodbye();
  bool goodbyeDone() const { return goodbyeDone_.load(std::memory_order_acquire); }

  VerbsSendConnection send;
  VerbsRecvConnection recv;

 private:
  friend class VerbsSendConnection;
  friend class VerbsRecvConnection;

  bool hasRoom() const;
  bool hasChunk() const { return arrived_.load(std::memory_order_acquire) > tail_.load(std::memory_order_relaxed); }
  void postData(size_t bytes);
  void returnCredits();
  Status post(const RdmaWrite& wr);
  Status completionError(const WorkCompletion& wc) const;
  Status protocolError(const char* what, unsigned long long value) const;
  std::string describe() const;

  const LinkIdentity who_;
  const size_t chunkBytes_;
  const uint32_t slots_;
  std::unique_ptr<QueuePair> qp_;
  std::unique_ptr<RegisteredRing> staging_;
  std::unique_ptr<RegisteredRing> inbox_;
  CompletionPump& pump_;
  RemoteRing remote_;

  // Sender: head_ chunks committed (written by the executor only).
  std::atomic<uint64_t> head_{0};
  // Moved by the pump.
  std::atomic<uint64_t> written_{0};   // data writes completed (in order: one QP)
  std::atomic<uint64_t> released_{0};  // chunks the peer released (its credits)
  // Receiver: tail_ chunks released by the executor; arrived_ moved by the pump.
  std::atomic<uint64_t> tail_{0};
  std::atomic<uint64_t> arrived_{0};
  std::vector<uint32_t> sizes_;  // per slot, written by the pump before arrived_ moves

  // Credits and probes, shared by executor and pump.
  std::mutex postMutex_;
  uint64_t creditSent_ = 0;  // highest cumulative release count posted
  int creditsInFlight_ = 0;
  bool probeInFlight_ = false;
  std::atomic<bool> goodbyeDone_{false};
  uint64_t recvPosted_ = 0;

  std::atomic<bool> failed_{false};
  std::atomic<bool> clean_{false};
  mutable std::mutex errorMutex_;
  Status error_;
};

}  // namespace loom::transport::verbs
