// torch.optim.AdamW (amsgrad off): at step t (from 1),
//   p *= 1 - lr * weightDecay                       (decoupled decay, before the moments)
//   m  = beta1 * m + (1 - beta1) * g
//   v  = beta2 * v + (1 - beta2) * g * g
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// The bias corrections are computed in double once per step, as PyTorch does
// in Python; the per-element work is float. State: step count, m, v.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ddp/optim/element_count.h"
#include "ddp/optim/step_count.h"
#include "ddp/optimizer.h"

namespace loom::ddp {
namespace {

class AdamW final : public Optimizer {
 public:
  explicit AdamW(const AdamWOptions& options) : options_(options) {
    if (!(options.lr >= 0.0f)) throw std::invalid_argument("makeAdamW: lr must be >= 0");
    if (!(options.beta1 >= 0.0f && options.beta1 < 1.0f)) throw std::invalid_argument("makeAdamW: beta1 must be in [0, 1)");
    if (!(options.beta2 >= 0.0f && options.beta2 < 1.0f)) throw std::invalid_argument("makeAdamW: beta2 must be in [0, 1)");
    if (!(options.eps >= 0.0f)) throw std::invalid_argument("makeAdamW: eps must be >= 0");
    if (!(options.weightDecay >= 0.0f)) throw std::invalid_argument("makeAdamW: weightDecay must be >= 0");
  }

  void step(std::span<float> params, std::span<const float> grads) override {
    count_.checkStep(name(), params.size(), grads.size());
    const size_t n = params.size();
    if (m_.empty() && n > 0) {
      m_.assign(n, 0.0f);
      v_.assign(n, 0.0f);
    }
    ++steps_;
    const double t = static_cast<double>(steps_);
    const float b1 = options_.beta1, b2 = options_.beta2, eps = options_.eps;
    const float stepSize = static_cast<float>(options_.lr / (1.0 - std::pow(static_cast<double>(b1), t)));
    const float correction2Sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(b2), t)));
    const float decay = 1.0f - options_.lr * options_.weightDecay;
    float* p = params.data();
    const float* g = grads.data();
    float* m = m_.data();
    float* v = v_.data();
    for (size_t i = 0; i < n; ++i) {
      p[i] *= decay;
      m[i] = b1 * m[i] + (1.0f - b1) * g[i];
      v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
      p[i] -= stepSize * m[i] / (std::sqrt(v[i]) / correction2Sqrt + eps);
    }
  }

  void setLearningRate(float lr) override {
    if (!(lr >= 0.0f)) throw std::invalid_argument("AdamW::setLearningRate: lr must be >= 0");
    options_.lr = lr;
  }
  float learningRate() const override { return options_.lr; }
  size_t stateBytes() const override { return (m_.size() + v_.size()) * sizeof(float); }

  std::vector<float> saveState() const override {
    std::vector<float> state(optim::kStepCountFloats);
    optim::encodeStepCount(steps_, state.data());
    state.insert(state.end(), m_.begin(), m_.end());
    state.insert(state.end(), v_.begin(), v_.end());
    return state;
  }

  void loadState(std::span<const float> state) override {
    const uint64_t steps = optim::decodeStepCount(state, name());
    const std::span<const float> moments = state.subspan(optim::kStepCountFloats);
    if (moments.size() % 2 != 0) {
      throw std::invalid_argument("AdamW::loadState: state holds " + std::to_string(moments.size()) +
                                  " moment floats, not two equal halves (m, v)");
    }
    const size_t n = moments.size() / 2;
    if (n > 0) count_.bind("AdamW::loadState: state's moments", n);
    m_.assign(moments.begin(), moments.begin() + n);
    v_.assign(moments.begin() + n, moments.end());
    steps_ = steps;
  }

  std::string name() const override { return "AdamW"; }

 private:
  AdamWOptions options_;
  optim::ElementCount count_;
  uint64_t steps_ = 0;
  std::vector<float> m_, v_;  // first and second moments; empty until the first step
};

}  // namespace

std::unique_ptr<Optimizer> makeAdamW(const AdamWOptions& options) { return std::make_unique<AdamW>(options); }

}  // namespace loom::ddp
