// Blocking waits that are polite on an oversubscribed machine.
//
// Loom runs 4-8 ranks on 2 cores, so a wait spins only briefly (a cache-line
// hand-off between cores is ~50 ns), then yields the core (a hand-off between
// processes sharing one core through sched_yield is ~1.5 us), and finally
// sleeps on a futex (~30 us to wake). Every wait has a deadline and observes
// an abort flag, so nothing blocks forever.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "common/asymmetric_fence.h"
#include "common/status.h"

namespace loom {

using Clock = std::chrono::steady_clock;

struct Deadline {
  Clock::time_point at = Clock::time_point::max();

  static Deadline after(double seconds);
  // The same from a coarse clock reading the caller already took
  // (coarseMonotonicNanos()); it takes the precise clock below a second.
  static Deadline afterCoarse(int64_t coarseNowNanos, double seconds);
  static Deadline never() { return {}; }
  bool expired() const { return Clock::now() >= at; }
  // Milliseconds left, clamped to [0, cap].
  int remainingMillis(int cap) const;
};

// A full memory barrier (store-load ordering). On x86-64 a locked add to the
// stack orders ordinary memory like mfence at about half the cost. It does
// not order non-temporal stores: Loom's (kernels/stream_copy.h) end with
// their own sfence. ThreadSanitizer sees only the standard fence.
inline void fullFence() {
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
  asm volatile("lock; addl $0, -8(%%rsp)" ::: "memory", "cc");
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// A word pair that lets a waiter sleep until a writer signals. It may live in
// shared memory: the futex calls are process-shared (not FUTEX_PRIVATE).
struct WaitSignal {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> sleepers{0};

  // Called by the writer after publishing what the waiter waits for.
  // Dekker with waitUntil(): the writer publishes, fences, reads sleepers;
  // a waiter adds itself to sleepers, fences, re-checks before sleeping. So
  // either the waiter sees the data or the writer sees the sleeper, bumps
  // seq (the futex word the sleeper compares) and wakes it. With nobody
  // asleep (the common case: waiters spin first) the writer touches no
  // shared word: no read-modify-write bouncing a cache line per chunk. In a
  // registered process the sleeper's barrier stands in for the writer's
  // fence (common/asymmetric_fence.h).
  void notify() {
    if (asymmetric_fence::writersSkipFence())
      std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler keeps the order
    else
      fullFence();
    if (sleepers.load(std::memory_order_relaxed) != 0) {
      seq.fetch_add(1, std::memory_order_seq_cst);
      wakeAll();
    }
  }
  void wakeAll();
  // Sleeps while seq == expected, at most timeoutMillis.
  void sleep(uint32_t expected, int timeoutMillis);
  // The same, at most timeoutMicros (the kernel's timer slack may add to it).
  void sleepMicros(uint32_t expected, long timeoutMicros);
};

// The liveness of the other ranks of a communicator (transports/shm/
// peer_monitor.h). A wait that has begun to sleep asks check() every round,
// so a dead peer fails it well before the deadline; a wait that times out
// asks describeStalls() which peers made no progress.
class PeerHealth {
 public:
  // Not ok once a peer process died or another rank found one dead. Cheap:
  // one shared-memory load, plus a few syscalls at most every few ms.
  virtual Status check() = 0;
  // "; rank 2 (host h, pid p) made no progress for 2.0 s (process stopped)", or "".
  virtual std::string describeStalls() = 0;

 protected:
  ~PeerHealth() = default;
};

// What every blocking wait observes besides its own condition.
struct WaitContext {
  Deadline deadline;
  const std::atomic<bool>* abort = nullptr;  // set by loomCommAbort / a failed peer
  PeerHealth* health = nullptr;              // null: no peer-death detection
  int spinMicros = 5;     // busy polling first (a cache-line hand-off is ~50 ns)
  int yieldMicros = 200;  // then sched_yield, then futex sleep
  // Bumped (if set) by every wait that outlasts its first polls, so a caller
  // can tell that none of its waits took more than a hand-off. Only the
  // thread running the operation touches it.
  uint32_t* slowWaits = nullptr;

  bool aborted() const { return abort && abort->load(std::memory_order_relaxed); }
};

// A failure that a peer reports without its cause (a peer that failed a
// phase, a copy from a peer's memory that found no process) is most often a
// peer's death, which the health monitor sees at its next poll, a few ms
// later; its message names the dead rank. Asks wait.health until it reports
// a failure, for at most `seconds` (and never past wait.deadline). Ok when no
// peer failed then, or when there is no monitor; a failure says what the
// caller was waiting for (`what`), as waitUntil's do. For error paths only.
// The default: a few of the monitor's polls.
inline constexpr double kPeerFailureNoticeSeconds = 0.05;
Status peerFailureWithin(const WaitContext& wait, const std::string& what,
                         double seconds = kPeerFailureNoticeSeconds);

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

void yieldCore();

// Waits until ready() is true. `signal` (may be null: then the last phase
// polls every millisecond) is notified by whoever makes ready() true.
// On expiry returns kTimeout, on abort kRemoteError, with `what()` (a callable
// returning std::string) describing what was being waited for.
template <class Ready, class What>
Status waitUntil(Ready&& ready, WaitSignal* signal, const WaitContext& ctx, What&& what) {
  if (ready()) return Status::ok();
  // A few polls before the first clock read: a peer on another core usually
  // answers within them, and the read costs as much as the whole hand-off.
  if (ctx.spinMicros > 0) {
    for (int i = 0; i < 16; ++i) {
      cpuRelax();
      if (ready()) return Status::ok();
    }
  }
  // Phases are bounded in time, not iterations: a `pause` costs 10 to 140
  // cycles depending on the CPU, and an unbounded spin on an oversubscribed
  // core only delays the peer we are waiting for.
  if (ctx.slowWaits) ++*ctx.slowWaits;
  const Clock::time_point start = Clock::now();
  const auto spinEnd = start + std::chrono::microseconds(ctx.spinMicros);
  while (Clock::now() < spinEnd) {
    for (int i = 0; i < 16; ++i) {
      if (ready()) return Status::ok();
      cpuRelax();
    }
  }
  const auto yieldEnd = start + std::chrono::microseconds(ctx.spinMicros + ctx.yieldMicros);
  for (int i = 0; Clock::now() < yieldEnd; ++i) {
    if (ready()) return Status::ok();
    if ((i & 15) == 15 && ctx.aborted()) break;
    yieldCore();
  }
  for (;;) {
    uint32_t seen = signal ? signal->seq.load(std::memory_order_seq_cst) : 0;
    if (ready()) return Status::ok();
    if (ctx.aborted()) return {Code::kRemoteError, "aborted while waiting for " + what()};
    if (ctx.health) {
      Status peers = ctx.health->check();
      if (!peers.isOk()) return {peers.code(), peers.message() + " (noticed while waiting for " + what() + ")"};
    }
    if (ctx.deadline.expired())
      return {Code::kTimeout, "timed out (LOOM_TIMEOUT) waiting for " + what() +
                                  (ctx.health ? ctx.health->describeStalls() : std::string())};
    int ms = ctx.deadline.remainingMillis(signal ? 20 : 1);
    if (signal) {
      signal->sleepers.fetch_add(1, std::memory_order_seq_cst);
      // Pairs with notify()'s fence, or stands in for it. Without it a
      // wake-up may be missed: sleep in 1 ms slices then.
      const bool paired = asymmetric_fence::sleeperBarrier();
      if (!ready()) signal->sleep(seen, paired && ms > 1 ? ms : 1);
      signal->sleepers.fetch_sub(1, std::memory_order_seq_cst);
    } else {
      WaitSignal local;
      local.sleep(0, 1);
    }
  }
}

}  // namespace loom
