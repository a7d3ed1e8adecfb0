// Element-wise optimizers over flat float spans. Because every update is
// per element, the same object serves the whole model (DDP) or one rank's
// shard of it (ZeRO): it keeps state for exactly the elements it is stepped
// on, allocated on the first step.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace loom::ddp {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of params from grads (same length; the same length on every
  // call, else std::invalid_argument).
  virtual void step(std::span<float> params, std::span<const float> grads) = 0;
  virtual void setLearningRate(float lr) = 0;
  virtual float learningRate() const = 0;
  // Bytes of optimizer state held now (momentum, Adam moments...).
  virtual size_t stateBytes() const = 0;
  // Checkpointing: all state as floats (including the step count), and back.
  virtual std::vector<float> saveState() const = 0;
  virtual void loadState(std::span<const float> state) = 0;
  virtual std::string name() const = 0;
};

struct SgdOptions {
  float lr = 0.01f;
  float momentum = 0.0f;      // PyTorch's SGD: buf = momentum*buf + grad; p -= lr*buf
  float weightDecay = 0.0f;   // added to the gradient (L2), as torch.optim.SGD
  bool nesterov = false;
};
std::unique_ptr<Optimizer> makeSgd(const SgdOptions& options);

struct AdamWOptions {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weightDecay = 0.01f;  // decoupled, as torch.optim.AdamW
};
std::unique_ptr<Optimizer> makeAdamW(const AdamWOptions& options);

}  // namespace loom::ddp
