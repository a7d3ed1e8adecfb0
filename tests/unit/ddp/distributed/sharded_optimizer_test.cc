// ZeRO stages 1 and 2 against the unsharded optimizer run in the test on the
// mean gradient (computed independently in double, rounded to float), for
// SGD with momentum and AdamW, on layouts whose size is and is not a
// multiple of the world size. Gradients are bounded away from zero so that
// AdamW's normalised update is not dominated by rounding in the average.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

#include "ddp/distributed/distributed_data_parallel.h"
#include "ddp/distributed/sharded_optimizer.h"
#include "tests/unit/ddp/distributed/grad_patterns.h"
#include "tests/unit/ddp/distributed/world.h"

namespace loom::ddp {
namespace {

using testing::fakeBackward;
using testing::gradPattern;
using testing::makeStore;
using testing::meanPattern;
using testing::RankContext;
using testing::runThreads;

enum class Kind { kSgdMomentum, kAdamW };

std::unique_ptr<Optimizer> makeInner(Kind kind) {
  if (kind == Kind::kSgdMomentum) return makeSgd({.lr = 0.05f, .momentum = 0.9f, .weightDecay = 0.01f});
  return makeAdamW({.lr = 0.01f});
}
size_t arraysOf(Kind kind) { return kind == Kind::kSgdMomentum ? 1 : 2; }

const std::vector<size_t> kUneven = {37, 5, 4096, 1000, 3000, 1, 777, 2048, 129, 6000};  // 17093 elements
const std::vector<size_t> kEven = {6, 6000, 6};                                       // 6012 = 12 * 501

class Zero : public ::testing::TestWithParam<std::tuple<int, int, Kind, bool>> {};

TEST_P(Zero, MatchesTheUnshardedOptimizer) {
  const auto [stage, nranks, kind, even] = GetParam();
  const std::vector<size_t>& sizes = even ? kEven : kUneven;
  constexpr int kSteps = 4;
  constexpr double kTolerance = 1e-5;  // parameters are O(1); float rounding of the average only
  std::mutex mu;
  std::vector<size_t> stateBytes(nranks);
  size_t unshardedBytes = 0;
  runThreads(nranks, [&](const RankContext& w) {
    auto store = makeStore(sizes, w.rank);
    std::unique_ptr<DistributedDataParallel> ddp;
    if (stage == 1) ddp = std::make_unique<DistributedDataParallel>(w.comm, *store);
    ShardedOptimizer zero(w.comm, *store, makeInner(kind), stage);
    const size_t total = store->totalSize();
    // The reference: rank 0's initial values, the mean gradient, one optimizer over everything.
    std::vector<float> ref(total), meanGrad(total);
    for (size_t i = 0; i < total; ++i) ref[i] = gradPattern(0, -1, i);
    auto unsharded = makeInner(kind);
    for (int step = 0; step < kSteps; ++step) {
      store->zeroGrads();
      if (ddp) {
        fakeBackward(*store, w.rank, step, 0, true);
        ddp->finishGradientSync();
      } else {
        for (size_t i = 0; i < total; ++i) store->grads()[i] = gradPattern(w.rank, step, i, true);
      }
      zero.step();
      for (size_t i = 0; i < total; ++i) meanGrad[i] = static_cast<float>(meanPattern(w.nranks, {step}, i, true));
      unsharded->step(ref, meanGrad);
      for (size_t i = 0; i < total; ++i)
        ASSERT_NEAR(store->values()[i], ref[i], kTolerance) << "rank " << w.rank << " step " << step << " element " << i;
    }
    // Memory: this rank's shard only.
    EXPECT_EQ(zero.stateBytes(), arraysOf(kind) * zero.shardSize() * sizeof(float));
    EXPECT_LE(zero.shardSize(), (total + w.nranks - 1) / w.nranks);
    std::lock_guard<std::mutex> lock(mu);
    stateBytes[w.rank] = zero.stateBytes();
    unshardedBytes = unsharded->stateBytes();
  });
  size_t sum = 0;
  for (size_t b : stateBytes) sum += b;
  EXPECT_EQ(sum, unshardedBytes) << "the shards' state should partition the unsharded state";
}

INSTANTIATE_TEST_SUITE_P(Stages, Zero,
                         ::testing::Combine(::testing::Values(1, 2), ::testing::Values(2, 3, 4),
                                            ::testing::Values(Kind::kSgdMomentum, Kind::kAdamW), ::testing::Bool()));

// saveState gives the unsharded optimizer's layout and values; loading it
// into a fresh sharded optimizer continues bit-identically.
TEST(ZeroState, SaveIsTheFullStateAndLoadResumesExactly) {
  for (int stage : {1, 2}) {
    runThreads(3, [&](const RankContext& w) {
      auto store = makeStore(kUneven, w.rank);
      ShardedOptimizer zero(w.comm, *store, makeInner(Kind::kAdamW), stage);
      const size_t total = store->totalSize();
      std::vector<float> ref(total), meanGrad(total);
      for (size_t i = 0; i < total; ++i) ref[i] = gradPattern(0, -1, i);
      auto unsharded = makeInner(Kind::kAdamW);
      auto setGrads = [&](ParameterStore& s, int step) {
        // Stage 1 expects averaged gradients: give it the mean directly.
        for (size_t i = 0; i < total; ++i)
          s.grads()[i] = stage == 1 ? static_cast<float>(meanPattern(w.nranks, {step}, i, true)) : gradPattern(w.rank, step, i, true);
      };
      for (int step = 0; step < 3; ++step) {
        setGrads(*store, step);
        zero.step();
        for (size_t i = 0; i < total; ++i) meanGrad[i] = static_cast<float>(meanPattern(w.nranks, {step}, i, true));
        unsharded->step(ref, meanGrad);
      }
      const std::vector<float> full = zero.saveState();
      const std::vector<float> want = unsharded->saveState();
      ASSERT_EQ(full.size(), want.size());
      EXPECT_EQ(full[0], want[0]);
      EXPECT_EQ(full[1], want[1]);  // step count, exact
      for (size_t i = 2; i < full.size(); ++i) ASSERT_NEAR(full[i], want[i], 1e-5) << "state float " << i;

      // A second replica restored from the checkpoint.
      auto restoredStore = makeStore(kUneven, w.rank);
      std::copy(store->values().begin(), store->values().end(), restoredStore->values().begin());
      ShardedOptimizer restored(w.comm, *restoredStore, makeInner(Kind::kAdamW), stage);
      restored.loadState(full);
      for (int step = 3; step < 5; ++step) {
        setGrads(*store, step);
        setGrads(*restoredStore, step);
        zero.step();
        restored.step();
      }
      for (size_t i = 0; i < total; ++i)
        ASSERT_EQ(store->values()[i], restoredStore->values()[i]) << "rank " << w.rank << " element " << i;
    });
  }
}

TEST(ZeroState, RejectsBadInput) {
  runThreads(2, [](const RankContext& w) {
    auto store = makeStore({10, 7}, w.rank);
    EXPECT_THROW(ShardedOptimizer(w.comm, *store, makeInner(Kind::kAdamW), 3), std::invalid_argument);
    EXPECT_THROW(ShardedOptimizer(w.comm, *store, nullptr, 1), std::invalid_argument);
    ShardedOptimizer zero(w.comm, *store, makeInner(Kind::kAdamW), 2);
    std::vector<float> wrong(2 + 16, 0.0f);  // 16 is not a multiple of the 17 elements
    EXPECT_THROW(zero.loadState(wrong), std::invalid_argument);
  });
}

// A model smaller than the world: some ranks own no elements at all.
TEST(ZeroState, RanksWithEmptyShards) {
  runThreads(4, [](const RankContext& w) {
    auto store = makeStore({3, 2}, w.rank);  // 5 elements, shard 2: ranks own 2, 2, 1, 0
    ShardedOptimizer zero(w.comm, *store, makeInner(Kind::kSgdMomentum), 2);
    std::vector<float> ref(5);
    for (size_t i = 0; i < 5; ++i) ref[i] = gradPattern(0, -1, i);
    auto unsharded = makeInner(Kind::kSgdMomentum);
    std::vector<float> mean(5);
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < 5; ++i) store->grads()[i] = gradPattern(w.rank, step, i, true);
      for (size_t i = 0; i < 5; ++i) mean[i] = static_cast<float>(meanPattern(4, {step}, i, true));
      zero.step();
      unsharded->step(ref, mean);
    }
    for (size_t i = 0; i < 5; ++i) EXPECT_NEAR(store->values()[i], ref[i], 1e-6);
    EXPECT_EQ(zero.shardSize(), std::vector<size_t>({2, 2, 1, 0})[w.rank]);
    const auto full = zero.saveState();
    const auto want = unsharded->saveState();
    ASSERT_EQ(full.size(), want.size());
    for (size_t i = 0; i < full.size(); ++i) EXPECT_NEAR(full[i], want[i], 1e-6);
  });
}

}  // namespace
}  // namespace loom::ddp
