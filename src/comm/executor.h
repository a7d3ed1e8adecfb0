// The progress engine of one communicator: runs its operations in the order
// they were submitted, on a worker thread (asynchronous streams) or on the
// calling thread (blocking calls, and small stream calls whose peers are
// already in them: OpRunner::runInline; no thread hand-off, so no futex
// wake-up on the latency path). Between batches the worker polls a moment
// before it sleeps, so operations queued back to back wake nobody.
//
// Exactly one thread runs operations at a time (runMu_), so the transports and
// algorithms below never see concurrent calls on one communicator.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "common/completion.h"
#include "common/wait.h"

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
  // Runs `op` and completes its completion. Needs runMu_.
  static void run(PendingOp& op);

  // The worker's idle wait between batches: short, since a caller queueing
  // operations back to back should find it awake.
  static constexpr int kIdleSpinMicros = 5;
  static constexpr int kIdleYieldMicros = 50;

  std::mutex queueMu_;
  WaitSignal workSignal_;  // notified by submit(wakeWorker) and shutdown
  std::deque<PendingOp> queue_;
  // Operations submitted and not yet run (queue_ plus the worker's batch), changed
  // under queueMu_, read without it by inlineTurn.
  std::atomic<size_t> queued_{0};
  size_t taken_ = 0;           // the worker's batch: taken from queue_, not all run yet
  std::atomic<bool> stopping_{false};  // set under queueMu_
  std::mutex runMu_;
  std::thread worker_;
};

}  // namespace loom
