// The host stream's bookkeeping (src/comm/stream.h): which ops are still
// outstanding, whether only small ("quick") ones are, and the sticky error.
// OpRunner's inline path reads these to decide whether a small call may
// wait a moment for its stream.
#include "src/comm/stream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace loom {
namespace {

CompletionPtr pending() { return std::make_shared<Completion>(); }

TEST(Stream, CountsOutstandingOpsUntilTheyFinishInOrder) {
  Stream stream;
  EXPECT_TRUE(stream.idle());
  const int runner = 0;
  CompletionPtr a = pending(), b = pending();
  EXPECT_EQ(stream.push(a, &runner, true), nullptr);
  EXPECT_EQ(stream.push(b, &runner, true), nullptr);  // same runner: nothing to wait for
  EXPECT_EQ(stream.outstanding(), 2u);
  EXPECT_FALSE(stream.idle());
  a->complete(Status::ok());
  EXPECT_EQ(stream.outstanding(), 1u);
  b->complete(Status::ok());
  EXPECT_TRUE(stream.idle());
  EXPECT_TRUE(stream.query().isOk());
}

TEST(Stream, OnlyQuickOutstandingIsFalseWhileALargeOpIsOnTheStream) {
  Stream stream;
  const int runner = 0;
  EXPECT_TRUE(stream.onlyQuickOutstanding());  // nothing at all
  CompletionPtr quick = pending(), large = pending(), later = pending();
  stream.push(quick, &runner, true);
  EXPECT_TRUE(stream.onlyQuickOutstanding());
  stream.push(large, &runner, false);
  stream.push(later, &runner, true);
  EXPECT_FALSE(stream.onlyQuickOutstanding());
  quick->complete(Status::ok());
  EXPECT_FALSE(stream.onlyQuickOutstanding()) << "the large op is still running";
  large->complete(Status::ok());
  EXPECT_TRUE(stream.onlyQuickOutstanding()) << "only the quick one after it is left";
  later->complete(Status::ok());
  EXPECT_TRUE(stream.onlyQuickOutstanding());
  EXPECT_TRUE(stream.idle());
}

TEST(Stream, AnOpOfAnotherRunnerIsWaitedForAndAFailureSticks) {
  Stream stream;
  const int first = 0, second = 0;
  CompletionPtr a = pending(), b = pending();
  stream.push(a, &first);
  EXPECT_EQ(stream.push(b, &second), a) << "another runner must wait for the previous op";
  a->complete(makeError(Code::kRemoteError, "peer gone"));
  b->complete(Status::ok());
  EXPECT_TRUE(stream.idle());
  EXPECT_EQ(stream.query().code(), Code::kRemoteError);
  EXPECT_EQ(stream.synchronize().code(), Code::kRemoteError);
}

// The backlog a small call sleeps on (OpRunner::idleSoon): the newest op, only
// past the threshold and only while every unfinished op is quick.
TEST(Stream, TheNewestOfAQuickBacklogIsGivenOnlyPastTheThresholdAndWithoutLargeOps) {
  Stream stream;
  const int runner = 0;
  EXPECT_EQ(stream.newestOfQuickBacklog(0), nullptr) << "an idle stream has no backlog";
  CompletionPtr a = pending(), b = pending(), c = pending();
  stream.push(a, &runner, true);
  stream.push(b, &runner, true);
  EXPECT_EQ(stream.newestOfQuickBacklog(2), nullptr) << "2 unfinished ops are not more than 2";
  EXPECT_EQ(stream.newestOfQuickBacklog(1), b);
  stream.push(c, &runner, true);
  EXPECT_EQ(stream.newestOfQuickBacklog(2), c);
  a->complete(Status::ok());
  EXPECT_EQ(stream.newestOfQuickBacklog(2), nullptr) << "finished ops leave the backlog";
  CompletionPtr large = pending();
  stream.push(large, &runner, false);
  EXPECT_EQ(stream.newestOfQuickBacklog(1), nullptr) << "a large op on the stream: no quick backlog";
  for (const CompletionPtr& op : {b, c, large}) op->complete(Status::ok());
  EXPECT_TRUE(stream.idle());
}

// The sleep a small call may take on that backlog: it ends when the op is
// done (well before the bound), and ends at the bound when it is not.
TEST(Completion, SleepUntilDoneEndsWithTheOpOrAtItsBound) {
  using Clock = std::chrono::steady_clock;
  CompletionPtr done = pending();
  done->complete(Status::ok());
  EXPECT_TRUE(done->sleepUntilDone(1'000'000)) << "a finished op returns at once";

  CompletionPtr never = pending();
  Clock::time_point start = Clock::now();
  EXPECT_FALSE(never->sleepUntilDone(3'000));
  const auto waited = Clock::now() - start;
  EXPECT_GE(waited, std::chrono::microseconds(3'000)) << "returned before its bound with the op unfinished";
  EXPECT_LT(waited, std::chrono::seconds(2)) << "did not return near its bound";

  CompletionPtr later = pending();
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    later->complete(Status::ok());
  });
  start = Clock::now();
  EXPECT_TRUE(later->sleepUntilDone(20'000'000)) << "the op finished within the 20 s bound";
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10)) << "the completion did not wake the sleeper";
  finisher.join();
}

// A caller that enqueues faster than the ops finish waits once the stream
// holds maxOutstanding() of them, until half have finished; below that it
// goes on at once.
TEST(Stream, ACallerWaitsForRoomOnceTheStreamIsFull) {
  Stream stream;
  const int runner = 0;
  const size_t depth = Stream::maxOutstanding();
  ASSERT_GE(depth, 2u);
  std::vector<CompletionPtr> ops;
  for (size_t i = 0; i + 1 < depth; ++i) {
    ops.push_back(pending());
    stream.push(ops.back(), &runner, true);
  }
  stream.waitForRoom();  // depth - 1 unfinished: returns at once
  ops.push_back(pending());
  stream.push(ops.back(), &runner, true);

  // Another thread finishes the ops in order after a pause, counting each
  // before it completes it.
  std::atomic<size_t> finishing{0};
  std::thread runnerThread([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (const CompletionPtr& op : ops) {
      finishing.fetch_add(1);
      op->complete(Status::ok());
    }
  });
  stream.waitForRoom();
  // Full: the caller went on only once half the depth had finished.
  EXPECT_GE(finishing.load(), depth - depth / 2);
  runnerThread.join();
  EXPECT_TRUE(stream.idle());
}

}  // namespace
}  // namespace loom
