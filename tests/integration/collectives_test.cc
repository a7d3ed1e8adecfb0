// The collective x dtype x op x in-place x count matrix (case_matrix.h) on
// every rank, as threads of one process and as processes under loomrun.
#include <gtest/gtest.h>

#include <cstdio>

#include "integration/case_matrix.h"
#include "integration/collective_case.h"
#include "integration/fixtures.h"

namespace loom::integration {
namespace {

void announce(Coll coll, const std::vector<CaseSpec>& cases, int nranks, int rank) {
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
