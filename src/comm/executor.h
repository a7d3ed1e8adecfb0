// The progress engine of one communicator: runs its operations in the order
// they were submitted, on a worker thread (asynchronous streams) or on the
// calling thread (blocking calls, and small stream calls whose peers are
// already in them: OpRunner::runInline; no thread hand-off, so no futex
// wake-up on the latency path). Between batches the worker polls a moment
// before it sleeps, so operations queued back to back wake nobody.
//
// Queueing takes no lock: a task is pushed onto a lock-free list with one
// compare-and-swap, and whoever runs tasks takes the whole list at once. A
// mutex there had the caller and the worker of a stream loop meet in the
// kernel (futex waits and wakes) on most calls.
//
// Exactly one thread runs operations at a time (runMu_), so the transports and
// algorithms below never see concurrent calls on one communicator.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

#include "common/completion.h"
#include "common/wait.h"

namespace loom {

// One queued operation. Intrusive (the executor links tasks through them), so
// queueing one allocates nothing; its owner keeps it alive until finish().
class ExecutorTask {
 public:
  // The operation itself, on the thread that runs it.
  virtual Status execute() = 0;
  // Its outcome; the executor touches the task no more once this is called
  // (it may free itself here).
  virtual void finish(Status status) = 0;

 protected:
  ~ExecutorTask() = default;

 private:
  friend class Executor;
  ExecutorTask* next_ = nullptr;
};

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

  // Queues `task`. With wakeWorker, the worker thread will run it; otherwise
  // the caller is expected to call runUntil() on the task's completion.
  void submit(ExecutorTask* task, bool wakeWorker);
  // The same for a function and the completion it ends (one allocation).
  void submit(PendingOp op, bool wakeWorker);
  // Runs queued operations on this thread until `target` has completed.
  void runUntil(const CompletionPtr& target);
  // This thread's turn to run an operation at once, if nothing is queued or
  // running (the common blocking call: no allocation, no queue): a lock that
  // owns runMu_ until the operation is done. One that owns nothing means the
  // caller must submit() instead, so the queue's order is kept.
  std::unique_lock<std::mutex> inlineTurn() {
    std::unique_lock<std::mutex> run(runMu_, std::try_to_lock);
    // With runMu_ held the queue can only grow, so an empty queue seen here
    // means nothing queued came before this call.
    if (run.owns_lock() && (taken_ != nullptr || incoming_.load(std::memory_order_acquire) != nullptr)) run.unlock();
    return run;
  }
  // Stops the worker after the queue is empty. Idempotent and safe from
  // several threads at once: each returns once the worker has stopped.
  void shutdown();

 private:
  void workerLoop();
  // Moves every pushed task, oldest first, behind the taken ones; false if
  // none was pushed. Needs runMu_.
  bool takeIncoming();
  // Runs the oldest taken task; false if none is taken. Needs runMu_.
  bool runOne();

  // The bytes around a task's base that runOne prefetches of the next task:
  // a queued collective (OpRunner::Queued) is a few hundred bytes, with the
  // task's base after its completion.
  static constexpr int kPrefetchBehind = 128;
  static constexpr int kPrefetchAhead = 512;

  // The worker's idle wait between batches: short, since a caller queueing
  // operations back to back should find it awake.
  static constexpr int kIdleSpinMicros = 5;
  static constexpr int kIdleYieldMicros = 50;

  WaitSignal workSignal_;  // notified by submit(wakeWorker) and shutdown
  // Pushed and not yet taken, newest first (a lock-free stack).
  std::atomic<ExecutorTask*> incoming_{nullptr};
  // Taken and not yet run, oldest first; only under runMu_. On a line of
  // their own, away from what the queueing thread writes.
  alignas(64) ExecutorTask* taken_ = nullptr;
  ExecutorTask* takenTail_ = nullptr;
  std::atomic<bool> stopping_{false};
  std::mutex stopMu_;  // shutdown's join, one caller at a time
  std::mutex runMu_;
  std::thread worker_;
};

}  // namespace loom
