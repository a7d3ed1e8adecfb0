// The host stream's bookkeeping (src/comm/stream.h): which ops are still
// outstanding, whether only small ("quick") ones are, and the sticky error.
// OpRunner's inline path reads these to decide whether a small call may
// wait a moment for its stream.
#include "src/comm/stream.h"

#include <gtest/gtest.h>

#include <memory>

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

}  // namespace
}  // namespace loom
