// Windowed all-reduce over shared windows in the heap (ranks as threads):
// world sizes 1..9, windows small enough that a vector takes many rounds,
// with slices that are uneven or empty. It folds in rank order, so every
// type, floats included, must equal the left fold bit for bit.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/window_allreduce.h"
#include "tests/unit/algorithms/fold_reference.h"
#include "tests/unit/algorithms/heap_windows.h"

namespace loom::algo {
namespace {

using namespace testref;

using loom::testing::HeapWindows;

// The windows of the test running now (runAllReduce takes a plain function).
const HeapWindows* gWindows = nullptr;

Status windowed(const CollArgs& args, const AlgoContext& ctx) {
  AlgoContext withWindows = ctx;
  withWindows.windows = gWindows->of(ctx.rank);
  return windowAllReduce(args, withWindows);
}

class WindowAllReduceTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {
 protected:
  void SetUp() override {
    windows_ = std::make_unique<HeapWindows>(n(), windowBytes());
    gWindows = windows_.get();
  }
  void TearDown() override { gWindows = nullptr; }

  int n() const { return std::get<0>(GetParam()); }
  size_t windowBytes() const { return std::get<1>(GetParam()); }
  std::unique_ptr<HeapWindows> windows_;

  // A round is half a window: vectors of five rounds.
  size_t manyBytes() const { return windowBytes() / 2 * 5; }
};

TEST_P(WindowAllReduceTest, IntegersEqualLoops) { expectIntegersAreLeftFold(windowed, n(), manyBytes()); }

TEST_P(WindowAllReduceTest, FloatsEqualTheRankOrderFoldBitForBit) { expectFloatsAreLeftFold(windowed, n(), manyBytes()); }

// 256-byte windows: 128-byte rounds, so at 4+ ranks some slices are empty
// (slices start on cache lines) and a vector spans tens of rounds.
INSTANTIATE_TEST_SUITE_P(WorldsAndWindows, WindowAllReduceTest,
                         ::testing::Combine(::testing::Range(1, 10), ::testing::Values(size_t{256}, size_t{4096})),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_window" +
                                  std::to_string(std::get<1>(info.param));
                         });

// Many rounds back to back with every rank's phase ends racing: a rank that
// rewrote its window before its peers had copied its last round out would
// show up as a wrong element here.
TEST(WindowAllReduce, ManyRoundsStayExactUnderContention) {
  constexpr int kRanks = 6;
  HeapWindows windows(kRanks, 512);
  gWindows = &windows;
  const size_t count = 64 * 400 + 7;  // 400 rounds of 64 floats, and a tail
  auto in = makeInputs<int32_t>(kRanks, count, [](int r, size_t i) { return integerValue<int32_t>(r, i); });
  for (int rep = 0; rep < 3; ++rep) {
    auto out = runAllReduce<int32_t>(windowed, kRanks, 4096, in, RedOp::kSum, rep % 2 == 1);
    expectLeftFold(in, out, RedOp::kSum, "rep " + std::to_string(rep));
    if (HasFailure()) break;
  }
  gWindows = nullptr;
}

// More ranks than the fold keeps on the stack (64): its inputs go to the heap.
TEST(WindowAllReduce, SixtySixRanks) {
  constexpr int kRanks = 66;
  HeapWindows windows(kRanks, 4096);
  gWindows = &windows;
  auto in = makeInputs<int32_t>(kRanks, 1000, [](int r, size_t i) { return integerValue<int32_t>(r, i); });
  auto out = runAllReduce<int32_t>(windowed, kRanks, 4096, in, RedOp::kSum, false);
  expectLeftFold(in, out, RedOp::kSum, "66 ranks");
  gWindows = nullptr;
}

TEST(WindowAllReduce, ReportsAMismatchedPeerInsteadOfCorrupting) {
  // Rank 1 calls with a different count: both ranks must fail with a
  // message naming the other, not read past a window or hang.
  HeapWindows windows(2, 4096);
  std::vector<std::vector<int32_t>> buf(2, std::vector<int32_t>(8, 1));
  Status status[2];
  runRanks(2, 4096, 2, [&](const AlgoContext& ctx) {
    AlgoContext withWindows = ctx;
    withWindows.windows = windows.of(ctx.rank);
    CollArgs a{CollType::kAllReduce, buf[ctx.rank].data(), buf[ctx.rank].data(), ctx.rank == 0 ? size_t{8} : size_t{4},
               DataType::kInt32, RedOp::kSum, 0};
    status[ctx.rank] = windowAllReduce(a, withWindows);
    return Status::ok();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(status[r].code(), Code::kInvalidUsage) << status[r].message();
    EXPECT_NE(status[r].message().find("rank " + std::to_string(1 - r) + " ended phase"), std::string::npos)
        << status[r].message();
  }
}

TEST(WindowAllReduce, AppliesOnlyWithSharedWindows) {
  HeapWindows windows(2, 4096);
  AlgoContext ctx;
  ctx.nranks = 2;
  CollArgs args{CollType::kAllReduce, nullptr, nullptr, 1024, DataType::kFloat32, RedOp::kSum, 0};
  EXPECT_FALSE(windowAllReduceApplies(args, ctx));
  ctx.windows = windows.of(0);
  EXPECT_TRUE(windowAllReduceApplies(args, ctx));
}

}  // namespace
}  // namespace loom::algo
