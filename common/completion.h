// The completion state of one enqueued operation, shared by the stream it was
// enqueued on, the executor that runs it and any thread waiting for it.
#pragma once

#include <atomic>
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
