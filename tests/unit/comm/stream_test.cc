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
