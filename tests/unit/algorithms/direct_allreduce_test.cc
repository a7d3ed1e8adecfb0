// Direct all-reduce over shared windows in the heap (ranks as threads, so
// the direct copies are plain copies between their buffers): world sizes
// 1..9, windows small enough that a slice takes many chunks, uneven and
// empty slices, in place and not. It folds in rank order, so every type,
// floats included, must equal the left fold bit for bit. The copies between
// processes are tested with the windows (shm_windows_test) and through
// communicators (collectives_test, LOOM_ALGO=direct).
#include <gtest/gtest.h>

#include <algorithm>
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

  // A chunk is half a window less its header, shared by the ranks: three
  // chunks per slice.
  size_t manyBytes() const { return (windowBytes() / 2 - 64) * 3; }
};

TEST_P(DirectAllReduceTest, IntegersEqualLoops) { expectIntegersAreLeftFold(direct, n(), manyBytes()); }

TEST_P(DirectAllReduceTest, FloatsEqualTheRankOrderFoldBitForBit) { expectFloatsAreLeftFold(direct, n(), manyBytes()); }

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

// Peers read this rank's input and write its output: when the call returns,
// they must be done with both. Each rank takes its output at once and then
// scribbles over both buffers, as a caller reusing them would; a rank that
// returned while a peer still wrote its output or read its input shows up as
// a wrong element in some rank's copy.
TEST(DirectAllReduce, BuffersAreFreeWhenTheCallReturns) {
  constexpr int kRanks = 4;
  constexpr size_t kCount = 40000;
  HeapWindows windows(kRanks, 64 * 1024, true);
  auto in = makeInputs<int32_t>(kRanks, kCount, [](int r, size_t i) { return integerValue<int32_t>(r, i); });
  for (int rep = 0; rep < 20; ++rep) {
    auto send = in;
    std::vector<std::vector<int32_t>> out(kRanks, std::vector<int32_t>(kCount)), taken(kRanks);
    const bool inPlace = rep % 2 == 1;
    runRanks(kRanks, 4096, 2, [&](const AlgoContext& ctx) {
      AlgoContext withCopies = ctx;
      withCopies.windows = windows.of(ctx.rank);
      withCopies.peerCopies = true;
      auto& mine = inPlace ? send[ctx.rank] : out[ctx.rank];
      CollArgs a{CollType::kAllReduce, send[ctx.rank].data(), mine.data(), kCount, DataType::kInt32, RedOp::kSum, 0};
      Status status = directAllReduce(a, withCopies);
      taken[ctx.rank] = mine;
      std::fill(send[ctx.rank].begin(), send[ctx.rank].end(), -1);
      std::fill(out[ctx.rank].begin(), out[ctx.rank].end(), -1);
      return status;
    });
    expectLeftFold(in, taken, RedOp::kSum, "rep " + std::to_string(rep) + (inPlace ? " in place" : ""));
    if (HasFailure()) break;
  }
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
