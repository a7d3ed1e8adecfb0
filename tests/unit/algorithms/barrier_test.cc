// The dissemination barrier over the loopback transport: no rank leaves a
// barrier before every rank has entered it (checked with a counter each rank
// bumps on entry, while one late rank per round sleeps first), for world
// sizes that are and are not powers of two; a missing rank times out.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/barrier.h"
#include "tests/unit/algorithms/loopback_links.h"
#include "tests/support/rank_threads.h"

namespace loom::algo {
namespace {

using testing::LoopbackFabric;

AlgoContext contextOf(LoopbackFabric& fabric, int rank, int nranks, double timeoutSeconds) {
  AlgoContext ctx;
  ctx.rank = rank;
  ctx.nranks = nranks;
  ctx.links = &fabric.linksOf(rank);
  ctx.wait.deadline = Deadline::after(timeoutSeconds);
  ctx.chunkBytes = 32;
  return ctx;
}

TEST(Barrier, NoRankLeavesBeforeAllEntered) {
  constexpr int kRounds = 12;
  for (int n : {1, 2, 3, 4, 5, 7, 8}) {
    SCOPED_TRACE("nranks " + std::to_string(n));
    LoopbackFabric fabric(n, 32, 2);
    std::vector<std::atomic<int>> entered(kRounds);
    std::vector<std::atomic<int>> early(kRounds);  // ranks that left while someone had not entered
    std::vector<Status> results(static_cast<size_t>(n));
    loom::testing::runRankThreads(n, [&](int rank) {
      const AlgoContext ctx = contextOf(fabric, rank, n, 20);
      for (int round = 0; round < kRounds && results[rank].isOk(); ++round) {
        if (rank == round % n) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the late one
        entered[round].fetch_add(1);
        results[rank] = disseminationBarrier(ctx);
        if (entered[round].load() != n) early[round].fetch_add(1);
      }
    });
    for (int r = 0; r < n; ++r) EXPECT_TRUE(results[r].isOk()) << "rank " << r << ": " << results[r].message();
    for (int round = 0; round < kRounds; ++round) EXPECT_EQ(early[round].load(), 0) << "round " << round;
  }
}

TEST(Barrier, MissingRankTimesOut) {
  const int n = 3;
  LoopbackFabric fabric(n, 32, 2);
  std::vector<Status> results(n);
  const auto start = Clock::now();
  loom::testing::runRankThreads(n, [&](int rank) {
    if (rank == 2) return;  // never arrives
    results[rank] = disseminationBarrier(contextOf(fabric, rank, n, 0.3));
  });
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 5.0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].code(), Code::kTimeout) << "rank " << r << ": " << results[r].message();
    EXPECT_NE(results[r].message().find("barrier round"), std::string::npos) << results[r].message();
  }
}

}  // namespace
}  // namespace loom::algo
