// Recursive-doubling all-reduce over the loopback transport, every world
// size 1..9 (powers of two and the fold for the others).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "algorithms/recursive_doubling.h"
#include "tests/unit/algorithms/loopback_links.h"
#include "tests/support/rank_threads.h"

namespace loom::algo {
namespace {

using testing::LoopbackFabric;

template <class T>
std::vector<std::vector<T>> runRd(int n, const std::vector<std::vector<T>>& in, DataType dtype, RedOp op,
                                  bool inPlace) {
  const size_t count = in[0].size();
  LoopbackFabric fabric(n, 4096, 2);
  std::vector<std::vector<T>> send = in, out(n, std::vector<T>(count));
  std::vector<Status> results(n);
  loom::testing::runRankThreads(n, [&](int r) {
    AlgoContext ctx;
    ctx.rank = r;
    ctx.nranks = n;
    ctx.links = &fabric.linksOf(r);
    ctx.wait.deadline = Deadline::after(20);
    ctx.chunkBytes = 4096;
    T* recv = inPlace ? send[r].data() : out[r].data();
    CollArgs a{CollType::kAllReduce, send[r].data(), recv, count, dtype, op, 0};
    results[r] = recursiveDoublingAllReduce(a, ctx);
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(results[r].isOk()) << "rank " << r << ": " << results[r].message();
  return inPlace ? send : out;
}

class RdTest : public ::testing::TestWithParam<int> {};

TEST_P(RdTest, Int64SumAvgMaxAgainstLoops) {
  const int n = GetParam();
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{500}}) {
    std::vector<std::vector<int64_t>> in(n);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) in[r].push_back((r * 37 + static_cast<int64_t>(i) * 11) % 101 - 50);
    for (RedOp op : {RedOp::kSum, RedOp::kAvg, RedOp::kMax}) {
      for (bool inPlace : {false, true}) {
        auto out = runRd(n, in, DataType::kInt64, op, inPlace);
        for (size_t i = 0; i < count; ++i) {
          int64_t sum = 0, mx = INT64_MIN;
          for (int r = 0; r < n; ++r) sum += in[r][i], mx = std::max(mx, in[r][i]);
          int64_t want = op == RedOp::kSum ? sum : op == RedOp::kAvg ? sum / n : mx;
          for (int r = 0; r < n; ++r) ASSERT_EQ(out[r][i], want) << "n " << n << " rank " << r << " i " << i;
        }
      }
    }
  }
}

TEST_P(RdTest, FloatResultsAreBitIdenticalOnEveryRank) {
  // Values whose sum depends on the order of addition, and signed zeros for
  // min: every rank must still hold the same bits.
  const int n = GetParam();
  std::vector<std::vector<float>> in(n);
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < 64; ++i) in[r].push_back(i % 3 == 0 ? (r % 2 ? -0.0f : 0.0f) : 1.0f / static_cast<float>(r * 7 + i + 3));
  for (RedOp op : {RedOp::kSum, RedOp::kMin, RedOp::kProd}) {
    auto out = runRd(n, in, DataType::kFloat32, op, false);
    for (int r = 1; r < n; ++r)
      ASSERT_EQ(std::memcmp(out[r].data(), out[0].data(), 64 * sizeof(float)), 0) << "rank " << r << " op " << static_cast<int>(op);
    for (int i = 0; i < 64; ++i) {
      double want = op == RedOp::kSum ? 0 : op == RedOp::kProd ? 1 : INFINITY;
      for (int r = 0; r < n; ++r) {
        double v = in[r][i];
        want = op == RedOp::kSum ? want + v : op == RedOp::kProd ? want * v : std::min(want, v);
      }
      ASSERT_NEAR(out[0][i], want, std::fabs(want) * 1e-5 + 1e-30) << "i " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, RdTest, ::testing::Range(1, 10));

TEST(Rd, RefusesVectorsLargerThanAChunk) {
  LoopbackFabric fabric(1, 4096, 2);
  std::vector<int64_t> v(1000);
  AlgoContext ctx;
  ctx.links = &fabric.linksOf(0);
  ctx.chunkBytes = 4096;
  CollArgs a{CollType::kAllReduce, v.data(), v.data(), v.size(), DataType::kInt64, RedOp::kSum, 0};
  EXPECT_EQ(recursiveDoublingAllReduce(a, ctx).code(), Code::kInternalError);
}

}  // namespace
}  // namespace loom::algo
