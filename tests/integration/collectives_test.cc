// The collective x dtype x op x in-place x count matrix (case_matrix.h) on
// every rank, as threads of one process and as processes under loomrun.
// With LOOM_ALGO/LOOM_PROTO set, every call is also checked to have run the
// forced algorithm and protocol wherever they can run it (forced_algorithm.h).
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/integration/case_matrix.h"
#include "tests/integration/collective_case.h"
#include "tests/integration/fixtures.h"
#include "tests/integration/forced_algorithm.h"

namespace loom::integration {
namespace {

// With LOOM_ALGO/LOOM_PROTO forcing a choice, how many calls it governs (the
// rest fall back to another algorithm); an entry forcing an algorithm that
// serves none of this collective's calls tests nothing it means to.
void expectForcedChoiceRuns(Coll coll, const std::vector<CaseSpec>& cases, int rank) {
  const ForcedAlgorithm& forced = forcedAlgorithm();
  if (!forced.active()) return;
  size_t governed = 0;
  for (const CaseSpec& s : cases) governed += forced.governs(s) ? 1 : 0;
  if (rank == 0)
    std::printf("  %s: forced %s runs %zu of %zu calls (the rest cannot run it)\n", collName(coll),
                forced.describe().c_str(), governed, cases.size());
  EXPECT_TRUE(forced.serves(coll) && governed > 0)
      << "LOOM_ALGO/LOOM_PROTO force " << forced.describe() << ", which runs no " << collName(coll)
      << " call: leave " << collName(coll) << " out of this entry's --gtest_filter";
}

void announce(Coll coll, const std::vector<CaseSpec>& cases, int nranks, int rank) {
  expectForcedChoiceRuns(coll, cases, rank);
  if (rank != 0) return;
  for (const CaseSpec& s : cases)
    if (s.count == kLargeCount) std::printf("  %s: large-count case: %s\n", collName(coll), describe(s).c_str());
  std::printf("  %s: %zu calls per rank, %d ranks\n", collName(coll), cases.size(), nranks);
}

void runThreadsMatrix(Coll coll, int nranks, const Clique& clique) {
  const auto cases = buildCases(coll, nranks, Mode::kThreads, testOptions().matrix);
  announce(coll, cases, nranks, 0);
  runOnRankThreads(nranks, [&](int rank) { runCasesOnRank(cases, clique.comm(rank), rank, nranks); });
}

bool runProcessMatrix(Coll coll, const ProcessWorld& w) {
  const auto cases = buildCases(coll, w.nranks, Mode::kProcesses, testOptions().matrix);
  announce(coll, cases, w.nranks, w.rank);
  return runCasesOnRank(cases, w.comm, w.rank, w.nranks);
}

TEST_F(Threads, AllReduce) { runThreadsMatrix(Coll::kAllReduce, nranks_, *clique_); }
TEST_F(Threads, Broadcast) { runThreadsMatrix(Coll::kBroadcast, nranks_, *clique_); }
TEST_F(Threads, Reduce) { runThreadsMatrix(Coll::kReduce, nranks_, *clique_); }
TEST_F(Threads, ReduceScatter) { runThreadsMatrix(Coll::kReduceScatter, nranks_, *clique_); }
TEST_F(Threads, AllGather) { runThreadsMatrix(Coll::kAllGather, nranks_, *clique_); }

TEST_F(Process, AllReduce) { markBrokenUnless(runProcessMatrix(Coll::kAllReduce, *world_)); }
TEST_F(Process, Broadcast) { markBrokenUnless(runProcessMatrix(Coll::kBroadcast, *world_)); }
TEST_F(Process, Reduce) { markBrokenUnless(runProcessMatrix(Coll::kReduce, *world_)); }
TEST_F(Process, ReduceScatter) { markBrokenUnless(runProcessMatrix(Coll::kReduceScatter, *world_)); }
TEST_F(Process, AllGather) { markBrokenUnless(runProcessMatrix(Coll::kAllGather, *world_)); }

}  // namespace
}  // namespace loom::integration
