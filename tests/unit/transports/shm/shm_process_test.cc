// The shared-memory transport between real processes (forked by
// shm_fork_harness, which also serves their rendezvous).
#include <gtest/gtest.h>
#include <unistd.h>

#include "common/format.h"
#include "transports/shm/shm_transport.h"
#include "tests/unit/transports/shm/shm_fork_harness.h"
#include "tests/unit/transports/shm/shm_test_util.h"

namespace loom::testing::shm {
namespace {

// One child rank: connect to every other rank, exchange rounds of patterned
// chunks, check that no segment name survives connect().
std::string runChildRank(bootstrap::Bootstrap& boot, int rank, int nranks, const std::string& tag, bool futexOnly) {
  Config cfg = smallConfig(16 * 1024, 2);
  std::unique_ptr<transport::Transport> t;
  if (std::string error = connectForkedRank(boot, rank, nranks, tag, cfg, &t); !error.empty()) return error;
  Status st;
  WaitContext wait = waitFor(20);
  if (futexOnly) wait.spinMicros = wait.yieldMicros = 0;
  for (uint64_t c = 0; c < 40 && st.isOk(); ++c) {
    for (int k = 1; k < nranks && st.isOk(); ++k) {
      int dst = (rank + k) % nranks;
      st = sendPatternChunk(t->sendTo(dst, transport::Protocol::kSimple), rank, dst, c, chunkSizeFor(rank, dst, c, cfg.chunkBytes), wait);
    }
    for (int k = 1; k < nranks && st.isOk(); ++k) {
      int src = (rank - k + nranks) % nranks;
      st = recvPatternChunk(t->recvFrom(src, transport::Protocol::kSimple), src, rank, c, chunkSizeFor(src, rank, c, cfg.chunkBytes), wait);
    }
  }
  if (!st.isOk()) return st.message();
  // Nobody unmaps before everyone has received everything.
  st = boot.barrier(waitFor(20));
  return st.isOk() ? std::string() : "final barrier: " + st.message();
}

void runProcesses(int nranks, bool futexOnly) {
  std::string tag = uniqueJobTag();
  std::vector<int> codes = runForkedRanks(nranks, [&](int rank, bootstrap::Bootstrap& boot) {
    return runChildRank(boot, rank, nranks, tag, futexOnly);
  });
  for (int r = 0; r < nranks; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r << " failed (see its stderr)";
  EXPECT_TRUE(leftoverSegments(tag).empty());
}

TEST(ShmProcesses, TwoProcessesExchangeChunks) { runProcesses(2, false); }
TEST(ShmProcesses, FourProcessesAllPairs) { runProcesses(4, false); }
// Futex wake-ups across processes (the wait goes straight to sleeping).
TEST(ShmProcesses, ThreeProcessesFutexOnlyWaits) { runProcesses(3, true); }

// A rank that dies before connecting makes the others fail, not hang, and
// leaves nothing behind.
TEST(ShmProcesses, DeadRankFailsTheOthersPromptly) {
  std::string tag = uniqueJobTag();
  constexpr int kRanks = 3;
  auto start = Clock::now();
  std::vector<int> codes = runForkedRanks(kRanks, [&](int rank, bootstrap::Bootstrap& boot) -> std::string {
    if (rank == 1) ::_exit(3);  // dies before connect()
    std::string err = runChildRank(boot, rank, kRanks, tag, false);
    return err.find("rendezvous of rank") != std::string::npos ? std::string() : "unexpected outcome: " + err;
  }, 30);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(codes[r], r == 1 ? 3 : 0) << "rank " << r;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10.0);
  EXPECT_TRUE(leftoverSegments(tag).empty());
}

}  // namespace
}  // namespace loom::testing::shm
