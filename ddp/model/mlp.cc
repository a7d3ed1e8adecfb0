#include "ddp/model/mlp.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

#include "ddp/model/init.h"
#include "ddp/model/softmax_cross_entropy.h"

namespace loom::ddp {

Mlp::Mlp(ParameterStore& store, MlpOptions options) : store_(store), options_(std::move(options)) {
  const std::vector<size_t>& widths = options_.layers;
  if (widths.size() < 2) {
    throw std::invalid_argument("Mlp: options.layers needs at least 2 widths (input and classes), got " +
                                std::to_string(widths.size()));
  }
  for (size_t i = 0; i < widths.size(); ++i) {
    if (widths[i] == 0) throw std::invalid_argument("Mlp: options.layers[" + std::to_string(i) + "] is 0");
  }
  if (widths.back() > 256) {
    throw std::invalid_argument("Mlp: options.layers.back() = " + std::to_string(widths.back()) +
                                " classes, but labels are uint8_t (at most 256)");
  }
  if (store.finalized()) throw std::logic_error("Mlp: the ParameterStore is already finalized");
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    Layer layer;
    layer.shape = DenseShape{0, widths[i], widths[i + 1]};
    const std::string prefix = "fc" + std::to_string(i);
    layer.weight = store.add(prefix + ".weight", {widths[i + 1], widths[i]});
    layer.bias = store.add(prefix + ".bias", {widths[i + 1]});
    layers_.push_back(layer);
  }
  preActivation_.resize(layers_.size());
  postActivation_.resize(layers_.size() - 1);
}

void Mlp::initialize(uint64_t seed) {
  if (!store_.finalized()) throw std::logic_error("Mlp::initialize: call store.finalize() first");
  std::mt19937_64 rng(seed);
  for (const Layer& layer : layers_) {
    const float bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(layer.shape.in)));
    fillUniform(rng, bound, store_.value(layer.weight));
    fillUniform(rng, bound, store_.value(layer.bias));
  }
}

void Mlp::reserve(size_t batch) {
  if (batch <= capacity_) return;  // smaller batches use a prefix of the buffers
  size_t widest = 0;
  for (const Layer& layer : layers_) widest = std::max({widest, layer.shape.in, layer.shape.out});
  input_.resize(batch * layers_.front().shape.in);
  for (size_t i = 0; i < layers_.size(); ++i) preActivation_[i].resize(batch * layers_[i].shape.out);
  for (size_t i = 0; i + 1 < layers_.size(); ++i) postActivation_[i].resize(batch * layers_[i].shape.out);
  gradLogits_.resize(batch * layers_.back().shape.out);
  for (auto& scratch : gradScratch_) scratch.resize(batch * widest);
  capacity_ = batch;
}

DenseShape Mlp::shapeOf(size_t layer) const {
  DenseShape shape = layers_[layer].shape;
  shape.batch = batch_;
  return shape;
}

std::span<float> Mlp::rows(std::vector<float>& buffer, size_t width) const {
  return std::span<float>(buffer).first(batch_ * width);
}
std::span<const float> Mlp::rows(const std::vector<float>& buffer, size_t width) const {
  return std::span<const float>(buffer).first(batch_ * width);
}

std::span<const float> Mlp::layerInput(size_t layer) const {
  if (layer == 0) return rows(input_, layers_[0].shape.in);
  return rows(postActivation_[layer - 1], layers_[layer].shape.in);
}

std::span<const float> Mlp::forward(std::span<const float> input, size_t batch) {
  if (!store_.finalized()) throw std::logic_error("Mlp::forward: call store.finalize() first");
  if (batch == 0) throw std::invalid_argument("Mlp::forward: batch is 0");
  const size_t inWidth = layers_.front().shape.in;
  if (input.size() != batch * inWidth) {
    throw std::invalid_argument("Mlp::forward: input has " + std::to_string(input.size()) +
                                " elements, expected batch * layers.front() = " + std::to_string(batch * inWidth));
  }
  reserve(batch);
  batch_ = batch;
  haveLoss_ = false;
  std::copy(input.begin(), input.end(), input_.begin());
  for (size_t i = 0; i < layers_.size(); ++i) {
    const DenseShape shape = shapeOf(i);
    std::span<float> z = rows(preActivation_[i], shape.out);
    denseForward(shape, layerInput(i), store_.value(layers_[i].weight), store_.value(layers_[i].bias), z);
    if (i + 1 < layers_.size()) activationForward(options_.activation, z, rows(postActivation_[i], shape.out));
  }
  haveForward_ = true;
  return rows(preActivation_.back(), layers_.back().shape.out);
}

float Mlp::loss(std::span<const uint8_t> labels) {
  if (!haveForward_) throw std::logic_error("Mlp::loss: no forward() yet");
  if (labels.size() != batch_) {
    throw std::invalid_argument("Mlp::loss: labels has " + std::to_string(labels.size()) +
                                " elements but the last forward's batch is " + std::to_string(batch_));
  }
  const size_t classes = layers_.back().shape.out;
  const float value = softmaxCrossEntropy(rows(preActivation_.back(), classes), labels, classes,
                                          rows(gradLogits_, classes));
  haveLoss_ = true;
  return value;
}

size_t Mlp::correct(std::span<const uint8_t> labels) const {
  if (!haveForward_) throw std::logic_error("Mlp::correct: no forward() yet");
  if (labels.size() != batch_) {
    throw std::invalid_argument("Mlp::correct: labels has " + std::to_string(labels.size()) +
                                " elements but the last forward's batch is " + std::to_string(batch_));
  }
  const size_t classes = layers_.back().shape.out;
  return countCorrect(rows(preActivation_.back(), classes), labels, classes);
}

void Mlp::backward() {
  if (!haveLoss_) throw std::logic_error("Mlp::backward: call loss() after forward() first");
  // gradZ holds dLoss/dz of layer i (its pre-activation output).
  std::span<const float> gradZ = rows(gradLogits_, layers_.back().shape.out);
  for (size_t i = layers_.size(); i-- > 0;) {
    const Layer& layer = layers_[i];
    const DenseShape shape = shapeOf(i);
    denseBackwardBias(shape, gradZ, store_.grad(layer.bias));
    store_.markGradReady(layer.bias);
    denseBackwardWeight(shape, gradZ, layerInput(i), store_.grad(layer.weight));
    store_.markGradReady(layer.weight);
    if (i == 0) break;  // nothing below the input needs a gradient
    // dL/da of the layer below, then through its activation to dL/dz, in place.
    // The two scratch buffers alternate because gradZ may live in the other one.
    std::span<float> gradBelow = rows(gradScratch_[i % 2], shape.in);
    denseBackwardInput(shape, gradZ, store_.value(layer.weight), gradBelow);
    activationBackward(options_.activation, rows(preActivation_[i - 1], shape.in), gradBelow, gradBelow);
    gradZ = gradBelow;
  }
}

}  // namespace loom::ddp
