#include "transports/shm/shm_ll_connection.h"

#include <cstring>

#include "common/format.h"

namespace loom::transport::shm {
namespace {

// Lines live in plain shared memory (zero-filled at creation); every access
// is one lock-free 64-bit atomic, so lines are never torn.
static_assert(std::atomic_ref<uint64_t>::is_always_lock_free, "LL lines need lock-free 64-bit atomics");

inline uint64_t* slotLines(const LLFifoView& fifo, uint32_t slot) {
  return reinterpret_cast<uint64_t*>(fifo.slots + slot * fifo.slotStride);
}

inline void storeLine(uint64_t* line, uint64_t value) {
  // Relaxed: each line validates itself by its flag, so no other access needs ordering against it.
  std::atomic_ref<uint64_t>(*line).store(value, std::memory_order_relaxed);
}

inline uint64_t loadLine(uint64_t* line) {
  return std::atomic_ref<uint64_t>(*line).load(std::memory_order_relaxed);
}

// Words of staging for `chunkBytes` payload bytes (chunkBytes is a multiple of 4).
inline size_t stagingWords(uint64_t chunkBytes) { return static_cast<size_t>(chunkBytes / kLLPayloadPerLine); }

// The geometry rules the protocol relies on; a view that breaks them makes
// every acquire() fail with this status instead of corrupting data.
Status checkView(const LLFifoView& fifo, int peerRank) {
  LOOM_ENFORCE(fifo.slotCount >= 1 && fifo.chunkBytes % kLLPayloadPerLine == 0 && fifo.chunkBytes < (1ull << 32) &&
                   fifo.slotStride >= (1 + fifo.chunkBytes / kLLPayloadPerLine) * kLLLineBytes &&
                   fifo.slotStride % kLLLineBytes == 0 && fifo.flagPeriod > fifo.slotCount,
               Code::kInternalError,
               "shm (LL) connection with rank %d: bad FIFO geometry (%u slots of %llu bytes, stride %llu, "
               "flag period %u)",
               peerRank, fifo.slotCount, static_cast<unsigned long long>(fifo.chunkBytes),
               static_cast<unsigned long long>(fifo.slotStride), fifo.flagPeriod);
  return Status::ok();
}

}  // namespace

ShmLLSendConnection::ShmLLSendConnection(const LLFifoView& fifo, int selfRank, int peerRank)
    : fifo_(fifo), selfRank_(selfRank), peerRank_(peerRank), staging_(stagingWords(fifo.chunkBytes)) {
  misuse_ = checkView(fifo_, peerRank_);
  if (!misuse_.isOk()) return;  // every acquire() reports it; nothing else touches the FIFO
  // LL keeps no shared head: the sender starts where the receiver has
  // released up to (zero for a fresh segment), with nothing in flight.
  tailSeen_ = fifo_.control->tail.load(std::memory_order_acquire);
  head_ = tailSeen_;
  slotIndex_ = static_cast<uint32_t>(head_ % fifo_.slotCount);
  flag_ = llFlagFor(head_, fifo_.flagPeriod);
  // A new FIFO's lines are zeroed (flag 0, never valid): as good as a full write now.
  fullWriteSeq_.assign(fifo_.slotCount, head_);
}

Status ShmLLSendConnection::acquire(std::byte** slot, const WaitContext& wait) {
  if (!misuse_.isOk()) return misuse_;
  if (!hasRoom()) {
    LLFifoControl* control = fifo_.control;
    auto ready = [&] {
      // Pairs with the receiver's release store: its reads of the slot are done.
      tailSeen_ = control->tail.load(std::memory_order_acquire);
      return hasRoom();
    };
    auto what = [&] {
      return strprintf("a free slot to send to rank %d over shm (LL) (rank %d holds %u unreleased chunks from rank %d)",
                       peerRank_, peerRank_, fifo_.slotCount, selfRank_);
    };
    LOOM_TRY(waitUntil(ready, &control->released, wait, what));
  }
  acquired_ = true;
  *slot = reinterpret_cast<std::byte*>(staging_.data());
  return Status::ok();
}

bool ShmLLSendConnection::tryAcquire(std::byte** slot) {
  if (!misuse_.isOk()) return false;
  if (!hasRoom()) {
    tailSeen_ = fifo_.control->tail.load(std::memory_order_acquire);
    if (!hasRoom()) return false;
  }
  acquired_ = true;
  *slot = reinterpret_cast<std::byte*>(staging_.data());
  return true;
}

void ShmLLSendConnection::commit(size_t bytes) {
  if (!acquired_ || bytes > fifo_.chunkBytes) {
    if (misuse_.isOk())
      misuse_ = acquired_ ? makeError(Code::kInternalError,
                                      "shm (LL) send to rank %d: commit of %zu bytes exceeds the chunk size %llu",
                                      peerRank_, bytes, static_cast<unsigned long long>(fifo_.chunkBytes))
                          : makeError(Code::kInternalError, "shm (LL) send to rank %d: commit without acquire",
                                      peerRank_);
    return;
  }
  acquired_ = false;
  uint64_t* lines = slotLines(fifo_, slotIndex_);
  const uint32_t flag = flag_;
  // Header first: a polling receiver learns the size at once and unpacks
  // data lines while later ones are still being stored.
  storeLine(&lines[0], llLine(static_cast<uint32_t>(bytes), flag));
  const size_t whole = bytes / kLLPayloadPerLine;
  for (size_t i = 0; i < whole; ++i) storeLine(&lines[1 + i], llLine(staging_[i], flag));
  size_t written = whole;
  if (size_t rest = bytes % kLLPayloadPerLine) {
    // Zero-pad the last line so no stale staging bytes cross to the peer.
    uint32_t word = 0;
    std::memcpy(&word, &staging_[whole], rest);
    storeLine(&lines[1 + whole], llLine(word, flag));
    ++written;
  }
  // The slot is read next as chunk head_ + slotCount; its oldest line must be
  // younger than a flag period by then (see the header comment).
  uint64_t& fullWrite = fullWriteSeq_[slotIndex_];
  if (head_ + fifo_.slotCount - fullWrite >= fifo_.flagPeriod) {
    const size_t capacity = stagingWords(fifo_.chunkBytes);
    for (size_t i = written; i < capacity; ++i) storeLine(&lines[1 + i], llLine(0, flag));
    fullWrite = head_;
  }
  fifo_.control->committed.notify();
  ++head_;
  flag_ = llNextFlag(flag_, fifo_.flagPeriod);
  if (++slotIndex_ == fifo_.slotCount) slotIndex_ = 0;
}

ShmLLRecvConnection::ShmLLRecvConnection(const LLFifoView& fifo, int selfRank, int peerRank)
    : fifo_(fifo), selfRank_(selfRank), peerRank_(peerRank), staging_(stagingWords(fifo.chunkBytes)) {
  misuse_ = checkView(fifo_, peerRank_);
  if (!misuse_.isOk()) return;  // every acquire() reports it; nothing else touches the FIFO
  tail_ = fifo_.control->tail.load(std::memory_order_relaxed);
  slotIndex_ = static_cast<uint32_t>(tail_ % fifo_.slotCount);
  flag_ = llFlagFor(tail_, fifo_.flagPeriod);
}

ShmLLRecvConnection::Progress ShmLLRecvConnection::poll() {
  uint64_t* lines = slotLines(fifo_, slotIndex_);
  if (!headerSeen_) {
    uint64_t header = loadLine(&lines[0]);
    if (llLineFlag(header) != flag_) return Progress::kIncomplete;
    uint64_t n = llLinePayload(header);
    // The count comes from another process: never unpack past the slot.
    if (n > fifo_.chunkBytes) {
      badBytes_ = n;
      return Progress::kMalformed;
    }
    headerSeen_ = true;
    bytes_ = n;
    linesNeeded_ = llDataLines(n);
  }
  const uint32_t flag = flag_;
  uint64_t done = linesDone_;
  while (done < linesNeeded_) {
    uint64_t line = loadLine(&lines[1 + done]);
    if (llLineFlag(line) != flag) break;
    staging_[done] = llLinePayload(line);
    ++done;
  }
  linesDone_ = done;
  return done == linesNeeded_ ? Progress::kComplete : Progress::kIncomplete;
}

std::string ShmLLRecvConnection::describeProgress() const {
  if (!headerSeen_) return "its header line has not arrived";
  return strprintf("%llu of its %llu data lines have arrived", static_cast<unsigned long long>(linesDone_),
                   static_cast<unsigned long long>(linesNeeded_));
}

Status ShmLLRecvConnection::acquire(const std::byte** data, size_t* bytes, const WaitContext& wait) {
  if (!misuse_.isOk()) return misuse_;
  Progress progress = acquired_ ? Progress::kComplete : poll();
  if (progress == Progress::kIncomplete) {
    auto ready = [&] {
      progress = poll();
      return progress != Progress::kIncomplete;
    };
    auto what = [&] {
      return strprintf("chunk %llu from rank %d to rank %d over shm (LL) (%s)",
                       static_cast<unsigned long long>(tail_), peerRank_, selfRank_, describeProgress().c_str());
    };
    LOOM_TRY(waitUntil(ready, &fifo_.control->committed, wait, what));
  }
  if (progress == Progress::kMalformed)
    return makeError(Code::kInternalError,
                     "shm (LL) chunk from rank %d to rank %d claims %llu bytes, more than the %llu-byte slot "
                     "(corrupted segment?)",
                     peerRank_, selfRank_, static_cast<unsigned long long>(badBytes_),
                     static_cast<unsigned long long>(fifo_.chunkBytes));
  acquired_ = true;
  *data = reinterpret_cast<const std::byte*>(staging_.data());
  *bytes = static_cast<size_t>(bytes_);
  return Status::ok();
}

bool ShmLLRecvConnection::tryAcquire(const std::byte** data, size_t* bytes) {
  if (!misuse_.isOk()) return false;
  // A malformed chunk is left for acquire() to report.
  if (!acquired_ && poll() != Progress::kComplete) return false;
  acquired_ = true;
  *data = reinterpret_cast<const std::byte*>(staging_.data());
  *bytes = static_cast<size_t>(bytes_);
  return true;
}

void ShmLLRecvConnection::release() {
  if (!acquired_) {
    if (misuse_.isOk())
      misuse_ = makeError(Code::kInternalError, "shm (LL) receive from rank %d: release without acquire", peerRank_);
    return;
  }
  acquired_ = false;
  headerSeen_ = false;
  bytes_ = linesNeeded_ = linesDone_ = 0;
  LLFifoControl* control = fifo_.control;
  // Release: our loads of the slot's lines complete before the sender may overwrite them.
  control->tail.store(++tail_, std::memory_order_release);
  control->released.notify();
  flag_ = llNextFlag(flag_, fifo_.flagPeriod);
  if (++slotIndex_ == fifo_.slotCount) slotIndex_ = 0;
}

}  // namespace loom::transport::shm
