// The communicator's progress engine (src/comm/executor.h): tasks run one at
// a time, in the order they were queued, whether the worker runs them or a
// caller waiting in runUntil; inlineTurn is refused while anything is queued;
// shutdown runs what is left, however many threads call it.
#include "src/comm/executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace loom {
namespace {

// Appends its number to a shared log when it runs, and notes whether another
// task was running at the same time.
class LoggingTask final : public ExecutorTask {
 public:
  struct Log {
    std::mutex mu;
    std::vector<int> order;
    std::atomic<int> running{0};
    std::atomic<bool> overlapped{false};
  };
  LoggingTask(Log& log, int id) : log_(log), id_(id) {}
  Status execute() override {
    if (log_.running.fetch_add(1) != 0) log_.overlapped = true;
    {
      std::lock_guard<std::mutex> lock(log_.mu);
      log_.order.push_back(id_);
    }
    log_.running.fetch_sub(1);
    return id_ % 7 == 3 ? makeError(Code::kInvalidArgument, "task %d fails", id_) : Status::ok();
  }
  void finish(Status status) override { done->complete(std::move(status)); }

  CompletionPtr done = std::make_shared<Completion>();

 private:
  Log& log_;
  int id_;
};

TEST(Executor, RunsEachProducersTasksInOrderOneAtATime) {
  LoggingTask::Log log;
  constexpr int kThreads = 4, kPerThread = 2000;
  std::vector<std::unique_ptr<LoggingTask>> tasks;
  for (int i = 0; i < kThreads * kPerThread; ++i) tasks.push_back(std::make_unique<LoggingTask>(log, i));
  {
    Executor executor;
    std::vector<std::thread> producers;
    for (int t = 0; t < kThreads; ++t)
      producers.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) executor.submit(tasks[static_cast<size_t>(t * kPerThread + i)].get(), true);
      });
    for (auto& p : producers) p.join();
    executor.runUntil(tasks.back()->done);
  }  // the destructor runs whatever is still queued
  ASSERT_EQ(log.order.size(), tasks.size());
  EXPECT_FALSE(log.overlapped.load());
  std::vector<int> lastOf(kThreads, -1);
  for (int id : log.order) {
    const int producer = id / kPerThread;
    EXPECT_GT(id, lastOf[static_cast<size_t>(producer)]) << "task " << id << " ran out of its producer's order";
    lastOf[static_cast<size_t>(producer)] = id;
  }
  for (size_t i = 0; i < tasks.size(); ++i) EXPECT_EQ(tasks[i]->done->ok(), i % 7 != 3) << "task " << i;
}

TEST(Executor, RunUntilRunsQueuedTasksOnTheCallerWithoutTheWorker) {
  LoggingTask::Log log;
  Executor executor;
  LoggingTask first(log, 0), second(log, 1);
  executor.submit(&first, /*wakeWorker=*/false);
  executor.submit(&second, /*wakeWorker=*/false);
  executor.runUntil(second.done);
  ASSERT_TRUE(first.done->done());
  EXPECT_EQ(log.order, (std::vector<int>{0, 1}));
}

TEST(Executor, InlineTurnIsRefusedWhileATaskIsQueued) {
  LoggingTask::Log log;
  Executor executor;
  {
    auto turn = executor.inlineTurn();
    ASSERT_TRUE(turn.owns_lock());
    // Held: the worker cannot run this one, so it stays queued.
    LoggingTask queued(log, 5);
    executor.submit(&queued, true);
    turn.unlock();
    executor.runUntil(queued.done);
  }
  LoggingTask held(log, 6);
  std::unique_lock<std::mutex> turn = executor.inlineTurn();
  ASSERT_TRUE(turn.owns_lock());
  executor.submit(&held, false);
  turn.unlock();
  // Queued behind nothing running, but queued: an inline call must wait its turn.
  EXPECT_FALSE(executor.inlineTurn().owns_lock());
  executor.runUntil(held.done);
  EXPECT_TRUE(executor.inlineTurn().owns_lock());
}

TEST(Executor, AnExceptionBecomesTheTasksError) {
  class Throwing final : public ExecutorTask {
   public:
    Status execute() override { throw std::runtime_error("boom"); }
    void finish(Status status) override { done->complete(std::move(status)); }
    CompletionPtr done = std::make_shared<Completion>();
  } task;
  Executor executor;
  executor.submit(&task, true);
  executor.runUntil(task.done);
  EXPECT_EQ(task.done->status().code(), Code::kInternalError);
  EXPECT_NE(task.done->status().message().find("boom"), std::string::npos);
}

TEST(Executor, FunctionsRunWithTheirCompletion) {
  Executor executor;
  std::atomic<int> ran{0};
  std::vector<CompletionPtr> done;
  for (int i = 0; i < 100; ++i) {
    done.push_back(std::make_shared<Completion>());
    executor.submit({[&ran] {
                       ran.fetch_add(1);
                       return Status::ok();
                     },
                     done.back()},
                    true);
  }
  executor.runUntil(done.back());
  for (auto& d : done) EXPECT_TRUE(d->done());
  EXPECT_EQ(ran.load(), 100);
}

TEST(Executor, ConcurrentShutdownsEachReturnOnceTheQueuedWorkRan) {
  // A communicator's destructor may race an explicit shutdown (abort on one
  // thread, destroy on another): no caller may join the worker twice or
  // return while a queued task still runs.
  for (int round = 0; round < 20; ++round) {
    Executor executor;
    std::atomic<bool> ran{false};
    auto done = std::make_shared<Completion>();
    executor.submit({[&ran] {
                       std::this_thread::sleep_for(std::chrono::milliseconds(5));
                       ran.store(true);
                       return Status::ok();
                     },
                     done},
                    true);
    std::atomic<int> returnedEarly{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < 4; ++t)
      callers.emplace_back([&] {
        executor.shutdown();
        if (!ran.load()) returnedEarly.fetch_add(1);
      });
    for (auto& c : callers) c.join();
    EXPECT_EQ(returnedEarly.load(), 0) << "round " << round;
    EXPECT_TRUE(done->done());
  }
}

}  // namespace
}  // namespace loom
