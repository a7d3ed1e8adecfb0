// The 1F1B pipeline: the schedule's defining properties (checked from the
// action lists, for P up to 5 and M up to 9), and the executor over
// loomSend/loomRecv with ranks as threads: every stage runs exactly its
// schedule, and the stages' gradients and loss equal those of the unsplit
// Mlp on the whole batch (within 1e-5 relative to the largest gradient:
// micro-batches re-associate the sums over rows).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "ddp/distributed/distributed_data_parallel.h"
#include "ddp/model/mlp.h"
#include "ddp/optimizer.h"
#include "ddp/parallel/process_mesh.h"
#include "ddp/parallel/pipeline_mlp_stage.h"
#include "ddp/parallel/pipeline_schedule.h"
#include "tests/unit/ddp/distributed/grad_patterns.h"
#include "tests/unit/ddp/distributed/world.h"

namespace loom::ddp {
namespace {

using testing::gradPattern;
using testing::RankContext;

TEST(OneForwardOneBackward, ScheduleProperties) {
  for (int stages = 1; stages <= 5; ++stages) {
    for (size_t m = 1; m <= 9; ++m) {
      for (int s = 0; s < stages; ++s) {
        const std::vector<PipeAction> a = oneForwardOneBackward(s, stages, m);
        SCOPED_TRACE("stage " + std::to_string(s) + " of " + std::to_string(stages) + ", " + std::to_string(m) + " micro-batches");
        ASSERT_EQ(a.size(), 2 * m);
        size_t nextF = 0, nextB = 0, inFlight = 0, maxInFlight = 0, forwardsBeforeFirstBackward = 0;
        bool sawBackward = false;
        for (const PipeAction& x : a) {
          if (x.op == PipeOp::kForward) {
            EXPECT_EQ(x.microBatch, nextF++) << "forwards run in micro-batch order";
            maxInFlight = std::max(maxInFlight, ++inFlight);
            if (!sawBackward) ++forwardsBeforeFirstBackward;
          } else {
            EXPECT_EQ(x.microBatch, nextB++) << "backwards run in micro-batch order";
            EXPECT_LT(x.microBatch, nextF) << "a backward before its forward";
            --inFlight;
            sawBackward = true;
          }
        }
        const size_t depth = std::min(static_cast<size_t>(stages - s), m);
        // 1F1B: the first backward comes as soon as the pipeline is full, and
        // no more micro-batches than that are ever kept.
        EXPECT_EQ(forwardsBeforeFirstBackward, depth);
        EXPECT_EQ(maxInFlight, depth);
      }
    }
  }
  EXPECT_DOUBLE_EQ(theoreticalBubble(4, 8), 3.0 / 11.0);
  EXPECT_THROW(oneForwardOneBackward(2, 2, 4), std::invalid_argument);
  EXPECT_THROW(oneForwardOneBackward(0, 2, 0), std::invalid_argument);
}

TEST(StageLayers, SplitsEvenlyEarlierStagesTakeTheExtra) {
  EXPECT_EQ(stageLayers(5, 0, 2).first, 0u);
  EXPECT_EQ(stageLayers(5, 0, 2).last, 3u);
  EXPECT_EQ(stageLayers(5, 1, 2).first, 3u);
  EXPECT_EQ(stageLayers(5, 1, 2).last, 5u);
  EXPECT_THROW(stageLayers(3, 0, 4), std::invalid_argument);
  // Column/row pairs stay together: 5 layers = 2 pairs + the classifier.
  EXPECT_EQ(stageLayers(5, 0, 2, true).last, 4u);
  EXPECT_EQ(stageLayers(5, 1, 2, true).first, 4u);
  EXPECT_EQ(stageLayers(5, 1, 2, true).last, 5u);
  EXPECT_EQ(stageLayers(3, 1, 2, true).first, 2u);
  EXPECT_THROW(stageLayers(4, 0, 2, true), std::invalid_argument);
}

const MlpOptions kModel{{12, 20, 16, 12, 4}, Activation::kGelu};  // 4 layers
constexpr size_t kBatch = 16;
constexpr uint64_t kSeed = 3;

std::vector<float> images() {
  std::vector<float> x(kBatch * kModel.layers.front());
  for (size_t i = 0; i < x.size(); ++i) x[i] = 2.0f * gradPattern(9, 1, i);
  return x;
}
std::vector<uint8_t> labels() {
  std::vector<uint8_t> y(kBatch);
  for (size_t b = 0; b < kBatch; ++b) y[b] = static_cast<uint8_t>((b * 7 + 3) % kModel.layers.back());
  return y;
}

void checkPipeline(int stages, size_t microBatches) {
  // The reference: the whole Mlp on the whole batch.
  ParameterStore refStore;
  Mlp ref(refStore, kModel);
  refStore.finalize();
  ref.initialize(kSeed);
  const std::vector<float> x = images();
  const std::vector<uint8_t> y = labels();
  ref.forward(x, kBatch);
  const double refLoss = static_cast<double>(ref.loss(y)) * kBatch;
  ref.backward();
  const std::vector<float> want(refStore.grads().begin(), refStore.grads().end());
  double scale = 0;
  for (float g : want) scale = std::max(scale, std::fabs(static_cast<double>(g)));

  std::vector<float> got(want.size(), NAN);
  double gotLoss = -1;
  std::mutex mu;
  testing::runThreads(stages, [&](const RankContext& w) {
    ParameterStore store;
    PipelineMlpStage stage(store, kModel, w.rank, stages);
    store.finalize();
    stage.initialize(kSeed);
    std::vector<size_t> markedOrder;
    store.setGradReadyHook([&](size_t i) { markedOrder.push_back(i); });
    stage.beginStep(stage.firstStage() ? std::span<const float>(x) : std::span<const float>(),
                    stage.lastStage() ? std::span<const uint8_t>(y) : std::span<const uint8_t>(), kBatch, microBatches, true);
    std::vector<PipeAction> trace;
    const PipelineTiming t = runOneForwardOneBackward(w.comm, microBatches, stage, &trace);
    EXPECT_EQ(trace, oneForwardOneBackward(w.rank, stages, microBatches)) << "stage " << w.rank;
    EXPECT_GE(t.bubble(), 0.0);
    EXPECT_EQ(markedOrder.size(), store.count()) << "every parameter marked ready exactly once";
    // This stage's parameters sit where Mlp keeps the same layers.
    const size_t offset = refStore.info(2 * stage.layers().first).offset;
    std::lock_guard<std::mutex> lock(mu);
    std::copy(store.grads().begin(), store.grads().end(), got.begin() + offset);
    if (stage.lastStage()) gotLoss = stage.lossSum();
  });
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
  EXPECT_LE(worst, 1e-5 * scale) << stages << " stages, " << microBatches << " micro-batches (largest gradient " << scale << ")";
  EXPECT_NEAR(gotLoss, refLoss, 1e-5 * std::fabs(refLoss));
}

class Pipeline : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

TEST_P(Pipeline, GradientsMatchTheUnsplitModel) {
  const auto [stages, microBatches] = GetParam();
  checkPipeline(stages, microBatches);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Pipeline,
                         ::testing::Values(std::make_tuple(1, size_t{4}), std::make_tuple(2, size_t{1}),
                                           std::make_tuple(2, size_t{4}), std::make_tuple(3, size_t{5}),
                                           std::make_tuple(4, size_t{4}), std::make_tuple(4, size_t{16})));

// The hybrid mesh: DP x TP x PP ranks (threads), the pipeline's stages
// tensor-parallel and DDP over the data-parallel group, two SGD steps on a
// global batch that the DP replicas split; the gathered parameters equal
// the unsplit Mlp's after the same steps on the whole batch (within 1e-5
// relative to the largest parameter).
void checkMesh(const RankContext& w, MeshShape shape) {
  const MlpOptions model{{12, 16, 8, 12, 8, 4}, Activation::kGelu};  // 2 column/row pairs + classifier
  constexpr size_t kGlobal = 16;
  constexpr uint64_t kMeshSeed = 5;
  auto batchOf = [&](int step, std::vector<float>* x, std::vector<uint8_t>* y) {
    x->resize(kGlobal * model.layers.front());
    for (size_t i = 0; i < x->size(); ++i) (*x)[i] = 2.0f * gradPattern(40, step, i);
    y->resize(kGlobal);
    for (size_t b = 0; b < kGlobal; ++b) (*y)[b] = static_cast<uint8_t>((b * 3 + step) % model.layers.back());
  };
  ParameterStore refStore;
  Mlp ref(refStore, model);
  refStore.finalize();
  ref.initialize(kMeshSeed);
  auto refSgd = makeSgd({.lr = 0.2f, .momentum = 0.9f});
  std::vector<float> x;
  std::vector<uint8_t> y;
  for (int step = 0; step < 2; ++step) {
    batchOf(step, &x, &y);
    refStore.zeroGrads();
    ref.forward(x, kGlobal);
    ref.loss(y);
    ref.backward();
    refSgd->step(refStore.values(), refStore.grads());
  }

  ProcessMesh mesh(w.comm, shape);
  ParameterStore store;
  PipelineMlpStage stage(store, model, mesh.coords().pp, shape.pp, mesh.tp());
  store.finalize();
  stage.initialize(kMeshSeed);
  DistributedDataParallel ddp(mesh.dp(), store);
  auto sgd = makeSgd({.lr = 0.2f, .momentum = 0.9f});
  const size_t local = kGlobal / shape.dp, width = model.layers.front();
  for (int step = 0; step < 2; ++step) {
    batchOf(step, &x, &y);
    const size_t first = mesh.coords().dp * local;
    stage.beginStep(stage.firstStage() ? std::span<const float>(x).subspan(first * width, local * width) : std::span<const float>(),
                    stage.lastStage() ? std::span<const uint8_t>(y).subspan(first, local) : std::span<const uint8_t>(),
                    local, 4, true);
    runOneForwardOneBackward(mesh.pp(), 4, stage);
    ddp.finishGradientSync();
    sgd->step(store.values(), store.grads());
  }
  const std::vector<float> got = stage.fullStageParameters();
  const size_t offset = refStore.info(2 * stage.layers().first).offset;
  double scale = 0, worst = 0;
  for (float v : refStore.values()) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - refStore.values()[offset + i]));
  EXPECT_LE(worst, 1e-5 * scale) << "rank " << w.rank << " (" << shape.text() << ", stage " << mesh.coords().pp << ")";
}

TEST(HybridMesh, TensorParallelTimesPipelineFourRanks) {
  testing::runThreads(4, [](const RankContext& w) { checkMesh(w, {.dp = 1, .tp = 2, .pp = 2}); });
}

TEST(HybridMesh, DataTimesTensorTimesPipelineEightRanks) {
  testing::runThreads(8, [](const RankContext& w) { checkMesh(w, {.dp = 2, .tp = 2, .pp = 2}); });
}

// The same with ranks as processes (ctest: loomrun -n 4): TP2 x PP2.
TEST(ProcessHybridMesh, TensorParallelTimesPipeline) {
  testing::runProcess([](const RankContext& w) {
    if (w.nranks != 4) GTEST_SKIP() << "needs 4 ranks, got " << w.nranks;
    checkMesh(w, {.dp = 1, .tp = 2, .pp = 2});
  });
}

}  // namespace
}  // namespace loom::ddp
