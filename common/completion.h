// The completion state of one enqueued operation, shared by the stream it was
// enqueued on, the executor that runs it and any thread waiting for it.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>

#include "common/status.h"
#include "common/wait.h"

namespace loom {

class Completion {
 public:
  bool done() const { return done_.load(std::memory_order_acquire); }

  // Records the outcome and wakes waiters. Called exactly once.
  void complete(Status status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      status_ = std::move(status);
    }
    done_.store(true, std::memory_order_release);
    signal_.notify();
  }

  // Valid once done().
  Status status() const {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

  // Blocks until done (spin, yield, then futex sleep) or until `wait` expires.
  Status wait(const WaitContext& wait, const char* what) {
    LOOM_TRY(waitUntil([this] { return done(); }, &signal_, wait, [what] { return std::string(what); }));
    return status();
  }

 private:
  std::atomic<bool> done_{false};
  mutable std::mutex mu_;
  Status status_;
  WaitSignal signal_;
};

using CompletionPtr = std::shared_ptr<Completion>;

}  // namespace loom
