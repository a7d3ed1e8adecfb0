// One-shot all-reduce over the loopback transport with 2 slots per link:
// world sizes 1..9, tiny (64 B) and normal chunks. It reduces in rank order,
// so every type, floats included, must equal the left fold bit for bit.
// The same again with a shared-memory bulletin (in the heap, ranks as
// threads), which carries every message that fits it.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/one_shot.h"
#include "tests/unit/algorithms/fold_reference.h"
#include "tests/unit/algorithms/heap_bulletins.h"

namespace loom::algo {
namespace {

using namespace testref;
using testing::HeapBulletins;

// The bulletins of the test running now (runAllReduce takes a plain function).
const HeapBulletins* gBulletins = nullptr;

Status oneShotWithBulletin(const CollArgs& args, const AlgoContext& ctx) {
  AlgoContext withBulletin = ctx;
  withBulletin.bulletin = ctx.nranks > 1 ? gBulletins->of(ctx.rank) : nullptr;
  return oneShotAllReduce(args, withBulletin);
}

class OneShotTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {
 protected:
  void SetUp() override {
    bulletins_ = std::make_unique<HeapBulletins>(n());
    gBulletins = bulletins_.get();
  }
  void TearDown() override { gBulletins = nullptr; }

  int n() const { return std::get<0>(GetParam()); }
  size_t chunkBytes() const { return std::get<1>(GetParam()); }
  std::unique_ptr<HeapBulletins> bulletins_;

  template <class T>
  void check(std::initializer_list<RedOp> ops, bool mixedFloats) {
    const size_t chunkElems = chunkBytes() / sizeof(T);
    for (size_t count : interestingCounts(chunkElems * 5)) {
      for (RedOp op : ops) {
        auto in = makeInputs<T>(n(), count, [&](int r, size_t i) {
          return mixedFloats ? fromDouble<T>(mixedValue<T>(op, r, i)) : integerValue<T>(r, i);
        });
        for (bool inPlace : {false, true}) {
          for (bool bulletin : {false, true}) {
            auto out = runAllReduce<T>(bulletin ? oneShotWithBulletin : oneShotAllReduce, n(), chunkBytes(), in, op,
                                       inPlace);
            expectLeftFold(in, out, op,
                           std::string(dataTypeName(Elem<T>::kType)) + " " + redOpName(op) + " count " +
                               std::to_string(count) + (inPlace ? " in place" : " out of place") +
                               (bulletin ? " with a bulletin" : ""));
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
};

constexpr std::initializer_list<RedOp> kAllOps = {RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax,
                                                  RedOp::kAvg};

TEST_P(OneShotTest, IntegersEqualLoops) {
  check<int64_t>(kAllOps, false);
  check<uint8_t>({RedOp::kSum, RedOp::kProd, RedOp::kAvg}, false);
}

TEST_P(OneShotTest, FloatsEqualTheRankOrderFoldBitForBit) {
  check<float>(kAllOps, true);
  check<double>({RedOp::kSum, RedOp::kAvg}, true);
  check<F16>({RedOp::kSum, RedOp::kProd, RedOp::kAvg}, true);
  check<BF16>({RedOp::kSum, RedOp::kMax, RedOp::kAvg}, true);
}

INSTANTIATE_TEST_SUITE_P(WorldsAndChunks, OneShotTest,
                         ::testing::Combine(::testing::Range(1, 10), ::testing::Values(size_t{64}, size_t{4096})),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_chunk" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(OneShot, AppliesOnlyToSmallMessagesOnOneHost) {
  AlgoContext ctx;
  ctx.nranks = 4;
  CollArgs small{CollType::kAllReduce, nullptr, nullptr, kOneShotMaxBytes / 4, DataType::kFloat32, RedOp::kSum, 0};
  CollArgs large = small;
  large.count += 1;
  ctx.singleHost = true;
  EXPECT_TRUE(oneShotApplies(small, ctx));
  EXPECT_FALSE(oneShotApplies(large, ctx));
  ctx.singleHost = false;
  EXPECT_FALSE(oneShotApplies(small, ctx));
}

TEST(OneShot, ReportsAMismatchedPeerInsteadOfCorrupting) {
  // Rank 1 calls with a different count: rank 0 must fail with a message
  // naming the peer, not read garbage or hang.
  std::vector<std::vector<int32_t>> buf(2, std::vector<int32_t>(8, 1));
  Status rank0;
  runRanks(2, 4096, 2, [&](const AlgoContext& ctx) {
    CollArgs a{CollType::kAllReduce, buf[ctx.rank].data(), buf[ctx.rank].data(), ctx.rank == 0 ? size_t{8} : size_t{4},
               DataType::kInt32, RedOp::kSum, 0};
    Status st = oneShotAllReduce(a, ctx);
    if (ctx.rank == 0) rank0 = st;
    return Status::ok();
  });
  EXPECT_EQ(rank0.code(), Code::kRemoteError) << rank0.message();
  EXPECT_NE(rank0.message().find("from rank 1"), std::string::npos) << rank0.message();
}

}  // namespace
}  // namespace loom::algo
