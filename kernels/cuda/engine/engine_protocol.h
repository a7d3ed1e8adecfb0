// The device engine's protocol, written once as LOOM_HOST_DEVICE templates
// over a Memory policy (memory_layer.h) and a Block policy (the threads of
// one CUDA block, or the host threads emulating one):
//   Block: tid(), nthreads(), sync() (all threads), syncOr(bool) (sync and OR).
//
// One step moves one FIFO slot (at most slotBytes) on each connection it
// uses (receive from prev and/or send to next):
//   1. thread 0 waits until the receive slot is filled (tail > recvStep) and
//      the send slot is free (head + slots > sendStep), checking the abort
//      flag and the timeout while it spins;
//   2. the block syncs (syncOr spreads a failed wait to every thread);
//   3. every thread moves its strided share of the data, fusing the
//      reduction into the copy: out = op(fifo_chunk, local_chunk);
//   4. the block syncs; thread 0 fences (release, system scope: it publishes
//      every thread's stores that the sync ordered before it) and
//      release-stores the send tail and the receive head.
//
// The LL protocol (LLChannel) moves one LL slot per step:
//   1. only when the send slot is reused: thread 0 waits until the receiver
//      freed it (llHead), and the block syncs;
//   2. every thread takes its strided share of the slot's lines: it polls
//      each receive line until the line's flag is this step's, reduces its
//      data with the local elements, stores the result to the user buffer
//      and/or as a send line (data and flag in one 8-byte store: no fence);
//   3. the block syncs (spreading a failed poll); thread 0 release-stores
//      the receive head.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/engine/engine_layout.h"
#include "kernels/cuda/engine/memory_layer.h"
#include "kernels/cuda/reduce_copy_core.h"

namespace loom::kernels::cuda::engine {

// The post step of a collective's final reduction (kAvg: divide by nranks).
template <class T>
LOOM_HOST_DEVICE inline PostStep<T> makePostStep(const EngineCall& call, int nranks) {
  ReduceCopyParams p{};
  p.post = call.redOp == RedOp::kAvg ? PostOp::kDivideByRanks : call.post;
  p.nranks = nranks;
  p.scalar = call.scalar;
  return PostStep<T>(p);
}

// dst0[i] (and dst1[i] when not null) = post(a[i] op b[i]) for i < count,
// b and post optional, this thread's share (strided over the block). 16-byte
// vectors when every pointer is 16-byte aligned, elements otherwise and for
// the tail. Stores go through Memory::storeData.
template <class T, RedOp kOp, class Memory, class Block>
LOOM_HOST_DEVICE LOOM_OUTLINE void moveElements(const Block& block, void* dst0, void* dst1, const void* a,
                                                const void* b, size_t count, const PostStep<T>* post) {
  const size_t tid = static_cast<size_t>(block.tid()), nthreads = static_cast<size_t>(block.nthreads());
  auto isAligned = [](const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % kVectorBytes == 0; };
  size_t vectors = 0;
  if (isAligned(dst0) && isAligned(dst1) && isAligned(a) && isAligned(b)) vectors = count / kLanes<T>;
  const unsigned char* pa = static_cast<const unsigned char*>(a);
  const unsigned char* pb = static_cast<const unsigned char*>(b);
  unsigned char* d0 = static_cast<unsigned char*>(dst0);
  unsigned char* d1 = static_cast<unsigned char*>(dst1);
  // kUnroll vectors per thread in flight: all loads are issued before any
  // is combined or stored, which hides memory latency.
  for (size_t first = tid; first < vectors; first += nthreads * kUnroll) {
    Pack x[kUnroll], y[kUnroll];
    size_t offset[kUnroll];
    bool live[kUnroll];
LOOM_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const size_t v = first + static_cast<size_t>(u) * nthreads;
      live[u] = v < vectors;
      offset[u] = v * kVectorBytes;
      if (live[u]) x[u] = loadPack(pa + offset[u]);
      if (live[u] && pb) y[u] = loadPack(pb + offset[u]);
    }
LOOM_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      if (!live[u]) continue;
      if (pb) x[u] = combinePacks<T, kOp>(x[u], y[u]);
      if (post) x[u] = applyPost<T>(*post, x[u]);
      Memory::storeData(d0 + offset[u], x[u]);
      if (d1) Memory::storeData(d1 + offset[u], x[u]);
    }
  }
  const typename OpFunctor<T, kOp>::type op{};
  for (size_t i = vectors * kLanes<T> + tid; i < count; i += nthreads) {
    T x;
    memcpy(&x, pa + i * sizeof(T), sizeof(T));
    if (pb) {
      T y;
      memcpy(&y, pb + i * sizeof(T), sizeof(T));
      x = op(x, y);
    }
    if (post) x = (*post)(x);
    Memory::storeData(d0 + i * sizeof(T), x);
    if (d1) Memory::storeData(d1 + i * sizeof(T), x);
  }
}

// Spins until *flag >= target; false (and `failure` set) on abort or timeout.
template <class Memory>
struct Waiter {
  const volatile uint32_t* abortFlag;
  uint64_t timeoutNs;
  EngineStatus failure = EngineStatus::kOk;

  LOOM_HOST_DEVICE bool waitAtLeast(const uint64_t* flag, uint64_t target) {
    return waitUntil([&] { return Memory::loadAcquire(flag) >= target; });
  }

  // Spins until ready() is true; false (and `failure` set) on abort or timeout.
  template <class Ready>
  LOOM_HOST_DEVICE bool waitUntil(Ready&& ready) {
    uint64_t start = 0;
    for (uint32_t i = 0;; ++i) {
      if (ready()) return true;
      if ((i & 63u) == 0) {  // the abort flag and the clock are slower to read than the flag
        if (Memory::loadAbort(abortFlag) != 0) {
          failure = EngineStatus::kAborted;
          return false;
        }
        if (timeoutNs != 0) {
          const uint64_t now = Memory::nowNs();
          if (i == 0) start = now;
          else if (now - start > timeoutNs) {
            failure = EngineStatus::kTimedOut;
            return false;
          }
        }
      }
      Memory::backoff(i);
    }
  }
};

// One block's connections for a call: at most one send and one receive
// connection, with this block's step counters (loaded at the start of the
// call, stored back by finish()).
template <class Memory, class Block>
class BlockChannel {
 public:
  LOOM_HOST_DEVICE BlockChannel(const EngineView& view, const EngineCall& call, const Block& block,
                                const EngineSendConnection* send, const EngineRecvConnection* recv)
      : block_(block), send_(send), recv_(recv), slots_(static_cast<uint64_t>(view.slots)),
        slotBytes_(view.slotBytes), waiter_{call.abortFlag, call.timeoutNs} {
    sendStep_ = send_ ? *send_->step : 0;
    recvStep_ = recv_ ? *recv_->step : 0;
  }

  // Elements of T one slot holds.
  LOOM_HOST_DEVICE size_t slotElems(size_t elemBytes) const { return slotBytes_ / elemBytes; }

  // One step; `work(in, out)` gets the receive slot (or null) and the send
  // slot (or null) and moves this thread's share. False when a wait failed
  // (status() says why, on thread 0).
  template <class Work>
  LOOM_HOST_DEVICE bool step(bool doRecv, bool doSend, Work&& work) {
    bool failed = false;
    if (block_.tid() == 0) {
      if (doRecv && Memory::kReceiverWaits) failed = !waiter_.waitAtLeast(recv_->tail, recvStep_ + 1);
      if (!failed && doSend && sendStep_ + 1 > slots_)
        failed = !waiter_.waitAtLeast(send_->head, sendStep_ + 1 - slots_);
    }
    if (block_.syncOr(failed)) {
      failed_ = true;
      return false;
    }
    const unsigned char* in = doRecv ? recv_->fifo + (recvStep_ % slots_) * slotBytes_ : nullptr;
    unsigned char* out = doSend ? send_->fifo + (sendStep_ % slots_) * slotBytes_ : nullptr;
    work(in, out);
    block_.sync();
    if (block_.tid() == 0) {
      if (Memory::kFenceBeforeFlag) Memory::fenceRelease();
      if (doSend) Memory::storeRelease(send_->tail, sendStep_ + 1);
      if (doRecv) Memory::storeRelease(recv_->head, recvStep_ + 1);
    }
    if (doSend) ++sendStep_;
    if (doRecv) ++recvStep_;
    return true;
  }

  // One step that moves `len` elements: out = post(received op local) (or
  // post(local) without a receive; op and post optional), stored to `dst`
  // when not null and to the send slot when sending.
  template <class T, RedOp kOp>
  LOOM_HOST_DEVICE bool transfer(bool doRecv, bool doSend, const unsigned char* local, unsigned char* dst,
                                 size_t len, const PostStep<T>* post) {
    return step(doRecv, doSend, [&](const unsigned char* in, unsigned char* out) {
      moveElements<T, kOp, Memory>(block_, dst ? dst : out, dst ? out : nullptr, doRecv ? in : local,
                                   doRecv ? local : nullptr, len, post);
    });
  }

  // Stores the step counters back for the next call (after a failure they
  // no longer match the peers': the engine must be reset).
  LOOM_HOST_DEVICE void finish() {
    // Every thread read the counters when the call started; a block that
    // made no step has not synced since.
    block_.sync();
    if (block_.tid() != 0 || failed_) return;
    if (send_) *send_->step = sendStep_;
    if (recv_) *recv_->step = recvStep_;
  }

  LOOM_HOST_DEVICE EngineStatus status() const {
    if (!failed_) return EngineStatus::kOk;
    // Threads other than 0 only know that the block failed.
    return waiter_.failure == EngineStatus::kOk ? EngineStatus::kAborted : waiter_.failure;
  }

 private:
  const Block& block_;
  const EngineSendConnection* send_;
  const EngineRecvConnection* recv_;
  uint64_t slots_;
  size_t slotBytes_;
  Waiter<Memory> waiter_;
  uint64_t sendStep_ = 0;
  uint64_t recvStep_ = 0;
  bool failed_ = false;
};

// The LL protocol's side of one block (see the top of this file), with the
// same interface as BlockChannel's transfer/finish/status.
template <class Memory, class Block>
class LLChannel {
 public:
  LOOM_HOST_DEVICE LLChannel(const EngineView& view, const EngineCall& call, const Block& block,
                             const EngineSendConnection* send, const EngineRecvConnection* recv)
      : block_(block), send_(send), recv_(recv), slots_(static_cast<uint64_t>(view.slots)),
        slotLines_(view.llSlotBytes / kLLLineBytes), abortFlag_(call.abortFlag), timeoutNs_(call.timeoutNs) {
    sendStep_ = send_ ? *send_->llStep : 0;
    recvStep_ = recv_ ? *recv_->llStep : 0;
  }

  // Elements of T one LL slot carries.
  LOOM_HOST_DEVICE size_t slotElems(size_t elemBytes) const { return slotLines_ * kLLLineDataBytes / elemBytes; }

  template <class T, RedOp kOp>
  LOOM_HOST_DEVICE LOOM_OUTLINE bool transfer(bool doRecv, bool doSend, const unsigned char* local,
                                              unsigned char* dst, size_t len, const PostStep<T>* post) {
    // Elements move in units of whole lines: 4 bytes (1, 2 or 4 elements) or
    // one 8-byte element over two lines.
    constexpr size_t kUnitBytes = sizeof(T) > kLLLineDataBytes ? sizeof(T) : kLLLineDataBytes;
    constexpr size_t kUnitLines = kUnitBytes / kLLLineDataBytes;
    constexpr size_t kUnitElems = kUnitBytes / sizeof(T);
    bool failed = false;
    if (doSend && sendStep_ + 1 > slots_) {
      if (block_.tid() == 0) {
        Waiter<Memory> waiter{abortFlag_, timeoutNs_};
        failed = !waiter.waitAtLeast(send_->llHead, sendStep_ + 1 - slots_);
        failure_ = waiter.failure;
      }
      if (blockFailed(failed)) return false;
    }
    const uint32_t recvFlag = static_cast<uint32_t>(recvStep_ + 1);
    const uint32_t sendFlag = static_cast<uint32_t>(sendStep_ + 1);
    const uint64_t* in = doRecv ? recv_->llLines + (recvStep_ % slots_) * slotLines_ : nullptr;
    uint64_t* out = doSend ? send_->llLines + (sendStep_ % slots_) * slotLines_ : nullptr;
    const size_t units = (len + kUnitElems - 1) / kUnitElems;
    const size_t tid = static_cast<size_t>(block_.tid()), nthreads = static_cast<size_t>(block_.nthreads());
    const typename OpFunctor<T, kOp>::type op{};
    Waiter<Memory> waiter{abortFlag_, timeoutNs_};
    for (size_t u = tid; u < units && !failed; u += nthreads) {
      const size_t first = u * kUnitElems;
      const size_t elems = len - first < kUnitElems ? len - first : kUnitElems;
      uint32_t words[kUnitLines] = {};
      T x[kUnitElems] = {};
      if (doRecv) {
        for (size_t l = 0; l < kUnitLines && !failed; ++l) {
          const uint64_t* line = in + u * kUnitLines + l;
          uint64_t value = Memory::loadLine(line);
          if (Memory::kReceiverWaits && static_cast<uint32_t>(value >> 32) != recvFlag) {
            failed = !waiter.waitUntil([&] {
              value = Memory::loadLine(line);
              return static_cast<uint32_t>(value >> 32) == recvFlag;
            });
          }
          words[l] = static_cast<uint32_t>(value);
        }
        if (failed) break;
        memcpy(x, words, sizeof(x));
      }
      for (size_t e = 0; e < elems; ++e) {
        if (doRecv) {
          if (local) {
            T y;
            memcpy(&y, local + (first + e) * sizeof(T), sizeof(T));
            x[e] = op(x[e], y);
          }
        } else {
          memcpy(&x[e], local + (first + e) * sizeof(T), sizeof(T));
        }
        if (post) x[e] = (*post)(x[e]);
        if (dst) Memory::storeData(dst + (first + e) * sizeof(T), x[e]);
      }
      if (doSend) {
        // Lanes past the data go out as zeros: every line gets a flag.
        for (size_t e = elems; e < kUnitElems; ++e) x[e] = T{};
        memcpy(words, x, sizeof(words));
        for (size_t l = 0; l < kUnitLines; ++l)
          Memory::storeLine(out + u * kUnitLines + l, (static_cast<uint64_t>(sendFlag) << 32) | words[l]);
      }
    }
    // Once per refresh period every slot is written whole (engine_layout.h).
    if (doSend && !failed && sendStep_ % kLLRefreshSteps < slots_)
      for (size_t line = units * kUnitLines + tid; line < slotLines_; line += nthreads)
        Memory::storeLine(out + line, static_cast<uint64_t>(sendFlag) << 32);
    if (failed) failure_ = waiter.failure;
    if (blockFailed(failed)) return false;
    if (doRecv && block_.tid() == 0) Memory::storeRelease(recv_->llHead, recvStep_ + 1);
    if (doSend) ++sendStep_;
    if (doRecv) ++recvStep_;
    return true;
  }

  LOOM_HOST_DEVICE void finish() {
    block_.sync();
    if (block_.tid() != 0 || failed_) return;
    if (send_) *send_->llStep = sendStep_;
    if (recv_) *recv_->llStep = recvStep_;
  }

  LOOM_HOST_DEVICE EngineStatus status() const { return failed_ ? failure_ : EngineStatus::kOk; }

 private:
  // Syncs the block; true when any thread's wait failed, and then every
  // thread learns why (any timeout reports kTimedOut, else kAborted): every
  // thread polls lines, so the failing one need not be thread 0.
  LOOM_HOST_DEVICE bool blockFailed(bool failed) {
    if (!block_.syncOr(failed)) return false;
    const bool timedOut = block_.syncOr(failure_ == EngineStatus::kTimedOut);
    failure_ = timedOut ? EngineStatus::kTimedOut : EngineStatus::kAborted;
    failed_ = true;
    return true;
  }

  const Block& block_;
  const EngineSendConnection* send_;
  const EngineRecvConnection* recv_;
  uint64_t slots_;
  size_t slotLines_;
  const volatile uint32_t* abortFlag_;
  uint64_t timeoutNs_;
  uint64_t sendStep_ = 0;
  uint64_t recvStep_ = 0;
  EngineStatus failure_ = EngineStatus::kOk;
  bool failed_ = false;
};

}  // namespace loom::kernels::cuda::engine
