// Halving-doubling all-reduce over the loopback transport with 2 slots per
// link: world sizes 1..9, 12 and 16 (powers of two and the fold), tiny
// chunks (64 B: many chunks per exchange) and a normal one, against
// references computed here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/halving_doubling.h"
#include "tests/unit/algorithms/fold_reference.h"

namespace loom::algo {
namespace {

using namespace testref;

class HdTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {
 protected:
  int n() const { return std::get<0>(GetParam()); }
  size_t chunkBytes() const { return std::get<1>(GetParam()); }

  // Integer results do not depend on the order of reduction (they wrap), so
  // they must equal the left fold exactly, on every rank.
  template <class T>
  void checkIntegers(std::initializer_list<RedOp> ops) {
    const size_t chunkElems = chunkBytes() / sizeof(T);
    for (size_t count : interestingCounts(chunkElems * static_cast<size_t>(n()) * 2)) {
      auto in = makeInputs<T>(n(), count, integerValue<T>);
      for (RedOp op : ops) {
        for (bool inPlace : {false, true}) {
          auto out = runAllReduce<T>(halvingDoublingAllReduce, n(), chunkBytes(), in, op, inPlace);
          expectLeftFold(in, out, op,
                         std::string(dataTypeName(Elem<T>::kType)) + " " + redOpName(op) + " count " +
                             std::to_string(count) + (inPlace ? " in place" : " out of place"));
          if (HasFatalFailure()) return;
        }
      }
    }
  }
};

TEST_P(HdTest, Int64AllOpsEqualLoops) {
  checkIntegers<int64_t>({RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax, RedOp::kAvg});
}

TEST_P(HdTest, Int32AndUint8WrapAndAverage) {
  checkIntegers<int32_t>({RedOp::kSum, RedOp::kAvg, RedOp::kMax});
  checkIntegers<uint8_t>({RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kAvg});
}

TEST_P(HdTest, FloatResultsAreBitIdenticalOnEveryRankAndClose) {
  // Positive values whose sum depends on the order of addition: every rank
  // must still hold the same bits (each element has one owner).
  const size_t count = chunkBytes() / sizeof(float) * static_cast<size_t>(n()) * 2 + 1;
  auto in = makeInputs<float>(n(), count, [](int r, size_t i) {
    return 1.0f + 1.0f / static_cast<float>(r * 7 + static_cast<int>(i % 97) + 3);
  });
  for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax, RedOp::kAvg}) {
    for (bool inPlace : {false, true}) {
      auto out = runAllReduce<float>(halvingDoublingAllReduce, n(), chunkBytes(), in, op, inPlace);
      ASSERT_EQ(out.size(), static_cast<size_t>(n()));
      for (int r = 1; r < n(); ++r)
        ASSERT_EQ(std::memcmp(out[r].data(), out[0].data(), count * sizeof(float)), 0)
            << "rank " << r << " differs from rank 0, op " << redOpName(op);
      for (size_t i = 0; i < count; ++i) {
        double want = op == RedOp::kProd ? 1 : op == RedOp::kMin ? INFINITY : op == RedOp::kMax ? -INFINITY : 0;
        for (int r = 0; r < n(); ++r) {
          const double v = in[r][i];
          want = op == RedOp::kProd ? want * v
                 : op == RedOp::kMin ? std::min(want, v)
                 : op == RedOp::kMax ? std::max(want, v)
                                     : want + v;
        }
        if (op == RedOp::kAvg) want /= n();
        if (op == RedOp::kMin || op == RedOp::kMax)
          ASSERT_EQ(out[0][i], static_cast<float>(want)) << "element " << i << " op " << redOpName(op);
        else
          ASSERT_NEAR(out[0][i], want, std::fabs(want) * 1e-5) << "element " << i << " op " << redOpName(op);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldsAndChunks, HdTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16),
                                            ::testing::Values(size_t{64}, size_t{4096})),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_chunk" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(Hd, RefusesAChunkSmallerThanAnElement) {
  std::vector<int64_t> in(4, 1), out(4);
  bool ranAll = runRanks(2, 4, 2, [&](const AlgoContext& ctx) {
    CollArgs a{CollType::kAllReduce, in.data(), out.data(), in.size(), DataType::kInt64, RedOp::kSum, 0};
    Status st = halvingDoublingAllReduce(a, ctx);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.message();
    EXPECT_NE(st.message().find("chunk size"), std::string::npos) << st.message();
    return Status::ok();
  });
  EXPECT_TRUE(ranAll);
}

}  // namespace
}  // namespace loom::algo
