#include "src/comm/executor.h"

namespace loom {

Executor::Executor() : worker_([this] { workerLoop(); }) {}

Executor::~Executor() { shutdown(); }

void Executor::submit(PendingOp op, bool wakeWorker) {
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    queue_.push_back(std::move(op));
    queued_.store(queue_.size() + taken_, std::memory_order_release);
  }
  // A worker that has not gone to sleep sees queued_ by itself: then this is
  // a fence and one load, no system call.
  if (wakeWorker) workSignal_.notify();
}

bool Executor::runOne() {
  PendingOp op;
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    if (queue_.empty()) return false;
    op = std::move(queue_.front());
    queue_.pop_front();
    queued_.store(queue_.size() + taken_, std::memory_order_release);
  }
  run(op);
  return true;
}

void Executor::run(PendingOp& op) {
  Status status;
  try {
    status = op.work();
  } catch (const std::exception& e) {
    status = makeError(Code::kInternalError, "exception in operation: %s", e.what());
  }
  op.completion->complete(std::move(status));
}

void Executor::runUntil(const CompletionPtr& target) {
  while (!target->done()) {
    std::unique_lock<std::mutex> run(runMu_, std::try_to_lock);
    if (run.owns_lock()) {
      while (!target->done() && runOne()) {
      }
      continue;
    }
    // The worker is running earlier operations; `target` is queued after them
    // and the worker will run it too unless we get the lock first.
    WaitContext briefly;
    briefly.deadline = Deadline::after(0.001);
    briefly.spinMicros = 2;
    briefly.yieldMicros = 20;
    (void)target->wait(briefly, "operation");
  }
}

void Executor::workerLoop() {
  std::deque<PendingOp> batch;
  // Between batches the worker polls briefly, then yields, then sleeps: a
  // caller that queues operations back to back finds it awake and wakes
  // nobody, and an idle communicator's worker costs nothing after a moment.
  WaitContext idle;
  idle.spinMicros = kIdleSpinMicros;
  idle.yieldMicros = kIdleYieldMicros;
  for (;;) {
    (void)waitUntil([this] { return queued_.load(std::memory_order_acquire) != 0 || stopping_.load(); }, &workSignal_,
                    idle, [] { return std::string("queued operations"); });
    std::lock_guard<std::mutex> run(runMu_);
    {
      // Everything queued so far in one take: a caller that keeps queueing
      // meets this lock once per batch, not once per operation.
      std::lock_guard<std::mutex> lock(queueMu_);
      if (queue_.empty()) {  // a blocking caller ran it meanwhile, or we are stopping
        if (stopping_.load()) return;
        continue;
      }
      batch.swap(queue_);
      taken_ = batch.size();
    }
    for (PendingOp& op : batch) {
      this->run(op);
      // Our reference goes now, not at the batch's end: the caller's stream
      // usually drops the last one then, and memory is freed by the thread
      // that allocated it (no contention on another thread's malloc arena).
      op.completion.reset();
    }
    batch.clear();
    std::lock_guard<std::mutex> lock(queueMu_);
    taken_ = 0;
    queued_.store(queue_.size(), std::memory_order_release);
  }
}

void Executor::shutdown() {
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    if (stopping_.load() && !worker_.joinable()) return;
    stopping_.store(true);
  }
  workSignal_.notify();
  if (worker_.joinable()) worker_.join();
}

}  // namespace loom
