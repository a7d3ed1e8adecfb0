// SGD and AdamW against reference updates written out here in double from
// torch.optim.SGD's and torch.optim.AdamW's documented algorithms, over
// several steps, plus state save/load and misuse.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "ddp/optim/step_count.h"
#include "ddp/optimizer.h"

namespace loom::ddp {
namespace {

constexpr size_t kElements = 37;
constexpr int kSteps = 6;

std::vector<float> stepGradient(int step, uint32_t salt) {
  std::mt19937 rng(1000 * salt + step);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> g(kElements);
  for (float& v : g) v = dist(rng);
  g[3] = 1e-9f;  // tiny gradient: AdamW's eps matters here
  g[4] = 0.0f;
  return g;
}

std::vector<float> startParams() {
  std::vector<float> p(kElements);
  for (size_t i = 0; i < kElements; ++i) p[i] = 0.1f * float(i % 7) - 0.3f;
  return p;
}

// torch.optim.SGD, dampening 0.
struct SgdReference {
  explicit SgdReference(const SgdOptions& options) : o(options) {}
  SgdOptions o;
  std::vector<double> buf;
  void step(std::vector<double>& p, const std::vector<float>& grad) {
    const bool first = buf.empty();
    if (first) buf.assign(p.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) {
      double d = grad[i] + double(o.weightDecay) * p[i];
      if (o.momentum != 0.0f) {
        buf[i] = first ? d : double(o.momentum) * buf[i] + d;
        d = o.nesterov ? d + double(o.momentum) * buf[i] : buf[i];
      }
      p[i] -= double(o.lr) * d;
    }
  }
};

// torch.optim.AdamW, amsgrad off.
struct AdamWReference {
  explicit AdamWReference(const AdamWOptions& options) : o(options) {}
  AdamWOptions o;
  std::vector<double> m, v;
  int t = 0;
  void step(std::vector<double>& p, const std::vector<float>& grad) {
    if (m.empty()) m.assign(p.size(), 0.0), v.assign(p.size(), 0.0);
    ++t;
    const double b1 = o.beta1, b2 = o.beta2;
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] *= 1.0 - double(o.lr) * double(o.weightDecay);
      m[i] = b1 * m[i] + (1 - b1) * grad[i];
      v[i] = b2 * v[i] + (1 - b2) * double(grad[i]) * grad[i];
      const double mHat = m[i] / (1 - std::pow(b1, t));
      const double vHat = v[i] / (1 - std::pow(b2, t));
      p[i] -= double(o.lr) * mHat / (std::sqrt(vHat) + double(o.eps));
    }
  }
};

template <class Reference>
void expectMatchesReference(Optimizer& opt, Reference ref, uint32_t salt, float newLrAtStep3 = 0.0f) {
  std::vector<float> p = startParams();
  std::vector<double> expect(p.begin(), p.end());
  for (int s = 0; s < kSteps; ++s) {
    if (s == 3 && newLrAtStep3 > 0.0f) {  // a scheduler changing lr mid-run
      opt.setLearningRate(newLrAtStep3);
      ref.o.lr = newLrAtStep3;
    }
    const std::vector<float> g = stepGradient(s, salt);
    opt.step(p, g);
    ref.step(expect, g);
    for (size_t i = 0; i < kElements; ++i) {
      ASSERT_NEAR(p[i], expect[i], 2e-6 * std::max(1.0, std::abs(expect[i]))) << "step " << s << " element " << i;
    }
  }
}

TEST(Sgd, PlainMatchesTorchFormula) {
  const SgdOptions o{0.1f, 0.0f, 0.0f, false};
  expectMatchesReference(*makeSgd(o), SgdReference{o}, 1);
}

TEST(Sgd, MomentumMatchesTorchFormula) {
  const SgdOptions o{0.05f, 0.9f, 0.0f, false};
  auto opt = makeSgd(o);
  expectMatchesReference(*opt, SgdReference{o}, 2);
  EXPECT_EQ(opt->stateBytes(), kElements * sizeof(float));
}

TEST(Sgd, NesterovWithWeightDecayMatchesTorchFormula) {
  const SgdOptions o{0.05f, 0.8f, 0.01f, true};
  expectMatchesReference(*makeSgd(o), SgdReference{o}, 3, 0.02f);
}

TEST(Sgd, WeightDecayWithoutMomentumMatchesTorchFormula) {
  const SgdOptions o{0.1f, 0.0f, 0.5f, false};
  auto opt = makeSgd(o);
  expectMatchesReference(*opt, SgdReference{o}, 4);
  EXPECT_EQ(opt->stateBytes(), 0u);
}

TEST(Sgd, FirstStepUsesTheGradientAsTheMomentumBuffer) {
  // buf = g on step 1 (not (1 - momentum) g or momentum * 0 + ...): p -= lr * g.
  auto opt = makeSgd({0.5f, 0.9f, 0.0f, false});
  std::vector<float> p = {1.0f, 2.0f};
  opt->step(p, std::vector<float>{0.2f, -0.4f});
  EXPECT_FLOAT_EQ(p[0], 0.9f);
  EXPECT_FLOAT_EQ(p[1], 2.2f);
  // Step 2: buf = 0.9 * 0.2 + 0.2 = 0.38 -> p = 0.9 - 0.19.
  opt->step(p, std::vector<float>{0.2f, -0.4f});
  EXPECT_FLOAT_EQ(p[0], 0.71f);
}

TEST(AdamW, MatchesTorchFormula) {
  const AdamWOptions o{0.01f, 0.9f, 0.999f, 1e-8f, 0.1f};
  auto opt = makeAdamW(o);
  expectMatchesReference(*opt, AdamWReference{o}, 5);
  EXPECT_EQ(opt->stateBytes(), 2 * kElements * sizeof(float));
}

TEST(AdamW, OtherBetasLargeEpsAndLrChangeMatchTorchFormula) {
  const AdamWOptions o{0.003f, 0.5f, 0.9f, 1e-3f, 0.0f};
  expectMatchesReference(*makeAdamW(o), AdamWReference{o}, 6, 0.001f);
}

TEST(AdamW, FirstStepMovesEachParameterByAboutLr) {
  // With bias correction, step 1 is lr * g / (|g| + eps): about lr * sign(g).
  auto opt = makeAdamW({0.01f, 0.9f, 0.999f, 1e-8f, 0.0f});
  std::vector<float> p = {0.0f, 0.0f};
  opt->step(p, std::vector<float>{3.0f, -0.002f});
  EXPECT_NEAR(p[0], -0.01f, 1e-6);
  EXPECT_NEAR(p[1], 0.01f, 1e-6);
}

// Steps `first` on a fresh optimizer, saves, loads into another fresh one,
// then both take more steps from the same point: they must agree bit for bit.
void expectSaveLoadRoundTrip(const std::function<std::unique_ptr<Optimizer>()>& make, size_t expectedStateFloats) {
  auto original = make();
  std::vector<float> p = startParams();
  for (int s = 0; s < 3; ++s) original->step(p, stepGradient(s, 7));
  const std::vector<float> state = original->saveState();
  EXPECT_EQ(state.size(), expectedStateFloats);
  EXPECT_EQ(optim::decodeStepCount(state, "test"), 3u);

  auto restored = make();
  restored->loadState(state);
  EXPECT_EQ(restored->saveState(), state);
  EXPECT_EQ(restored->stateBytes(), original->stateBytes());
  std::vector<float> q = p;
  for (int s = 3; s < 6; ++s) {
    original->step(p, stepGradient(s, 7));
    restored->step(q, stepGradient(s, 7));
  }
  EXPECT_EQ(p, q);

  // A fresh optimizer (no restore) would diverge: the state matters.
  auto fresh = make();
  std::vector<float> r = q;
  fresh->step(r, stepGradient(9, 7));
  restored->step(q, stepGradient(9, 7));
  EXPECT_NE(r, q);
}

TEST(Sgd, SaveLoadRoundTrip) {
  expectSaveLoadRoundTrip([] { return makeSgd({0.05f, 0.9f, 0.01f, true}); }, optim::kStepCountFloats + kElements);
}

TEST(AdamW, SaveLoadRoundTrip) {
  expectSaveLoadRoundTrip([] { return makeAdamW({0.01f, 0.9f, 0.999f, 1e-8f, 0.1f}); },
                          optim::kStepCountFloats + 2 * kElements);
}

TEST(Optimizer, StepCountIsExactBeyondFloatPrecision) {
  for (uint64_t step : {uint64_t{0}, uint64_t{1}, uint64_t{(1u << 24) + 1}, (uint64_t{1} << 40) - 1}) {
    float encoded[2];
    optim::encodeStepCount(step, encoded);
    EXPECT_EQ(optim::decodeStepCount(encoded, "test"), step);
  }
  float encoded[2];
  EXPECT_THROW(optim::encodeStepCount(uint64_t{1} << 40, encoded), std::overflow_error);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto bad : {std::vector<float>{-1.0f, 0.0f}, std::vector<float>{0.0f, 0.5f}, std::vector<float>{nan, 0.0f},
                   std::vector<float>{0.0f}}) {
    EXPECT_THROW(optim::decodeStepCount(bad, "test"), std::invalid_argument);
  }
}

TEST(Optimizer, StateIsBoundToTheFirstStepsLength) {
  for (int kind = 0; kind < 2; ++kind) {
    auto make = [kind] { return kind == 0 ? makeSgd({0.1f, 0.9f, 0.0f, false}) : makeAdamW({}); };
    auto opt = make();
    std::vector<float> p(4), g(4), longer(5);
    EXPECT_EQ(opt->stateBytes(), 0u) << opt->name() << ": state before the first step";
    opt->step(p, g);
    EXPECT_THROW(opt->step(longer, longer), std::invalid_argument) << opt->name();
    EXPECT_THROW(opt->step(p, longer), std::invalid_argument) << opt->name();
    // A state for 5 elements cannot be loaded into one bound to 4.
    auto other = make();
    other->step(longer, longer);
    EXPECT_THROW(opt->loadState(other->saveState()), std::invalid_argument) << opt->name();
  }
}

TEST(Optimizer, InvalidOptionsAndStatesAreRejected) {
  EXPECT_THROW(makeSgd({0.1f, 0.0f, 0.0f, true}), std::invalid_argument);  // nesterov without momentum
  EXPECT_THROW(makeSgd({-0.1f, 0.0f, 0.0f, false}), std::invalid_argument);
  EXPECT_THROW(makeAdamW({0.01f, 1.0f, 0.999f, 1e-8f, 0.0f}), std::invalid_argument);
  EXPECT_THROW(makeAdamW({0.01f, 0.9f, 0.999f, -1.0f, 0.0f}), std::invalid_argument);
  auto plain = makeSgd({0.1f, 0.0f, 0.0f, false});
  EXPECT_THROW(plain->loadState(std::vector<float>{0, 3, 1, 2}), std::invalid_argument);  // buffer without momentum
  auto adam = makeAdamW({});
  EXPECT_THROW(adam->loadState(std::vector<float>{0, 3, 1, 2, 3}), std::invalid_argument);  // odd moments
  EXPECT_THROW(adam->setLearningRate(-1.0f), std::invalid_argument);
  adam->setLearningRate(0.5f);
  EXPECT_EQ(adam->learningRate(), 0.5f);
  EXPECT_EQ(adam->name(), "AdamW");
}

}  // namespace
}  // namespace loom::ddp
