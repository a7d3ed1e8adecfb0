#include "src/comm/executor.h"

namespace loom {

Executor::Executor() : worker_([this] { workerLoop(); }) {}

Executor::~Executor() { shutdown(); }

void Executor::submit(PendingOp op, bool wakeWorker) {
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    queue_.push_back(std::move(op));
    queued_.store(queue_.size(), std::memory_order_release);
  }
  if (wakeWorker) queueCv_.notify_one();
}

bool Executor::runOne() {
  PendingOp op;
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    if (queue_.empty()) return false;
    op = std::move(queue_.front());
    queue_.pop_front();
    queued_.store(queue_.size(), std::memory_order_release);
  }
  Status status;
  try {
    status = op.work();
  } catch (const std::exception& e) {
    status = makeError(Code::kInternalError, "exception in operation: %s", e.what());
  }
  op.completion->complete(std::move(status));
  return true;
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
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(queueMu_);
      queueCv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty() && stopping_) return;
    }
    std::lock_guard<std::mutex> run(runMu_);
    while (runOne()) {
    }
  }
}

void Executor::shutdown() {
  {
    std::lock_guard<std::mutex> lock(queueMu_);
    if (stopping_ && !worker_.joinable()) return;
    stopping_ = true;
  }
  queueCv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

}  // namespace loom
