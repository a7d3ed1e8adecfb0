#include "src/comm/executor.h"

namespace loom {
namespace {

// A PendingOp as a task: the function and the completion it ends.
class FunctionTask final : public ExecutorTask {
 public:
  explicit FunctionTask(PendingOp op) : op_(std::move(op)) {}
  Status execute() override { return op_.work(); }
  void finish(Status status) override {
    op_.completion->complete(std::move(status));
    delete this;
  }

 private:
  PendingOp op_;
};

}  // namespace

Executor::Executor() : worker_([this] { workerLoop(); }) {}

Executor::~Executor() { shutdown(); }

void Executor::submit(ExecutorTask* task, bool wakeWorker) {
  ExecutorTask* head = incoming_.load(std::memory_order_relaxed);
  do {
    task->next_ = head;
  } while (!incoming_.compare_exchange_weak(head, task, std::memory_order_release, std::memory_order_relaxed));
  // A worker that has not gone to sleep sees the task by itself: then this is
  // a fence and one load, no system call.
  if (wakeWorker) workSignal_.notify();
}

void Executor::submit(PendingOp op, bool wakeWorker) { submit(new FunctionTask(std::move(op)), wakeWorker); }

bool Executor::takeIncoming() {
  ExecutorTask* newestFirst = incoming_.exchange(nullptr, std::memory_order_acquire);
  if (!newestFirst) return false;
  ExecutorTask* oldestFirst = nullptr;
  ExecutorTask* const last = newestFirst;
  while (newestFirst) {
    ExecutorTask* next = newestFirst->next_;
    newestFirst->next_ = oldestFirst;
    oldestFirst = newestFirst;
    newestFirst = next;
  }
  if (takenTail_) takenTail_->next_ = oldestFirst;
  else taken_ = oldestFirst;
  takenTail_ = last;
  return true;
}

bool Executor::runOne() {
  ExecutorTask* task = taken_;
  if (!task) return false;
  taken_ = task->next_;
  if (!taken_) takenTail_ = nullptr;
  // The next task was written by the thread that queued it, most often on
  // another core: its lines are fetched while this one runs (which waits for
  // peers), not when the next starts. A prefetch never faults, so the bytes
  // around the task's base need not all belong to it.
  static_assert(kPrefetchBehind % 64 == 0 && kPrefetchAhead % 64 == 0);
  if (taken_)
    for (int at = -kPrefetchBehind; at < kPrefetchAhead; at += 64)
      __builtin_prefetch(reinterpret_cast<const char*>(taken_) + at);
  Status status;
  try {
    status = task->execute();
  } catch (const std::exception& e) {
    status = makeError(Code::kInternalError, "exception in operation: %s", e.what());
  }
  task->finish(std::move(status));
  return true;
}

void Executor::runUntil(const CompletionPtr& target) {
  while (!target->done()) {
    std::unique_lock<std::mutex> run(runMu_, std::try_to_lock);
    if (run.owns_lock()) {
      while (!target->done() && (taken_ || takeIncoming()) && runOne()) {
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
  // Between batches the worker polls briefly, then yields, then sleeps: a
  // caller that queues operations back to back finds it awake and wakes
  // nobody, and an idle communicator's worker costs nothing after a moment.
  WaitContext idle;
  idle.spinMicros = kIdleSpinMicros;
  idle.yieldMicros = kIdleYieldMicros;
  for (;;) {
    (void)waitUntil(
        [this] { return incoming_.load(std::memory_order_acquire) != nullptr || stopping_.load(); }, &workSignal_,
        idle, [] { return std::string("queued operations"); });
    std::lock_guard<std::mutex> run(runMu_);
    // Everything pushed so far in one take, and again until none is left: a
    // caller that keeps queueing meets runMu_ once per batch.
    while ((taken_ || takeIncoming()) && runOne()) {
    }
    if (stopping_.load() && incoming_.load(std::memory_order_acquire) == nullptr) return;
  }
}

void Executor::shutdown() {
  // The join stays under the lock: a second caller (a destructor racing an
  // explicit shutdown) must not join the same thread, and returns only once
  // the worker has stopped, as the first does. The worker never takes stopMu_.
  std::lock_guard<std::mutex> lock(stopMu_);
  stopping_.store(true);
  workSignal_.notify();
  if (worker_.joinable()) worker_.join();
}

}  // namespace loom
