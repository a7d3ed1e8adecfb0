// Two cliques of communicators in one process, each driven by its own
// threads at the same time: their connections and shared-memory segments
// must not mix. Both run the same collectives on different data.
#include <gtest/gtest.h>

#include <vector>

#include "tests/integration/case_matrix.h"
#include "tests/integration/collective_case.h"
#include "tests/integration/fixtures.h"

namespace loom::integration {
namespace {

// int32 and fp32 cases of every collective at counts 7 and chunk + 1.
std::vector<CaseSpec> concurrentCases(int nranks, uint64_t seedOffset) {
  std::vector<CaseSpec> out;
  const size_t chunkElements = testOptions().matrix.chunkBytes / 4;
  for (int c = 0; c < kNumColls; ++c) {
    for (CaseSpec s : buildCases(static_cast<Coll>(c), nranks, Mode::kThreads, testOptions().matrix)) {
      if (s.dtype != loomInt32 && s.dtype != loomFloat32) continue;
      if (s.count != 7 && s.count != chunkElements + 1) continue;
      s.seed += seedOffset;
      out.push_back(s);
    }
  }
  return out;
}

TEST_F(Threads, TwoCliquesConcurrently) {
  Clique second(nranks_);
  ASSERT_EQ(second.initResult(), loomSuccess) << second.initError();
  const auto casesA = concurrentCases(nranks_, 0);
  const auto casesB = concurrentCases(nranks_, 1000003);
  runOnRankThreads(2 * nranks_, [&](int t) {
    const bool first = t < nranks_;
    const int rank = first ? t : t - nranks_;
    SCOPED_TRACE(first ? "first clique" : "second clique");
    runCasesOnRank(first ? casesA : casesB, first ? comm(rank) : second.comm(rank), rank, nranks_);
  });
}

}  // namespace
}  // namespace loom::integration
