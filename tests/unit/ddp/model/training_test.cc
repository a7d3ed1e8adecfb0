// End to end: an Mlp with each optimizer learns an XOR-like data set (label =
// whether x and y share a sign), which no linear model can fit, so a falling
// loss shows forward, backward and the update working together.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "ddp/model/mlp.h"
#include "ddp/optimizer.h"
#include "ddp/parameter_store.h"

namespace loom::ddp {
namespace {

struct DataSet {
  std::vector<float> points;  // x, y pairs
  std::vector<uint8_t> labels;
};

DataSet xorQuadrants(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> coord(-1.0f, 1.0f);
  DataSet d;
  while (d.labels.size() < n) {
    const float x = coord(rng), y = coord(rng);
    if (std::abs(x) < 0.1f || std::abs(y) < 0.1f) continue;  // a margin keeps the task exactly learnable
    d.points.push_back(x);
    d.points.push_back(y);
    d.labels.push_back(x * y > 0 ? 1 : 0);
  }
  return d;
}

struct Outcome {
  float firstEpochLoss = 0;
  float finalLoss = 0;
  size_t finalCorrect = 0;
};

Outcome train(Activation act, std::unique_ptr<Optimizer> opt, int epochs) {
  const size_t n = 256, batch = 32;
  const DataSet data = xorQuadrants(n, 77);
  ParameterStore store;
  Mlp mlp(store, {{2, 16, 16, 2}, act});
  store.finalize();
  mlp.initialize(2024);
  Outcome out;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    double epochLoss = 0;
    for (size_t start = 0; start < n; start += batch) {
      store.zeroGrads();
      mlp.forward(std::span<const float>(data.points).subspan(start * 2, batch * 2), batch);
      epochLoss += mlp.loss(std::span<const uint8_t>(data.labels).subspan(start, batch));
      mlp.backward();
      opt->step(store.values(), store.grads());
    }
    if (epoch == 0) out.firstEpochLoss = float(epochLoss / (n / batch));
  }
  mlp.forward(data.points, n);
  out.finalLoss = mlp.loss(data.labels);
  out.finalCorrect = mlp.correct(data.labels);
  return out;
}

TEST(Training, ReluMlpWithSgdMomentumLearnsXor) {
  const Outcome o = train(Activation::kRelu, makeSgd({0.1f, 0.9f, 0.0f, false}), 60);
  EXPECT_GT(o.firstEpochLoss, 0.5f);  // starts near chance (log 2 = 0.69)
  EXPECT_LT(o.finalLoss, 0.1f);
  EXPECT_GE(o.finalCorrect, 250u);  // of 256
}

TEST(Training, GeluMlpWithAdamWLearnsXor) {
  const Outcome o = train(Activation::kGelu, makeAdamW({0.01f, 0.9f, 0.999f, 1e-8f, 0.01f}), 60);
  EXPECT_GT(o.firstEpochLoss, 0.5f);
  EXPECT_LT(o.finalLoss, 0.1f);
  EXPECT_GE(o.finalCorrect, 250u);
}

}  // namespace
}  // namespace loom::ddp
