// The completion state of one enqueued operation, shared by the stream it was
// enqueued on, the executor that runs it and any thread waiting for it.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "common/status.h"
#include "common/wait.h"

namespace loom {

class Completion {
 public:
  bool done() const { return done_.load(std::memory_order_acquire); }

  // Records the outcome and wakes waiters. Called exactly once.
  void complete(Status status) {
    // Written once, before done_ is published with release: a reader that saw
    // done() (acquire) reads it without a lock, and nothing writes it again.
    status_ = std::move(status);
    done_.store(true, std::memory_order_release);
    signal_.notify();
  }

  // Valid once done() returned true on the calling thread.
  const Status& status() const { return status_; }
  bool ok() const { return status_.isOk(); }

  // Sleeps until done, at most about `micros` (no spinning: the core goes to
  // whoever finishes the operation). True when done.
  bool sleepUntilDone(long micros) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
    while (!done()) {
      const long left =
          std::chrono::duration_cast<std::chrono::microseconds>(until - std::chrono::steady_clock::now()).count();
      if (left <= 0) return false;
      const uint32_t seen = signal_.seq.load(std::memory_order_seq_cst);
      signal_.sleepers.fetch_add(1, std::memory_order_seq_cst);
      // As in waitUntil: without the paired barrier a wake-up may be missed,
      // so the sleep goes in 1 ms slices then.
      const bool paired = asymmetric_fence::sleeperBarrier();
      if (!done()) signal_.sleepMicros(seen, paired ? left : std::min(left, 1000L));
      signal_.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    }
    return true;
  }

  // Blocks until done (spin, yield, then futex sleep) or until `wait` expires.
  Status wait(const WaitContext& wait, const char* what) {
    LOOM_TRY(waitUntil([this] { return done(); }, &signal_, wait, [what] { return std::string(what); }));
    return status();
  }

 private:
  std::atomic<bool> done_{false};
  Status status_;
  WaitSignal signal_;
};

using CompletionPtr = std::shared_ptr<Completion>;

}  // namespace loom
