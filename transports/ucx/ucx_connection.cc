#include "transports/ucx/ucx_connection.h"

#include <cstdlib>
#include <new>

#include "common/format.h"

namespace loom::transport::ucx {

void LinkState::fail(Status status, bool clean) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_.load(std::memory_order_relaxed)) return;
    error_ = std::move(status);
    clean_.store(clean, std::memory_order_release);
    failed_.store(true, std::memory_order_release);
  }
  sendSignal.notify();
  recvSignal.notify();
}

Status LinkState::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

SlotRing::SlotRing(size_t chunkBytes, int slots) : chunkBytes_(chunkBytes), slots_(static_cast<uint32_t>(slots)) {
  constexpr size_t kAlign = 4096;
  size_t total = (chunkBytes_ * slots_ + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, total == 0 ? kAlign : total);
  if (!p) throw std::bad_alloc();
  base_.reset(static_cast<std::byte*>(p));
}

void SlotRing::Free::operator()(std::byte* p) const { std::free(p); }

uint64_t CompletionTracker::complete(uint64_t chunk) {
  const size_t n = done_.size();
  done_[chunk % n] = 1;
  while (done_[next_ % n]) {
    done_[next_ % n] = 0;
    ++next_;
  }
  return next_;
}

UcxSendConnection::UcxSendConnection(size_t chunkBytes, int slots, LinkState* link, ProgressWaker* waker)
    : ring_(chunkBytes, slots), link_(link), waker_(waker), bytes_(static_cast<size_t>(slots), 0),
      sentTracker_(static_cast<uint32_t>(slots)) {}

Status UcxSendConnection::acquire(std::byte** slot, const WaitContext& wait) {
  if (!misuse_.isOk()) return misuse_;
  if (!hasRoom()) {
    auto ready = [&] {
      sentSeen_ = sent_.load(std::memory_order_acquire);
      return hasRoom() || link_->failed();
    };
    auto what = [&] {
      return strprintf("a free slot to send to rank %d (host %s) over ucx (%u chunks not yet delivered)",
                       link_->peerRank(), link_->peerHost().c_str(), ring_.slots());
    };
    LOOM_TRY(waitUntil(ready, &link_->sendSignal, wait, what));
    if (!hasRoom()) return link_->error();
  }
  if (link_->failed()) return link_->error();
  acquired_ = true;
  *slot = ring_.slot(headLocal_);
  return Status::ok();
}

bool UcxSendConnection::tryAcquire(std::byte** slot) {
  if (!misuse_.isOk() || link_->failed()) return false;
  if (!hasRoom()) {
    sentSeen_ = sent_.load(std::memory_order_acquire);
    if (!hasRoom()) return false;
  }
  acquired_ = true;
  *slot = ring_.slot(headLocal_);
  return true;
}

void UcxSendConnection::commit(size_t bytes) {
  if (!acquired_ || bytes > ring_.chunkBytes()) {
    if (misuse_.isOk())
      misuse_ = acquired_ ? makeError(Code::kInternalError,
                                      "ucx send to rank %d: commit of %zu bytes exceeds the chunk size %zu",
                                      link_->peerRank(), bytes, ring_.chunkBytes())
                          : makeError(Code::kInternalError, "ucx send to rank %d: commit without acquire",
                                      link_->peerRank());
    return;
  }
  acquired_ = false;
  bytes_[headLocal_ % ring_.slots()] = static_cast<uint32_t>(bytes);
  head_.store(++headLocal_, std::memory_order_seq_cst);  // seq_cst: pairs with the progress thread's sleep check
  waker_->wake();
}

void UcxSendConnection::markSent(uint64_t chunk) {
  const uint64_t before = sentTracker_.contiguous();
  const uint64_t now = sentTracker_.complete(chunk);
  if (now != before) {
    sent_.store(now, std::memory_order_release);
    link_->sendSignal.notify();
  }
}

UcxRecvConnection::UcxRecvConnection(size_t chunkBytes, int slots, LinkState* link, ProgressWaker* waker)
    : ring_(chunkBytes, slots), link_(link), waker_(waker), bytes_(static_cast<size_t>(slots), 0),
      arrivedTracker_(static_cast<uint32_t>(slots)) {}

Status UcxRecvConnection::acquire(const std::byte** data, size_t* bytes, const WaitContext& wait) {
  if (!misuse_.isOk()) return misuse_;
  if (arrivedSeen_ == tailLocal_) {
    auto ready = [&] {
      arrivedSeen_ = arrived_.load(std::memory_order_acquire);
      return arrivedSeen_ != tailLocal_ || link_->failed();
    };
    auto what = [&] {
      return strprintf("chunk from rank %d (host %s) to rank %d over ucx", link_->peerRank(),
                       link_->peerHost().c_str(), link_->selfRank());
    };
    LOOM_TRY(waitUntil(ready, &link_->recvSignal, wait, what));
    // Chunks that arrived before a failure are still delivered.
    if (arrivedSeen_ == tailLocal_) return link_->error();
  }
  acquired_ = true;
  *data = ring_.slot(tailLocal_);
  *bytes = bytes_[tailLocal_ % ring_.slots()];
  return Status::ok();
}

bool UcxRecvConnection::tryAcquire(const std::byte** data, size_t* bytes) {
  if (!misuse_.isOk()) return false;
  if (arrivedSeen_ == tailLocal_) {
    arrivedSeen_ = arrived_.load(std::memory_order_acquire);
    if (arrivedSeen_ == tailLocal_) return false;
  }
  acquired_ = true;
  *data = ring_.slot(tailLocal_);
  *bytes = bytes_[tailLocal_ % ring_.slots()];
  return true;
}

void UcxRecvConnection::release() {
  if (!acquired_) {
    if (misuse_.isOk())
      misuse_ = makeError(Code::kInternalError, "ucx receive from rank %d: release without acquire",
                          link_->peerRank());
    return;
  }
  acquired_ = false;
  tail_.store(++tailLocal_, std::memory_order_seq_cst);  // seq_cst: pairs with the progress thread's sleep check
  waker_->wake();
}

void UcxRecvConnection::markArrived(uint64_t chunk, uint32_t bytes) {
  bytes_[chunk % ring_.slots()] = bytes;
  const uint64_t before = arrivedTracker_.contiguous();
  const uint64_t now = arrivedTracker_.complete(chunk);
  if (now != before) {
    arrived_.store(now, std::memory_order_release);
    link_->recvSignal.notify();
  }
}

}  // namespace loom::transport::ucx
