#include "transports/shm/shm_connection.h"

#include "common/format.h"

namespace loom::transport::shm {

namespace {

ChunkRing ringOf(const FifoView& fifo) {
  return ChunkRing{.ringBytes = fifo.slotCount * fifo.slotStride,
                   .chunkBytes = fifo.chunkBytes,
                   .align = fifo.chunkBytes >= kPageBytes ? kPageBytes : kCacheLineBytes};
}

// Chunks are placed from the sizes of every chunk before them (chunk_ring.h),
// so both ends must start on a FIFO nothing has gone through yet.
Status requireFresh(const FifoControl& control, const char* side, int selfRank, int peerRank) {
  const uint64_t head = control.head.load(std::memory_order_acquire);
  const uint64_t tail = control.tail.load(std::memory_order_acquire);
  if (head == 0 && tail == 0) return Status::ok();
  return makeError(Code::kInternalError,
                   "shm %s between ranks %d and %d: the FIFO was already used (head %llu, tail %llu) when this end "
                   "attached",
                   side, selfRank, peerRank, static_cast<unsigned long long>(head),
                   static_cast<unsigned long long>(tail));
}

}  // namespace

ShmSendConnection::ShmSendConnection(const FifoView& fifo, int selfRank, int peerRank)
    : fifo_(fifo), ring_(ringOf(fifo)), selfRank_(selfRank), peerRank_(peerRank), starts_(fifo.slotCount, 0) {
  misuse_ = requireFresh(*fifo_.control, "send", selfRank, peerRank);
}

std::byte* ShmSendConnection::next() {
  acquired_ = true;
  at_ = ring_.placeAfter(end_);
  return fifo_.slots + at_;
}

Status ShmSendConnection::acquire(std::byte** slot, const WaitContext& wait) {
  if (!misuse_.isOk()) return misuse_;
  if (!hasRoom()) {
    FifoControl* control = fifo_.control;
    auto ready = [&] {
      // Pairs with the receiver's release store: its reads of the slot are done.
      tailSeen_ = control->tail.load(std::memory_order_acquire);
      return hasRoom();
    };
    auto what = [&] {
      return strprintf("room to send to rank %d over shm (rank %d holds %llu unreleased chunks from rank %d)",
                       peerRank_, peerRank_, static_cast<unsigned long long>(head_ - tailSeen_), selfRank_);
    };
    LOOM_TRY(waitUntil(ready, &control->released, wait, what));
  }
  *slot = next();
  return Status::ok();
}

bool ShmSendConnection::tryAcquire(std::byte** slot) {
  if (!misuse_.isOk()) return false;
  if (!hasRoom()) {
    tailSeen_ = fifo_.control->tail.load(std::memory_order_acquire);
    if (!hasRoom()) return false;
  }
  *slot = next();
  return true;
}

void ShmSendConnection::commit(size_t bytes) {
  if (!acquired_ || bytes > fifo_.chunkBytes) {
    if (misuse_.isOk())
      misuse_ = acquired_ ? makeError(Code::kInternalError,
                                      "shm send to rank %d: commit of %zu bytes exceeds the chunk size %llu",
                                      peerRank_, bytes, static_cast<unsigned long long>(fifo_.chunkBytes))
                          : makeError(Code::kInternalError, "shm send to rank %d: commit without acquire",
                                      peerRank_);
    return;
  }
  acquired_ = false;
  FifoControl* control = fifo_.control;
  control->bytes[slotIndex_] = bytes;
  starts_[slotIndex_] = at_;
  end_ = ring_.endOf(at_, bytes);
  // Release: the chunk's payload and byte count are visible before the new head.
  control->head.store(++head_, std::memory_order_release);
  control->committed.notify();
  if (++slotIndex_ == fifo_.slotCount) slotIndex_ = 0;
}

ShmRecvConnection::ShmRecvConnection(const FifoView& fifo, int selfRank, int peerRank)
    : fifo_(fifo), ring_(ringOf(fifo)), selfRank_(selfRank), peerRank_(peerRank) {
  misuse_ = requireFresh(*fifo_.control, "receive", selfRank, peerRank);
}

Status ShmRecvConnection::acquire(const std::byte** data, size_t* bytes, const WaitContext& wait) {
  if (!misuse_.isOk()) return misuse_;
  if (headSeen_ == tail_) {
    FifoControl* control = fifo_.control;
    auto ready = [&] {
      // Pairs with the sender's release store: payload and byte count are visible.
      headSeen_ = control->head.load(std::memory_order_acquire);
      return headSeen_ != tail_;
    };
    auto what = [&] { return strprintf("chunk from rank %d to rank %d over shm", peerRank_, selfRank_); };
    LOOM_TRY(waitUntil(ready, &control->committed, wait, what));
  }
  uint64_t n = fifo_.control->bytes[slotIndex_];
  // The count comes from another process: never hand out a range past the slot.
  if (n > fifo_.chunkBytes)
    return makeError(Code::kInternalError,
                     "shm chunk from rank %d to rank %d claims %llu bytes, more than the %llu-byte slot "
                     "(corrupted segment?)",
                     peerRank_, selfRank_, static_cast<unsigned long long>(n),
                     static_cast<unsigned long long>(fifo_.chunkBytes));
  acquired_ = true;
  acquiredBytes_ = n;
  *data = fifo_.slots + ring_.placeAfter(end_);
  *bytes = static_cast<size_t>(n);
  return Status::ok();
}

bool ShmRecvConnection::tryAcquire(const std::byte** data, size_t* bytes) {
  if (!misuse_.isOk()) return false;
  if (headSeen_ == tail_) {
    headSeen_ = fifo_.control->head.load(std::memory_order_acquire);
    if (headSeen_ == tail_) return false;
  }
  // A malformed byte count is left for acquire() to report.
  const uint64_t n = fifo_.control->bytes[slotIndex_];
  if (n > fifo_.chunkBytes) return false;
  acquired_ = true;
  acquiredBytes_ = n;
  *data = fifo_.slots + ring_.placeAfter(end_);
  *bytes = static_cast<size_t>(n);
  return true;
}

void ShmRecvConnection::release() {
  if (!acquired_) {
    if (misuse_.isOk())
      misuse_ = makeError(Code::kInternalError, "shm receive from rank %d: release without acquire", peerRank_);
    return;
  }
  acquired_ = false;
  FifoControl* control = fifo_.control;
  // Release: our reads of the slot complete before the sender may overwrite it.
  control->tail.store(++tail_, std::memory_order_release);
  control->released.notify();
  end_ = ring_.endOf(ring_.placeAfter(end_), acquiredBytes_);
  if (++slotIndex_ == fifo_.slotCount) slotIndex_ = 0;
}

Status UnconnectedSend::acquire(std::byte** slot, const WaitContext&) {
  *slot = nullptr;
  return {Code::kInvalidUsage, message_};
}

Status UnconnectedRecv::acquire(const std::byte** data, size_t* bytes, const WaitContext&) {
  *data = nullptr;
  *bytes = 0;
  return {Code::kInvalidUsage, message_};
}

}  // namespace loom::transport::shm
