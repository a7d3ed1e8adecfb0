// Mlp against an independent double-precision reference written here: its
// gradients against central finite differences of that reference, its loss
// against hand-computed numbers, and backward's contract with DDP (the order
// of markGradReady, gradients final when marked, "+=" accumulation).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "ddp/model/mlp.h"
#include "ddp/parameter_store.h"

namespace loom::ddp {
namespace {

// Forward + mean cross-entropy in double, from flat parameters laid out as
// the Mlp registers them (fc0.weight, fc0.bias, fc1.weight, ...).
double referenceLoss(const std::vector<size_t>& widths, Activation act, const std::vector<double>& params,
                     const std::vector<float>& input, const std::vector<uint8_t>& labels) {
  const size_t batch = labels.size();
  std::vector<double> a(input.begin(), input.end());
  size_t offset = 0;
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    const size_t in = widths[l], out = widths[l + 1];
    const double* w = params.data() + offset;
    const double* b = w + in * out;
    offset += in * out + out;
    std::vector<double> z(batch * out);
    for (size_t r = 0; r < batch; ++r) {
      for (size_t o = 0; o < out; ++o) {
        double s = b[o];
        for (size_t i = 0; i < in; ++i) s += a[r * in + i] * w[o * in + i];
        const bool hidden = l + 2 < widths.size();
        if (hidden) s = act == Activation::kRelu ? std::max(s, 0.0) : 0.5 * s * (1.0 + std::erf(s / std::sqrt(2.0)));
        z[r * out + o] = s;
      }
    }
    a = std::move(z);
  }
  const size_t classes = widths.back();
  double total = 0;
  for (size_t r = 0; r < batch; ++r) {
    double sum = 0;
    for (size_t c = 0; c < classes; ++c) sum += std::exp(a[r * classes + c]);
    total += std::log(sum) - a[r * classes + labels[r]];
  }
  return total / double(batch);
}

struct Problem {
  std::vector<float> input;
  std::vector<uint8_t> labels;
};

Problem randomProblem(size_t batch, size_t in, size_t classes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  Problem p;
  p.input.resize(batch * in);
  for (float& v : p.input) v = value(rng);
  for (size_t r = 0; r < batch; ++r) p.labels.push_back(uint8_t(rng() % classes));
  return p;
}

void checkGradientsAgainstFiniteDifferences(Activation act) {
  const std::vector<size_t> widths = {6, 5, 4, 3};
  ParameterStore store;
  Mlp mlp(store, {widths, act});
  store.finalize();
  mlp.initialize(7);
  const Problem p = randomProblem(7, widths.front(), widths.back(), 11);

  mlp.forward(p.input, 7);
  const float loss = mlp.loss(p.labels);
  mlp.backward();

  std::vector<double> params(store.values().begin(), store.values().end());
  EXPECT_NEAR(loss, referenceLoss(widths, act, params, p.input, p.labels), 1e-5);
  const double h = 1e-6;
  size_t checked = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    const double saved = params[k];
    params[k] = saved + h;
    const double up = referenceLoss(widths, act, params, p.input, p.labels);
    params[k] = saved - h;
    const double down = referenceLoss(widths, act, params, p.input, p.labels);
    params[k] = saved;
    const double numeric = (up - down) / (2 * h);
    EXPECT_NEAR(store.grads()[k], numeric, 2e-5 + 1e-3 * std::abs(numeric)) << "parameter element " << k;
    ++checked;
  }
  EXPECT_EQ(checked, 6u * 5 + 5 + 5 * 4 + 4 + 4 * 3 + 3);
}

TEST(Mlp, GradientsMatchFiniteDifferencesRelu) { checkGradientsAgainstFiniteDifferences(Activation::kRelu); }
TEST(Mlp, GradientsMatchFiniteDifferencesGelu) { checkGradientsAgainstFiniteDifferences(Activation::kGelu); }

TEST(Mlp, RegistersTorchLinearNamesAndShapesInForwardOrder) {
  ParameterStore store;
  Mlp mlp(store, {{784, 256, 10}});
  EXPECT_EQ(mlp.numLayers(), 2u);
  ASSERT_EQ(store.count(), 4u);
  EXPECT_EQ(store.info(0).name, "fc0.weight");
  EXPECT_EQ(store.info(0).shape, (std::vector<size_t>{256, 784}));
  EXPECT_EQ(store.info(1).name, "fc0.bias");
  EXPECT_EQ(store.info(1).shape, (std::vector<size_t>{256}));
  EXPECT_EQ(store.info(2).name, "fc1.weight");
  EXPECT_EQ(store.info(2).shape, (std::vector<size_t>{10, 256}));
  EXPECT_EQ(store.info(3).name, "fc1.bias");
  EXPECT_EQ(store.totalSize(), 784u * 256 + 256 + 256 * 10 + 10);
}

TEST(Mlp, InitializeIsDeterministicAndBoundedByInverseSqrtFanIn) {
  auto build = [](uint64_t seed) {
    ParameterStore store;
    Mlp mlp(store, {{100, 16, 4}});
    store.finalize();
    mlp.initialize(seed);
    return std::vector<float>(store.values().begin(), store.values().end());
  };
  const auto a = build(5), b = build(5), c = build(6);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // fc0 (fan-in 100): bound 0.1 for weight and bias; fc1 (fan-in 16): 0.25.
  const size_t fc0 = 100 * 16 + 16;
  float max0 = 0, max1 = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    float& largest = i < fc0 ? max0 : max1;
    largest = std::max(largest, std::abs(a[i]));
  }
  EXPECT_LE(max0, 0.1f);
  EXPECT_GT(max0, 0.09f);  // spread over the whole range, not a smaller one
  EXPECT_LE(max1, 0.25f);
  EXPECT_GT(max1, 0.2f);
}

TEST(Mlp, LossAndCorrectOnHandComputedLogits) {
  // One 3x3 layer with W = I and b = 0 passes the input through as logits.
  ParameterStore store;
  Mlp mlp(store, {{3, 3}});
  store.finalize();
  std::span<float> w = store.value(0);
  for (size_t i = 0; i < 3; ++i) w[i * 3 + i] = 1.0f;
  const std::vector<float> input = {1, 2, 3, 0, 0, 0, 5, -1, 0};
  const auto logits = mlp.forward(input, 3);
  ASSERT_EQ(logits.size(), 9u);
  for (size_t i = 0; i < 9; ++i) EXPECT_EQ(logits[i], input[i]);
  // Rows: log(e+e^2+e^3)-3 = 0.40760596444438013, log 3 = 1.0986122886681098,
  // log(e^5+e^-1+1)-5 = 0.009093134485... (labels 2, 1, 0).
  const double row2 = std::log(std::exp(5.0) + std::exp(-1.0) + 1.0) - 5.0;
  const std::vector<uint8_t> labels = {2, 1, 0};
  EXPECT_NEAR(mlp.loss(labels), (0.40760596444438013 + 1.0986122886681098 + row2) / 3, 1e-6);
  EXPECT_EQ(mlp.correct(labels), 2u);
  EXPECT_EQ(mlp.correct(std::vector<uint8_t>{0, 0, 1}), 1u);
}

TEST(Mlp, BackwardMarksReverseRegistrationOrderWithFinalGradients) {
  ParameterStore store;
  Mlp mlp(store, {{4, 8, 8, 3}, Activation::kGelu});
  store.finalize();
  mlp.initialize(3);
  const Problem p = randomProblem(5, 4, 3, 21);

  std::vector<size_t> order;
  std::vector<std::vector<float>> gradAtMark(store.count());
  store.setGradReadyHook([&](size_t index) {
    order.push_back(index);
    const auto g = store.grad(index);
    gradAtMark[index].assign(g.begin(), g.end());
  });
  mlp.forward(p.input, 5);
  mlp.loss(p.labels);
  mlp.backward();
  // fc2.bias, fc2.weight, fc1.bias, fc1.weight, fc0.bias, fc0.weight.
  EXPECT_EQ(order, (std::vector<size_t>{5, 4, 3, 2, 1, 0}));
  for (size_t i = 0; i < store.count(); ++i) {
    const auto g = store.grad(i);
    EXPECT_EQ(gradAtMark[i], std::vector<float>(g.begin(), g.end())) << store.info(i).name << " changed after its mark";
  }
}

TEST(Mlp, BackwardAccumulatesIntoExistingGradients) {
  ParameterStore store;
  Mlp mlp(store, {{4, 6, 3}});
  store.finalize();
  mlp.initialize(9);
  const Problem p = randomProblem(6, 4, 3, 31);

  mlp.forward(p.input, 6);
  mlp.loss(p.labels);
  mlp.backward();
  const std::vector<float> once(store.grads().begin(), store.grads().end());

  // Pre-filled grads: backward must add, not overwrite.
  std::fill(store.grads().begin(), store.grads().end(), 0.5f);
  mlp.forward(p.input, 6);
  mlp.loss(p.labels);
  mlp.backward();
  for (size_t i = 0; i < once.size(); ++i) EXPECT_NEAR(store.grads()[i], 0.5f + once[i], 1e-6) << i;

  // Two half-batches accumulated = the full batch's gradient scaled per half
  // (each half's loss is a mean over 3 rows, so the sum is 2x the full mean).
  store.zeroGrads();
  for (size_t half = 0; half < 2; ++half) {
    mlp.forward(std::span<const float>(p.input).subspan(half * 12, 12), 3);
    mlp.loss(std::span<const uint8_t>(p.labels).subspan(half * 3, 3));
    mlp.backward();
  }
  for (size_t i = 0; i < once.size(); ++i) EXPECT_NEAR(store.grads()[i], 2.0f * once[i], 1e-5) << i;
}

TEST(Mlp, SmallerBatchAfterLargerReusesBuffersCorrectly) {
  ParameterStore store;
  Mlp mlp(store, {{3, 5, 2}});
  store.finalize();
  mlp.initialize(1);
  const Problem big = randomProblem(8, 3, 2, 41), small = randomProblem(2, 3, 2, 42);
  mlp.forward(big.input, 8);
  const auto logits = mlp.forward(small.input, 2);
  ASSERT_EQ(logits.size(), 4u);
  std::vector<double> params(store.values().begin(), store.values().end());
  EXPECT_NEAR(mlp.loss(small.labels), referenceLoss({3, 5, 2}, Activation::kRelu, params, small.input, small.labels),
              1e-5);
}

TEST(Mlp, MisuseThrowsWithClearErrors) {
  ParameterStore store;
  EXPECT_THROW(Mlp bad(store, MlpOptions{{5}}), std::invalid_argument);
  EXPECT_THROW(Mlp bad(store, MlpOptions{{5, 0, 2}}), std::invalid_argument);
  Mlp mlp(store, {{2, 2}});
  EXPECT_THROW(mlp.initialize(1), std::logic_error);  // not finalized
  store.finalize();
  EXPECT_THROW(Mlp late(store, MlpOptions{{2, 2}}), std::logic_error);  // finalized store
  EXPECT_THROW(mlp.backward(), std::logic_error);        // no loss yet
  EXPECT_THROW(mlp.forward(std::vector<float>(3), 2), std::invalid_argument);
  mlp.forward(std::vector<float>(4), 2);
  EXPECT_THROW(mlp.backward(), std::logic_error);  // forward but no loss
  EXPECT_THROW(mlp.loss(std::vector<uint8_t>{0}), std::invalid_argument);
  EXPECT_THROW(mlp.loss(std::vector<uint8_t>{0, 2}), std::invalid_argument);  // label >= classes
}

}  // namespace
}  // namespace loom::ddp
