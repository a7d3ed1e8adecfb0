// Data-parallel equivalence: N ranks with per-rank batch B/N reach the same parameters
// as one rank with batch B after k steps, for plain DDP, with the fp16 and
// bf16 hooks (looser tolerance), and with ZeRO stages 1 and 2. The model is
// the demo's Mlp; the one-rank reference trains the same Mlp locally (no
// Loom at all) on the whole batch.
//
// Tolerances (largest absolute difference of any parameter; parameters are
// <= ~0.5 and training moves them by up to 0.027 in k = 4 SGD steps with
// lr 0.1 and momentum 0.9; measured worst differences in brackets):
//   plain DDP, ZeRO-1, ZeRO-2: 1e-6 (only float summation order differs) [3e-8];
//   fp16 hook: 1e-4 (each gradient rounded to 11 significant bits) [1.5e-5];
//   bf16 hook: 1e-3 (8 significant bits) [2.5e-4].
// Each case also checks that training moved the parameters by over 20 times
// its tolerance, so agreement is not trivial.
#include <gtest/gtest.h>

#include <cmath>

#include "ddp/distributed/distributed_data_parallel.h"
#include "ddp/distributed/sharded_optimizer.h"
#include "ddp/model/mlp.h"
#include "tests/unit/ddp/distributed/grad_patterns.h"
#include "tests/unit/ddp/distributed/world.h"

namespace loom::ddp {
namespace {

using testing::gradPattern;
using testing::RankContext;

enum class Mode { kDdp, kFp16, kBf16, kZero1, kZero2 };

constexpr size_t kGlobalBatch = 24;  // divisible by 1, 2, 3, 4
constexpr int kSteps = 4;
constexpr uint64_t kSeed = 5;
const MlpOptions kModel{{12, 32, 16, 4}, Activation::kGelu};

double toleranceOf(Mode mode) {
  switch (mode) {
    case Mode::kFp16: return 1e-4;
    case Mode::kBf16: return 1e-3;
    default: return 1e-6;
  }
}

// Step s's global batch: rows of inputs and their labels.
std::vector<float> inputs(int step) {
  std::vector<float> x(kGlobalBatch * kModel.layers.front());
  for (size_t i = 0; i < x.size(); ++i) x[i] = 2.0f * gradPattern(1000 + step, 0, i);
  return x;
}
std::vector<uint8_t> labels(int step) {
  std::vector<uint8_t> y(kGlobalBatch);
  for (size_t b = 0; b < kGlobalBatch; ++b)
    y[b] = static_cast<uint8_t>(static_cast<unsigned>((gradPattern(2000 + step, 0, b) + 1.0f) * 1000) % kModel.layers.back());
  return y;
}

SgdOptions sgd() { return {.lr = 0.1f, .momentum = 0.9f}; }

// One rank, batch B: the reference.
std::vector<float> trainAlone(std::vector<float>* initial) {
  ParameterStore store;
  Mlp mlp(store, kModel);
  store.finalize();
  mlp.initialize(kSeed);
  initial->assign(store.values().begin(), store.values().end());
  auto optimizer = makeSgd(sgd());
  for (int step = 0; step < kSteps; ++step) {
    store.zeroGrads();
    mlp.forward(inputs(step), kGlobalBatch);
    mlp.loss(labels(step));
    mlp.backward();
    optimizer->step(store.values(), store.grads());
  }
  return {store.values().begin(), store.values().end()};
}

void trainDistributed(const RankContext& w, Mode mode) {
  ASSERT_EQ(kGlobalBatch % w.nranks, 0u);
  const size_t local = kGlobalBatch / w.nranks;
  ParameterStore store;
  Mlp mlp(store, kModel);
  store.finalize();
  // Different seeds per rank: DDP's (and ZeRO's) broadcast must make them equal.
  mlp.initialize(w.rank == 0 ? kSeed : kSeed + 100 + w.rank);

  std::unique_ptr<DistributedDataParallel> ddp;
  if (mode != Mode::kZero2) {
    DdpOptions options;
    options.firstBucketCapBytes = 256;  // several buckets even for this small model
    options.bucketCapBytes = 1024;
    options.hook = mode == Mode::kFp16 ? CommHook::kFp16Compress
                 : mode == Mode::kBf16 ? CommHook::kBf16Compress
                                       : CommHook::kNone;
    ddp = std::make_unique<DistributedDataParallel>(w.comm, store, options);
  }
  std::unique_ptr<ShardedOptimizer> zero;
  std::unique_ptr<Optimizer> plain;
  if (mode == Mode::kZero1 || mode == Mode::kZero2)
    zero = std::make_unique<ShardedOptimizer>(w.comm, store, makeSgd(sgd()), mode == Mode::kZero1 ? 1 : 2);
  else
    plain = makeSgd(sgd());

  for (int step = 0; step < kSteps; ++step) {
    const std::vector<float> x = inputs(step);
    const std::vector<uint8_t> y = labels(step);
    const size_t width = kModel.layers.front();
    store.zeroGrads();
    mlp.forward(std::span<const float>(x).subspan(w.rank * local * width, local * width), local);
    mlp.loss(std::span<const uint8_t>(y).subspan(w.rank * local, local));
    mlp.backward();
    if (ddp) ddp->finishGradientSync();
    if (zero) zero->step();
    else plain->step(store.values(), store.grads());
  }

  std::vector<float> initial;
  const std::vector<float> want = trainAlone(&initial);
  const double tolerance = toleranceOf(mode);
  double moved = 0, worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    moved = std::max(moved, std::fabs(static_cast<double>(want[i]) - initial[i]));
    worst = std::max(worst, std::fabs(static_cast<double>(store.values()[i]) - want[i]));
  }
  EXPECT_LE(worst, tolerance) << "rank " << w.rank << " of " << w.nranks;
  EXPECT_GT(moved, 20 * tolerance) << "training barely moved the parameters; the comparison would be trivial";
}

class Equivalence : public ::testing::TestWithParam<std::tuple<Mode, int>> {};

TEST_P(Equivalence, NRanksMatchOneRankWithTheWholeBatch) {
  const auto [mode, nranks] = GetParam();
  testing::runThreads(nranks, [mode](const RankContext& w) { trainDistributed(w, mode); });
}

INSTANTIATE_TEST_SUITE_P(Modes, Equivalence,
                         ::testing::Combine(::testing::Values(Mode::kDdp, Mode::kFp16, Mode::kBf16, Mode::kZero1, Mode::kZero2),
                                            ::testing::Values(2, 4)));

// The same with ranks as processes (ctest: loomrun -n 2 and -n 4).
TEST(ProcessEquivalence, PlainDdp) { testing::runProcess([](const RankContext& w) { trainDistributed(w, Mode::kDdp); }); }
TEST(ProcessEquivalence, Fp16Hook) { testing::runProcess([](const RankContext& w) { trainDistributed(w, Mode::kFp16); }); }
TEST(ProcessEquivalence, ZeroStage1) { testing::runProcess([](const RankContext& w) { trainDistributed(w, Mode::kZero1); }); }
TEST(ProcessEquivalence, ZeroStage2) { testing::runProcess([](const RankContext& w) { trainDistributed(w, Mode::kZero2); }); }

}  // namespace
}  // namespace loom::ddp
