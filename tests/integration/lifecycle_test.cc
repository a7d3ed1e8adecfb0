// Communicator and stream lifetimes with work still queued: destroy waits
// for it, abort stops it (loom.h).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/collective_case.h"
#include "tests/integration/test_world.h"

namespace loom::integration {
namespace {

// loomStreamDestroy synchronizes first, and loomCommDestroy waits for the
// communicator's queued work (loom.h), so results are complete after both
// even though nothing called loomStreamSynchronize before them.
TEST(ThreadsLifecycle, DestroyWaitsForQueuedWork) {
  const int nranks = testOptions().threadWorldSize;
  std::vector<loomComm_t> comms(nranks, nullptr);
  ASSERT_EQ(loomCommInitAll(comms.data(), nranks, nullptr), loomSuccess) << loomGetLastError(nullptr);
  CaseSpec first;
  first.coll = Coll::kAllReduce;
  first.dtype = loomFloat32;
  first.op = loomSum;
  first.count = 4 * testOptions().matrix.chunkBytes / 4 + 5;
  first.seed = 9001;
  CaseSpec second = first;
  second.coll = Coll::kAllGather;
  second.dtype = loomInt64;
  second.count = 100003;
  second.seed = 9002;
  runOnRankThreads(nranks, [&](int rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    CaseRun a(first, rank, nranks), b(second, rank, nranks);
    a.prepare();
    b.prepare();
    loomStream_t s1 = nullptr, s2 = nullptr;
    ASSERT_EQ(loomStreamCreate(&s1), loomSuccess);
    ASSERT_EQ(loomStreamCreate(&s2), loomSuccess);
    EXPECT_EQ(a.launch(comms[rank], s1), loomSuccess) << loomGetLastError(comms[rank]);
    EXPECT_EQ(loomStreamDestroy(s1), loomSuccess) << "with work queued";
    {
      SCOPED_TRACE(a.trace() + ", after loomStreamDestroy");
      a.verify();
    }
    EXPECT_EQ(b.launch(comms[rank], s2), loomSuccess) << loomGetLastError(comms[rank]);
    EXPECT_EQ(loomCommDestroy(comms[rank]), loomSuccess) << "with work queued";
    EXPECT_EQ(loomStreamSynchronize(s2), loomSuccess);
    {
      SCOPED_TRACE(b.trace() + ", after loomCommDestroy");
      b.verify();
    }
    EXPECT_EQ(loomStreamDestroy(s2), loomSuccess);
  });
}

// loomCommAbort stops outstanding work at once (loom.h): an AllReduce that
// can never complete (no peer joins it) is queued on rank 0's stream; the
// abort must return well before LOOM_TIMEOUT and the stream must report the
// work as failed with loomRemoteError.
TEST(ThreadsLifecycle, AbortUnblocksQueuedWork) {
  const int nranks = testOptions().threadWorldSize;
  if (nranks < 2) GTEST_SKIP() << "needs a peer that never joins";
  std::vector<loomComm_t> comms(nranks, nullptr);
  ASSERT_EQ(loomCommInitAll(comms.data(), nranks, nullptr), loomSuccess) << loomGetLastError(nullptr);
  std::vector<int32_t> data(1023, 1);
  loomStream_t stream = nullptr;
  ASSERT_EQ(loomStreamCreate(&stream), loomSuccess);
  ASSERT_EQ(loomAllReduce(data.data(), data.data(), data.size(), loomInt32, loomSum, comms[0], stream), loomSuccess)
      << loomGetLastError(comms[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(loomStreamQuery(stream), loomInProgress) << "an AllReduce without peers cannot have finished";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(loomCommAbort(comms[0]), loomSuccess);
  const loomResult_t rc = loomStreamSynchronize(stream);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(rc, loomRemoteError) << "stream result after the abort: " << loomGetErrorString(rc);
  EXPECT_LT(seconds, 10.0) << "abort and synchronize took " << seconds << " s";
  EXPECT_NE(loomStreamQuery(stream), loomInProgress);
  EXPECT_NE(loomStreamDestroy(stream), loomInProgress);
  for (int r = 1; r < nranks; ++r) EXPECT_EQ(loomCommAbort(comms[r]), loomSuccess) << "rank " << r;
}

}  // namespace
}  // namespace loom::integration
