// The host side of a stream gate (kernels/cuda/stream_gate_core.h): the
// sequence numbers of the operations ordered on one CUDA stream, released in
// stream order as the operations complete.
//
// Why a gate: the CUDA stream must not run work enqueued after a Loom
// operation until the operation (run by Loom's executor thread) is done.
//  - A host function (cudaLaunchHostFunc) that waits for the operation
//    blocks the CUDA runtime's one callback thread, which every stream of the
//    process shares: with ranks as threads, a peer's host function (that the
//    peer's next operation waits for) queues behind ours, and the ranks
//    deadlock. No host function of Loom may block.
//  - Stream memory operations (cuStreamWaitValue64 on a mapped flag) need
//    CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS and the driver API; where
//    measured (an H100, driver 580) the attribute read 0 and the wait hung.
//  - So the wait runs on the GPU, as a 1-thread kernel on the user's stream
//    that polls a word in mapped pinned memory with __nanosleep backoff
//    (NCCL's kernels wait on host-written flags the same way). It holds one
//    thread slot of one SM while it waits, nothing on the host. It needs no
//    peer's kernel resident beside it (it waits for a host write only), so
//    processes that share a GPU without MPS merely time-slice.
//
// Lifetime: an operation reserves its sequence number before it is queued
// (it may complete before the gate kernel is even launched), and its ticket
// releases it when the operation completes, whatever its status: a failed
// operation releases the stream too, and its error surfaces through
// loomCommGetAsyncError / loomStreamSynchronize, as with NCCL. Releases are
// in stream order (an aborted communicator may fail an operation before its
// predecessor finished): `released` only moves to s once 1..s are all done.
// Tearing a gate down (stream destroy) aborts it, which ends every wait.
//
// What the gate asks of the rest of Loom: an operation never synchronizes the
// whole device (cudaFree, cudaFreeHost, cudaDeviceSynchronize, ...) while it
// runs, since a peer's gate on the same device may wait for an operation that
// needs this one (runtime.h's frees run on a thread of their own for that).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>

#include "kernels/cuda/stream_gate_core.h"

namespace loom::cuda {

using kernels::cuda::StreamGateWords;

class StreamGate {
 public:
  // `words`: zeroed gate words that stay readable by every kernel that may
  // still wait on them (never freed while a kernel may read them); `owner`,
  // if any, is kept until the gate is gone.
  explicit StreamGate(StreamGateWords* words, std::shared_ptr<void> owner = nullptr)
      : words_(words), owner_(std::move(owner)) {}
  ~StreamGate() { abort(); }
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;

  // The next sequence number (1, 2, ...).
  uint64_t reserve();
  // Marks `sequence` done; publishes the longest done prefix.
  void release(uint64_t sequence);
  // Ends every wait on the gate, now and later.
  void abort() { kernels::cuda::gateAbort(words_); }

  const StreamGateWords* words() const { return words_; }
  uint64_t released() const { return kernels::cuda::gateLoadAcquire(&words_->released); }

 private:
  StreamGateWords* words_;
  std::shared_ptr<void> owner_;
  std::mutex mu_;
  uint64_t reserved_ = 0;
  uint64_t releasedPrefix_ = 0;
  std::set<uint64_t> doneAhead_;  // done, but a predecessor is not (rare)
};

// One operation's place on a gate: released exactly once, by release() or
// by the destructor (an operation dropped without running still frees the
// stream). Movable; an empty ticket does nothing.
class StreamOrderTicket {
 public:
  StreamOrderTicket() = default;
  StreamOrderTicket(std::shared_ptr<StreamGate> gate, uint64_t sequence)
      : gate_(std::move(gate)), sequence_(sequence) {}
  StreamOrderTicket(StreamOrderTicket&& other) noexcept { *this = std::move(other); }
  StreamOrderTicket& operator=(StreamOrderTicket&& other) noexcept {
    if (this != &other) {
      release();
      gate_ = std::move(other.gate_);
      sequence_ = other.sequence_;
      other.gate_.reset();
    }
    return *this;
  }
  ~StreamOrderTicket() { release(); }

  void release() {
    if (gate_) gate_->release(sequence_);
    gate_.reset();
  }
  uint64_t sequence() const { return sequence_; }

 private:
  std::shared_ptr<StreamGate> gate_;
  uint64_t sequence_ = 0;
};

}  // namespace loom::cuda
