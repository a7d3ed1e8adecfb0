// Building blocks of the model stack against references written out here:
// Dense forward/backward against naive loops, activations against known
// values and finite differences, softmax cross-entropy against hand-computed
// numbers, and the portable uniform initializer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "ddp/model/activation.h"
#include "ddp/model/dense.h"
#include "ddp/model/init.h"
#include "ddp/model/softmax_cross_entropy.h"

namespace loom::ddp {
namespace {

std::vector<float> randomVector(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(Dense, ForwardMatchesNaiveLoops) {
  const DenseShape s{5, 7, 3};
  const auto x = randomVector(s.batch * s.in, 1), w = randomVector(s.out * s.in, 2), b = randomVector(s.out, 3);
  std::vector<float> y(s.batch * s.out, 123.0f);  // garbage: forward must overwrite
  denseForward(s, x, w, b, y);
  for (size_t r = 0; r < s.batch; ++r) {
    for (size_t o = 0; o < s.out; ++o) {
      double expect = b[o];
      for (size_t i = 0; i < s.in; ++i) expect += double(x[r * s.in + i]) * w[o * s.in + i];
      EXPECT_NEAR(y[r * s.out + o], expect, 1e-5) << "row " << r << " col " << o;
    }
  }
}

TEST(Dense, BackwardAccumulatesBiasAndWeightAndOverwritesInput) {
  const DenseShape s{4, 6, 3};
  const auto x = randomVector(s.batch * s.in, 4), w = randomVector(s.out * s.in, 5);
  const auto gy = randomVector(s.batch * s.out, 6);
  const auto biasStart = randomVector(s.out, 7), weightStart = randomVector(s.out * s.in, 8);
  std::vector<float> gb = biasStart, gw = weightStart, gx(s.batch * s.in, 99.0f);
  denseBackwardBias(s, gy, gb);
  denseBackwardWeight(s, gy, x, gw);
  denseBackwardInput(s, gy, w, gx);
  for (size_t o = 0; o < s.out; ++o) {
    double expect = biasStart[o];
    for (size_t r = 0; r < s.batch; ++r) expect += gy[r * s.out + o];
    EXPECT_NEAR(gb[o], expect, 1e-5);
    for (size_t i = 0; i < s.in; ++i) {
      double e = weightStart[o * s.in + i];
      for (size_t r = 0; r < s.batch; ++r) e += double(gy[r * s.out + o]) * x[r * s.in + i];
      EXPECT_NEAR(gw[o * s.in + i], e, 1e-5);
    }
  }
  for (size_t r = 0; r < s.batch; ++r) {
    for (size_t i = 0; i < s.in; ++i) {
      double e = 0;
      for (size_t o = 0; o < s.out; ++o) e += double(gy[r * s.out + o]) * w[o * s.in + i];
      EXPECT_NEAR(gx[r * s.in + i], e, 1e-5);
    }
  }
}

TEST(Dense, RejectsWrongSizes) {
  const DenseShape s{2, 3, 4};
  std::vector<float> x(6), w(12), b(4), y(8), shortY(7), shortBias(3);
  EXPECT_THROW(denseForward(s, x, w, b, shortY), std::invalid_argument);
  EXPECT_THROW(denseForward(s, x, std::vector<float>(11), b, y), std::invalid_argument);
  EXPECT_THROW(denseBackwardBias(s, y, shortBias), std::invalid_argument);
}

TEST(Activation, KnownValues) {
  EXPECT_EQ(relu(-2.0f), 0.0f);
  EXPECT_EQ(relu(3.5f), 3.5f);
  EXPECT_EQ(reluDerivative(0.0f), 0.0f);  // torch's threshold_backward at 0
  EXPECT_EQ(reluDerivative(0.1f), 1.0f);
  // gelu(1) = Phi(1), gelu(-1) = -Phi(-1); gelu'(+-1) = Phi(+-1) +- phi(1).
  EXPECT_NEAR(gelu(1.0f), 0.8413447460685429, 1e-6);
  EXPECT_NEAR(gelu(-1.0f), -0.15865525393145707, 1e-6);
  EXPECT_NEAR(geluDerivative(1.0f), 1.0833154705876864, 1e-6);
  EXPECT_NEAR(geluDerivative(-1.0f), -0.0833154705876863, 1e-6);
  EXPECT_EQ(gelu(0.0f), 0.0f);
  EXPECT_NEAR(gelu(10.0f), 10.0f, 1e-5);
  EXPECT_NEAR(gelu(-10.0f), 0.0f, 1e-5);
}

TEST(Activation, DerivativesMatchFiniteDifferences) {
  for (double z = -4.0; z <= 4.0; z += 0.173) {
    const double h = 1e-3;
    // The reference GELU here is in double, independent of the float one.
    auto geluD = [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); };
    EXPECT_NEAR(geluDerivative(float(z)), (geluD(z + h) - geluD(z - h)) / (2 * h), 1e-5) << "z " << z;
    EXPECT_NEAR(gelu(float(z)), geluD(z), 1e-6) << "z " << z;
  }
}

TEST(Activation, SpanFormsApplyElementwiseAndInPlace) {
  const std::vector<float> z = {-1.5f, -0.0f, 0.25f, 2.0f};
  const std::vector<float> ga = {1.0f, 2.0f, 3.0f, 4.0f};
  for (Activation act : {Activation::kRelu, Activation::kGelu}) {
    std::vector<float> a(z.size()), gz = ga;
    activationForward(act, z, a);
    activationBackward(act, z, gz, gz);  // in place
    for (size_t i = 0; i < z.size(); ++i) {
      const bool isRelu = act == Activation::kRelu;
      EXPECT_FLOAT_EQ(a[i], isRelu ? relu(z[i]) : gelu(z[i]));
      EXPECT_FLOAT_EQ(gz[i], ga[i] * (isRelu ? reluDerivative(z[i]) : geluDerivative(z[i])));
    }
  }
  std::vector<float> small(3);
  EXPECT_THROW(activationForward(Activation::kRelu, z, small), std::invalid_argument);
}

TEST(SoftmaxCrossEntropy, HandComputedExample) {
  // Row 0: log(e^1 + e^2 + e^3) - 3 = 0.40760596444438013; row 1: log 3.
  const std::vector<float> logits = {1, 2, 3, 0, 0, 0};
  const std::vector<uint8_t> labels = {2, 1};
  std::vector<float> grad(6);
  EXPECT_NEAR(softmaxCrossEntropy(logits, labels, 3, grad), 0.753109126556245, 1e-6);
  // (softmax - onehot) / batch.
  const double expect[6] = {0.04501528658519023, 0.12236423552739883, 0.33262047788741095 - 0.5,
                            1.0 / 6, 1.0 / 6 - 0.5, 1.0 / 6};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(grad[i], expect[i], 1e-6) << i;
  EXPECT_EQ(countCorrect(logits, labels, 3), 1u);  // row 1 ties -> argmax 0 != 1
}

TEST(SoftmaxCrossEntropy, LargeLogitsStayFinite) {
  const std::vector<float> logits = {1000.0f, 0.0f, -1000.0f, 1000.0f};
  std::vector<float> grad(4);
  // Row 0 label 0: loss ~ e^-1000 = 0; row 1 label 0: loss = 2000.
  const float loss = softmaxCrossEntropy(logits, std::vector<uint8_t>{0, 0}, 2, grad);
  EXPECT_NEAR(loss, 1000.0f, 1e-3);
  for (float g : grad) EXPECT_TRUE(std::isfinite(g));
  EXPECT_NEAR(grad[2], -0.5f, 1e-6);
  EXPECT_NEAR(grad[3], 0.5f, 1e-6);
}

TEST(SoftmaxCrossEntropy, RejectsBadLabelsAndShapes) {
  std::vector<float> logits(6);
  EXPECT_THROW(softmaxCrossEntropy(logits, std::vector<uint8_t>{0, 3}, 3, {}), std::invalid_argument);
  EXPECT_THROW(softmaxCrossEntropy(logits, std::vector<uint8_t>{0}, 3, {}), std::invalid_argument);
  EXPECT_THROW(softmaxCrossEntropy({}, std::vector<uint8_t>{}, 3, {}), std::invalid_argument);
}

TEST(Init, UniformIsInRangeDeterministicAndSpread) {
  std::vector<float> a(4000), b(4000);
  std::mt19937_64 r1(42), r2(42);
  fillUniform(r1, 0.25f, a);
  fillUniform(r2, 0.25f, b);
  EXPECT_EQ(a, b);
  double mean = 0, below = 0;
  for (float v : a) {
    ASSERT_GE(v, -0.25f);
    ASSERT_LE(v, 0.25f);
    mean += v;
    below += v < 0;
  }
  EXPECT_NEAR(mean / a.size(), 0.0, 0.01);
  EXPECT_NEAR(below / a.size(), 0.5, 0.05);
  // The mapping is fixed: the first value follows from mt19937_64's first output.
  std::mt19937_64 r3(42);
  const double unit = double(r3() >> 11) * 0x1.0p-53;
  EXPECT_EQ(a[0], float(unit * 0.5 - 0.25));
}

}  // namespace
}  // namespace loom::ddp
