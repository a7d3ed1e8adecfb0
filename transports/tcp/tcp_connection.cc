#include "transports/tcp/tcp_connection.h"

#include <chrono>
#include <cstdlib>
#include <new>

#include "common/format.h"

namespace loom::transport::tcp {

int64_t steadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

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
  void* p = std::aligned_alloc(kAlign, total);
  if (!p) throw std::bad_alloc();
  base_.reset(static_cast<std::byte*>(p));
}

void SlotRing::Free::operator()(std::byte* p) const { std::free(p); }

TcpSendConnection::TcpSendConnection(size_t chunkBytes, int slots, LinkState* link, ProgressWaker* waker)
    : ring_(chunkBytes, slots), link_(link), waker_(waker), bytes_(static_cast<size_t>(slots), 0),
      sentFlags_(static_cast<size_t>(slots), 0) {}

Status TcpSendConnection::acquire(std::byte** slot, const WaitContext& wait) {
  if (!misuse_.isOk()) return misuse_;
  if (!hasRoom()) {
    auto ready = [&] {
      sentSeen_ = sent_.load(std::memory_order_acquire);
      return hasRoom() || link_->failed();
    };
    auto what = [&] {
      return strprintf("a free slot to send to rank %d (host %s) over tcp (%u chunks not yet written to its sockets)",
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

bool TcpSendConnection::tryAcquire(std::byte** slot) {
  if (!misuse_.isOk() || link_->failed()) return false;
  if (!hasRoom()) {
    sentSeen_ = sent_.load(std::memory_order_acquire);
    if (!hasRoom()) return false;
  }
  acquired_ = true;
  *slot = ring_.slot(headLocal_);
  return true;
}

void TcpSendConnection::commit(size_t bytes) {
  if (!acquired_ || bytes > ring_.chunkBytes()) {
    if (misuse_.isOk())
      misuse_ = acquired_ ? makeError(Code::kInternalError,
                                      "tcp send to rank %d: commit of %zu bytes exceeds the chunk size %zu",
                                      link_->peerRank(), bytes, ring_.chunkBytes())
                          : makeError(Code::kInternalError, "tcp send to rank %d: commit without acquire",
                                      link_->peerRank());
    return;
  }
  acquired_ = false;
  bytes_[headLocal_ % ring_.slots()] = static_cast<uint32_t>(bytes);
  if (holdNanos_) readyAt_[headLocal_ % ring_.slots()] = steadyNanos() + holdNanos_;
  head_.store(++headLocal_, std::memory_order_release);
  waker_->wake();
}

void TcpSendConnection::holdChunksFor(int64_t nanos) {
  holdNanos_ = nanos > 0 ? nanos : 0;
  readyAt_.assign(ring_.slots(), 0);
}

void TcpSendConnection::markSent(uint64_t chunk) {
  sentFlags_[chunk % ring_.slots()] = 1;
  bool moved = false;
  while (sentLocal_ < head_.load(std::memory_order_acquire) && sentFlags_[sentLocal_ % ring_.slots()]) {
    sentFlags_[sentLocal_ % ring_.slots()] = 0;
    ++sentLocal_;
    moved = true;
  }
  if (moved) {
    sent_.store(sentLocal_, std::memory_order_release);
    link_->sendSignal.notify();
  }
}

TcpRecvConnection::TcpRecvConnection(size_t chunkBytes, int slots, LinkState* link, ProgressWaker* waker)
    : ring_(chunkBytes, slots), link_(link), waker_(waker), bytes_(static_cast<size_t>(slots), 0),
      arrivedFlags_(static_cast<size_t>(slots), 0) {}

Status TcpRecvConnection::acquire(const std::byte** data, size_t* bytes, const WaitContext& wait) {
  if (!misuse_.isOk()) return misuse_;
  if (arrivedSeen_ == tailLocal_) {
    auto ready = [&] {
      arrivedSeen_ = arrived_.load(std::memory_order_acquire);
      return arrivedSeen_ != tailLocal_ || link_->failed();
    };
    auto what = [&] {
      return strprintf("chunk from rank %d (host %s) to rank %d over tcp", link_->peerRank(),
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

bool TcpRecvConnection::tryAcquire(const std::byte** data, size_t* bytes) {
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

void TcpRecvConnection::release() {
  if (!acquired_) {
    if (misuse_.isOk())
      misuse_ = makeError(Code::kInternalError, "tcp receive from rank %d: release without acquire",
                          link_->peerRank());
    return;
  }
  acquired_ = false;
  tail_.store(++tailLocal_, std::memory_order_release);
  waker_->wake();
}

void TcpRecvConnection::markArrived(uint64_t chunk, uint32_t bytes) {
  bytes_[chunk % ring_.slots()] = bytes;
  arrivedFlags_[chunk % ring_.slots()] = 1;
  bool moved = false;
  while (arrivedFlags_[arrivedLocal_ % ring_.slots()]) {
    arrivedFlags_[arrivedLocal_ % ring_.slots()] = 0;
    ++arrivedLocal_;
    moved = true;
  }
  if (moved) {
    arrived_.store(arrivedLocal_, std::memory_order_release);
    link_->recvSignal.notify();
  }
}

}  // namespace loom::transport::tcp
