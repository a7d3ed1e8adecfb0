// TensorParallelMlp on T = 2 and 4 ranks (threads) trains like the unsplit
// Mlp: after 3 SGD steps on the same batches the gathered parameters agree
// within 1e-5 relative to the largest parameter (the all-reduces
// re-associate sums), while training moved them by far more than that.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ddp/model/mlp.h"
#include "ddp/optimizer.h"
#include "ddp/parallel/tensor_parallel_mlp.h"
#include "tests/unit/ddp/distributed/grad_patterns.h"
#include "tests/unit/ddp/distributed/world.h"

namespace loom::ddp {
namespace {

using testing::gradPattern;
using testing::RankContext;

const MlpOptions kModel{{10, 16, 8, 4}, Activation::kRelu};  // two hidden layers: one column/row pair
constexpr size_t kBatch = 6;
constexpr int kSteps = 3;

std::vector<float> images(int step) {
  std::vector<float> x(kBatch * kModel.layers.front());
  for (size_t i = 0; i < x.size(); ++i) x[i] = 2.0f * gradPattern(4, step, i);
  return x;
}
std::vector<uint8_t> labels(int step) {
  std::vector<uint8_t> y(kBatch);
  for (size_t b = 0; b < kBatch; ++b) y[b] = static_cast<uint8_t>((b * 5 + step) % kModel.layers.back());
  return y;
}

template <class Model>
void train(Model& model, ParameterStore& store) {
  auto sgd = makeSgd({.lr = 0.2f, .momentum = 0.9f});
  for (int step = 0; step < kSteps; ++step) {
    store.zeroGrads();
    model.forward(images(step), kBatch);
    model.loss(labels(step));
    model.backward();
    sgd->step(store.values(), store.grads());
  }
}

void checkTensorParallelMlp(const RankContext& w) {
  ParameterStore refStore;
  Mlp ref(refStore, kModel);
  refStore.finalize();
  ref.initialize(7);
  const std::vector<float> initial(refStore.values().begin(), refStore.values().end());
  train(ref, refStore);

  ParameterStore store;
  TensorParallelMlp model(store, kModel, w.comm);
  store.finalize();
  model.initialize(7);
  EXPECT_EQ(model.fullParameters(), initial) << "rank " << w.rank << ": initial slices do not reassemble Mlp's";
  train(model, store);
  const std::vector<float> got = model.fullParameters();
  ASSERT_EQ(got.size(), initial.size());
  double scale = 0, worst = 0, moved = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(refStore.values()[i])));
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - refStore.values()[i]));
    moved = std::max(moved, std::fabs(static_cast<double>(refStore.values()[i]) - initial[i]));
  }
  EXPECT_LE(worst, 1e-5 * scale) << "rank " << w.rank << " of " << w.nranks;
  EXPECT_GT(moved, 100 * 1e-5 * scale) << "training barely moved the parameters";
}

class TensorParallelMlpTest : public ::testing::TestWithParam<int> {};
TEST_P(TensorParallelMlpTest, TrainsLikeTheUnsplitMlp) { testing::runThreads(GetParam(), checkTensorParallelMlp); }
INSTANTIATE_TEST_SUITE_P(Sizes, TensorParallelMlpTest, ::testing::Values(2, 4));

TEST(TensorParallelMlpErrors, OddNumberOfHiddenLayersIsRejected) {
  testing::runThreads(2, [](const RankContext& w) {
    ParameterStore store;
    EXPECT_THROW(TensorParallelMlp(store, MlpOptions{{10, 16, 4}, Activation::kRelu}, w.comm), std::invalid_argument);
  });
}

}  // namespace
}  // namespace loom::ddp
