// A multi-layer perceptron over a ParameterStore: Dense layers with an
// activation between them (none after the last), ending in class logits,
// trained with softmax cross-entropy. It is the model of the data-parallel
// demo, so its backward reports each parameter's gradient the moment it is
// final (ParameterStore::markGradReady), letting DDP overlap communication
// with the rest of backward.
//
// Usage: Mlp mlp(store, {{784, 256, 10}}); store.finalize(); mlp.initialize(seed);
// then per step: forward -> loss -> backward (grads +=) -> optimizer -> zeroGrads.
//
// Buffers for activations are sized to the largest batch seen, so steady-state
// steps allocate nothing. Threading of the matrix products is OpenBLAS's (see
// dense.h): set it to 1 thread when ranks share cores. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ddp/model/activation.h"
#include "ddp/model/dense.h"
#include "ddp/parameter_store.h"

namespace loom::ddp {

struct MlpOptions {
  std::vector<size_t> layers;  // widths, input first, classes last, e.g. {784, 256, 256, 10}
  Activation activation = Activation::kRelu;
};

class Mlp {
 public:
  // Registers "fc<i>.weight" (out x in, row-major, as torch.nn.Linear) and
  // "fc<i>.bias" for each layer, in forward order. The store must not be
  // finalized yet; it must outlive the Mlp.
  Mlp(ParameterStore& store, MlpOptions options);

  // After store.finalize(): torch.nn.Linear's default init (kaiming-uniform
  // weights, i.e. bound 1/sqrt(in), and the same bound for biases), drawn from
  // std::mt19937_64(seed) in registration order, identical on every machine.
  void initialize(uint64_t seed);

  // input: batch x layers.front(), row-major (copied, so the caller may reuse
  // it). Returns the logits, batch x layers.back(), valid until the next forward.
  std::span<const float> forward(std::span<const float> input, size_t batch);

  // Mean softmax cross-entropy of the last forward's logits against labels
  // (one per row); also prepares backward.
  float loss(std::span<const uint8_t> labels);

  // Rows of the last forward whose argmax equals the label.
  size_t correct(std::span<const uint8_t> labels) const;

  // Backward of the last loss(): ADDS into the store's grads (gradient
  // accumulation works), calling store.markGradReady(i) for each parameter as
  // soon as its gradient is final: last layer first, bias then weight, i.e.
  // reverse registration order.
  void backward();

  size_t numLayers() const { return layers_.size(); }

 private:
  struct Layer {
    DenseShape shape;  // batch filled in per call
    size_t weight = 0;  // parameter indices in the store
    size_t bias = 0;
  };

  void reserve(size_t batch);
  DenseShape shapeOf(size_t layer) const;
  std::span<const float> layerInput(size_t layer) const;
  std::span<float> rows(std::vector<float>& buffer, size_t width) const;
  std::span<const float> rows(const std::vector<float>& buffer, size_t width) const;

  ParameterStore& store_;
  MlpOptions options_;
  std::vector<Layer> layers_;

  size_t capacity_ = 0;  // batch the buffers below are sized for
  size_t batch_ = 0;     // batch of the last forward
  bool haveForward_ = false;
  bool haveLoss_ = false;
  std::vector<float> input_;                    // copy of the last input
  std::vector<std::vector<float>> preActivation_;   // z of every layer (the last one is the logits)
  std::vector<std::vector<float>> postActivation_;  // f(z) of every hidden layer
  std::vector<float> gradLogits_;
  std::vector<float> gradScratch_[2];  // dL/dz of consecutive layers, alternating
};

}  // namespace loom::ddp
