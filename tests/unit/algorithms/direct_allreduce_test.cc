// Direct all-reduce over shared windows in the heap (ranks as threads, so
// the direct copies are plain copies between their buffers): world sizes
// 1..9, windows small enough that a slice takes many chunks, uneven and
// empty slices, in place and not. It folds in rank order, so every type,
// floats included, must equal the left fold bit for bit. The copies between
// processes are tested with the windows (shm_windows_test) and through
// communicators (collectives_test, LOOM_ALGO=direct).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "algorithms/direct_allreduce.h"
#include "tests/unit/algorithms/fold_reference.h"
#include "tests/unit/algorithms/heap_windows.h"

namespace loom::algo {
namespace {

using namespace testref;
using loom::testing::HeapWindows;

// The windows of the test running now (runAllReduce takes a plain function).
const HeapWindows* gWindows = nullptr;

Status direct(const CollArgs& args, const AlgoContext& ctx) {
  AlgoContext withCopies = ctx;
  withCopies.windows = gWindows->of(ctx.rank);
  withCopies.peerCopies = true;
  return directAllReduce(args, withCopies);
}

class DirectAllReduceTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {
 protected:
  void SetUp() override {
    windows_ = std::make_unique<HeapWindows>(n(), windowBytes(), true);
    gWindows = windows_.get();
  }
  void TearDown() override { gWindows = nullptr; }

  int n() const { return std::get<0>(GetParam()); }
  size_t windowBytes() const { return std::get<1>(GetParam()); }
  std::unique_ptr<HeapWindows> windows_;

  template <class T>
  void check(std::initializer_list<RedOp> ops, bool mixedFloats) {
    // A chunk is half a window less its header, shared by the ranks: several per slice.
    const size_t chunkElems = (windowBytes() / 2 - 64) / static_cast<size_t>(n()) / sizeof(T);
    for (size_t count : interestingCounts(chunkElems * static_cast<size_t>(n()) * 3)) {
      for (RedOp op : ops) {
        auto in = makeInputs<T>(n(), count, [&](int r, size_t i) {
          return mixedFloats ? fromDouble<T>(mixedValue<T>(op, r, i)) : integerValue<T>(r, i);
        });
        for (bool inPlace : {false, true}) {
          auto out = runAllReduce<T>(direct, n(), 4096, in, op, inPlace);
          expectLeftFold(in, out, op,
                         std::string(dataTypeName(Elem<T>::kType)) + " " + redOpName(op) + " count " +
                             std::to_string(count) + (inPlace ? " in place" : " out of place"));
          if (HasFatalFailure()) return;
        }
      }
    }
  }
};

constexpr std::initializer_list<RedOp> kAllOps = {RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax,
                                                  RedOp::kAvg};

TEST_P(DirectAllReduceTest, IntegersEqualLoops) {
  check<int64_t>(kAllOps, false);
  check<uint8_t>({RedOp::kSum, RedOp::kProd, RedOp::kAvg}, false);
}

TEST_P(DirectAllReduceTest, FloatsEqualTheRankOrderFoldBitForBit) {
  check<float>(kAllOps, true);
  check<double>({RedOp::kSum, RedOp::kAvg}, true);
  check<F16>({RedOp::kSum, RedOp::kProd, RedOp::kAvg}, true);
  check<BF16>({RedOp::kSum, RedOp::kMax, RedOp::kAvg}, true);
}

// 1 KiB windows: chunks of a few elements; 8 KiB: chunks of hundreds.
INSTANTIATE_TEST_SUITE_P(WorldsAndWindows, DirectAllReduceTest,
                         ::testing::Combine(::testing::Range(1, 10), ::testing::Values(size_t{1024}, size_t{8192})),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_window" +
                                  std::to_string(std::get<1>(info.param));
                         });

// Calls back to back with every rank's phase ends racing: a rank that
// returned while a peer still wrote into its output, or rewrote its header
// while a peer still read it, would show up as a wrong element here.
TEST(DirectAllReduce, ManyCallsStayExactUnderContention) {
  constexpr int kRanks = 6;
  HeapWindows windows(kRanks, 1024, true);
  gWindows = &windows;
  auto in = makeInputs<int32_t>(kRanks, 5000, [](int r, size_t i) { return integerValue<int32_t>(r, i); });
  for (int rep = 0; rep < 40; ++rep) {
    auto out = runAllReduce<int32_t>(direct, kRanks, 4096, in, RedOp::kSum, rep % 2 == 1);
    expectLeftFold(in, out, RedOp::kSum, "rep " + std::to_string(rep));
    if (HasFailure()) break;
  }
  gWindows = nullptr;
}

TEST(DirectAllReduce, ReportsAMismatchedPeerInsteadOfCorrupting) {
  // Rank 1 calls with a different count: both ranks must fail with a
  // message naming the other, not copy past a buffer or hang.
  HeapWindows windows(2, 4096, true);
  std::vector<std::vector<int32_t>> buf(2, std::vector<int32_t>(8, 1));
  Status status[2];
  runRanks(2, 4096, 2, [&](const AlgoContext& ctx) {
    AlgoContext withCopies = ctx;
    withCopies.windows = windows.of(ctx.rank);
    withCopies.peerCopies = true;
    CollArgs a{CollType::kAllReduce, buf[ctx.rank].data(), buf[ctx.rank].data(), ctx.rank == 0 ? size_t{8} : size_t{4},
               DataType::kInt32, RedOp::kSum, 0};
    status[ctx.rank] = directAllReduce(a, withCopies);
    return Status::ok();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(status[r].code(), Code::kInvalidUsage) << status[r].message();
    EXPECT_NE(status[r].message().find("rank " + std::to_string(1 - r) + " ended phase"), std::string::npos)
        << status[r].message();
  }
  // Nothing was copied: the peers' buffers were never published to each other.
  for (int r = 0; r < 2; ++r) EXPECT_EQ(buf[r], std::vector<int32_t>(8, 1)) << "rank " << r;
}

TEST(DirectAllReduce, AppliesOnlyWithDirectCopies) {
  HeapWindows windows(2, 4096, true);
  AlgoContext ctx;
  ctx.nranks = 2;
  CollArgs args{CollType::kAllReduce, nullptr, nullptr, 1024, DataType::kFloat32, RedOp::kSum, 0};
  EXPECT_FALSE(directAllReduceApplies(args, ctx));
  ctx.windows = windows.of(0);
  EXPECT_FALSE(directAllReduceApplies(args, ctx));
  ctx.peerCopies = true;
  EXPECT_TRUE(directAllReduceApplies(args, ctx));
}

}  // namespace
}  // namespace loom::algo
