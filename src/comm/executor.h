// The progress engine of one communicator: runs its operations in the order
// they were submitted, on a worker thread (asynchronous streams) or on the
// calling thread (blocking calls: no thread hand-off, so no futex wake-up on
// the latency path).
//
// Exactly one thread runs operations at a time (runMu_), so the transports and
// algorithms below never see concurrent calls on one communicator.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "common/completion.h"

namespace loom {

struct PendingOp {
  std::function<Status()> work;  // the whole operation, including waits on stream predecessors
  CompletionPtr completion;
};

class Executor {
 public:
  Executor();
  ~Executor();  // finishes queued operations, then joins the worker
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Queues `op`. With wakeWorker, the worker thread will run it; otherwise the
  // caller is expected to call runUntil(op.completion).
  void submit(PendingOp op, bool wakeWorker);
  // Runs queued operations on this thread until `target` has completed.
  void runUntil(const CompletionPtr& target);
  // This thread's turn to run an operation at once, if nothing is queued or
  // running (the common blocking call: no allocation, no queue): a lock that
  // owns runMu_ until the operation is done. One that owns nothing means the
  // caller must submit() instead, so the queue's order is kept.
  std::unique_lock<std::mutex> inlineTurn() {
    std::unique_lock<std::mutex> run(runMu_, std::try_to_lock);
    // With runMu_ held the queue can only grow, so a zero count read here
    // means nothing queued came before this call (as the locked check would).
    if (run.owns_lock() && queued_.load(std::memory_order_acquire) != 0) run.unlock();
    return run;
  }
  // Stops the worker after the queue is empty (idempotent).
  void shutdown();

 private:
  void workerLoop();
  // Pops and runs one operation; false if the queue was empty. Needs runMu_.
  bool runOne();

  std::mutex queueMu_;
  std::condition_variable queueCv_;
  std::deque<PendingOp> queue_;
  std::atomic<size_t> queued_{0};  // queue_.size(), changed under queueMu_, read without it by inlineTurn
  bool stopping_ = false;
  std::mutex runMu_;
  std::thread worker_;
};

}  // namespace loom
