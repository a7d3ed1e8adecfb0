// torch.optim.SGD (dampening 0): with g = grad + weightDecay * p,
//   buf = g on the first step, then buf = momentum * buf + g
//   p  -= lr * (nesterov ? g + momentum * buf : buf)      (plain g without momentum)
// State: the step count, then the momentum buffer (absent without momentum).
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "ddp/optim/element_count.h"
#include "ddp/optim/step_count.h"
#include "ddp/optimizer.h"

namespace loom::ddp {
namespace {

class Sgd final : public Optimizer {
 public:
  explicit Sgd(const SgdOptions& options) : options_(options) {
    if (!(options.lr >= 0.0f)) throw std::invalid_argument("makeSgd: lr must be >= 0");
    if (!(options.momentum >= 0.0f)) throw std::invalid_argument("makeSgd: momentum must be >= 0");
    if (!(options.weightDecay >= 0.0f)) throw std::invalid_argument("makeSgd: weightDecay must be >= 0");
    if (options.nesterov && options.momentum == 0.0f) {
      throw std::invalid_argument("makeSgd: nesterov needs a momentum > 0 (as torch.optim.SGD)");
    }
  }

  void step(std::span<float> params, std::span<const float> grads) override {
    count_.checkStep(name(), params.size(), grads.size());
    const size_t n = params.size();
    const float lr = options_.lr, decay = options_.weightDecay, mu = options_.momentum;
    float* p = params.data();
    const float* g = grads.data();
    ++steps_;
    if (mu == 0.0f) {
      for (size_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + decay * p[i]);
      return;
    }
    // A fresh buffer is zero and `keep` is 0, so the first step sets buf = g
    // exactly, as PyTorch's clone of the first gradient does.
    const float keep = buffer_.empty() ? 0.0f : mu;
    if (buffer_.empty()) buffer_.assign(n, 0.0f);
    float* buf = buffer_.data();
    if (options_.nesterov) {
      for (size_t i = 0; i < n; ++i) {
        const float d = g[i] + decay * p[i];
        buf[i] = keep * buf[i] + d;
        p[i] -= lr * (d + mu * buf[i]);
      }
    } else {
      for (size_t i = 0; i < n; ++i) {
        buf[i] = keep * buf[i] + (g[i] + decay * p[i]);
        p[i] -= lr * buf[i];
      }
    }
  }

  void setLearningRate(float lr) override {
    if (!(lr >= 0.0f)) throw std::invalid_argument("SGD::setLearningRate: lr must be >= 0");
    options_.lr = lr;
  }
  float learningRate() const override { return options_.lr; }
  size_t stateBytes() const override { return buffer_.size() * sizeof(float); }

  std::vector<float> saveState() const override {
    std::vector<float> state(optim::kStepCountFloats + buffer_.size());
    optim::encodeStepCount(steps_, state.data());
    if (!buffer_.empty()) std::memcpy(state.data() + optim::kStepCountFloats, buffer_.data(), buffer_.size() * sizeof(float));
    return state;
  }

  void loadState(std::span<const float> state) override {
    const uint64_t steps = optim::decodeStepCount(state, name());
    const std::span<const float> buffer = state.subspan(optim::kStepCountFloats);
    if (!buffer.empty()) {
      if (options_.momentum == 0.0f) {
        throw std::invalid_argument("SGD::loadState: state holds a momentum buffer but this optimizer has momentum 0");
      }
      count_.bind("SGD::loadState: state's momentum buffer", buffer.size());
    }
    buffer_.assign(buffer.begin(), buffer.end());
    steps_ = steps;
  }

  std::string name() const override { return "SGD"; }

 private:
  SgdOptions options_;
  optim::ElementCount count_;
  uint64_t steps_ = 0;
  std::vector<float> buffer_;  // momentum buffer; empty until the first step
};

}  // namespace

std::unique_ptr<Optimizer> makeSgd(const SgdOptions& options) { return std::make_unique<Sgd>(options); }

}  // namespace loom::ddp
