#include "ddp/parallel/tensor_parallel_mlp.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

#include "ddp/model/init.h"
#include "ddp/model/softmax_cross_entropy.h"

namespace loom::ddp {

TensorParallelMlp::TensorParallelMlp(ParameterStore& store, MlpOptions options, loomComm_t tensorParallel)
    : store_(store), options_(std::move(options)), tp_(TensorParallelGroup::of(tensorParallel)) {
  const std::vector<size_t>& w = options_.layers;
  if (w.size() < 2) throw std::invalid_argument("TensorParallelMlp: options.layers needs at least 2 widths");
  const size_t count = w.size() - 1;
  if (tp_.size > 1 && (count - 1) % 2 != 0) {
    throw std::invalid_argument("TensorParallelMlp: " + std::to_string(count - 1) +
                                " hidden layers; tensor parallelism pairs them (column, row), so their number must be even");
  }
  for (size_t i = 0; i < count; ++i) {
    Layer l;
    l.full = DenseShape{0, w[i], w[i + 1]};
    l.kind = i + 1 == count ? Kind::kReplicated : (i % 2 == 0 ? Kind::kColumn : Kind::kRow);
    size_t wRows = w[i + 1], wCols = w[i], bias = w[i + 1];
    if (l.kind == Kind::kColumn) {
      const DenseShape local = columnParallelShape(l.full, tp_.size);  // throws naming out
      wRows = local.out;
      bias = local.out;
    } else if (l.kind == Kind::kRow) {
      wCols = rowParallelShape(l.full, tp_.size).in;
    }
    l.outLocal = l.kind == Kind::kColumn ? wRows : w[i + 1];
    const std::string prefix = "fc" + std::to_string(i);
    l.weight = store.add(prefix + ".weight", {wRows, wCols});
    l.bias = store.add(prefix + ".bias", {bias});
    layers_.push_back(l);
  }
  pre_.resize(count);
  post_.resize(count);
}

void TensorParallelMlp::initialize(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> weight, bias;
  for (const Layer& l : layers_) {
    weight.resize(l.full.out * l.full.in);
    bias.resize(l.full.out);
    const float bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(l.full.in)));
    fillUniform(rng, bound, weight);
    fillUniform(rng, bound, bias);
    std::vector<float> w = weight, b = bias;
    if (l.kind == Kind::kColumn) {
      w = columnParallelWeight(weight, l.full, tp_.rank, tp_.size);
      b = columnParallelBias(bias, l.full, tp_.rank, tp_.size);
    } else if (l.kind == Kind::kRow) {
      w = rowParallelWeight(weight, l.full, tp_.rank, tp_.size);
    }
    std::copy(w.begin(), w.end(), store_.value(l.weight).begin());
    std::copy(b.begin(), b.end(), store_.value(l.bias).begin());
  }
}

std::span<const float> TensorParallelMlp::forward(std::span<const float> input, size_t batch) {
  if (batch == 0 || input.size() != batch * options_.layers.front())
    throw std::invalid_argument("TensorParallelMlp::forward: input is not batch x input-width (batch " + std::to_string(batch) + ")");
  batch_ = batch;
  haveLoss_ = false;
  input_.assign(input.begin(), input.end());
  std::span<const float> x = input_;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    DenseShape full = l.full;
    full.batch = batch;
    pre_[i].resize(batch * l.outLocal);
    if (l.kind == Kind::kColumn) columnParallelForward(full, tp_, x, store_.value(l.weight), store_.value(l.bias), pre_[i]);
    else if (l.kind == Kind::kRow) rowParallelForward(full, tp_, x, store_.value(l.weight), store_.value(l.bias), pre_[i]);
    else denseForward(full, x, store_.value(l.weight), store_.value(l.bias), pre_[i]);
    if (i + 1 == layers_.size()) break;
    post_[i].resize(pre_[i].size());
    activationForward(options_.activation, pre_[i], post_[i]);
    x = post_[i];
  }
  return pre_.back();
}

float TensorParallelMlp::loss(std::span<const uint8_t> labels) {
  if (labels.size() != batch_) throw std::invalid_argument("TensorParallelMlp::loss: one label per row of the last forward");
  gradLogits_.resize(pre_.back().size());
  haveLoss_ = true;
  return softmaxCrossEntropy(pre_.back(), labels, options_.layers.back(), gradLogits_);
}

size_t TensorParallelMlp::correct(std::span<const uint8_t> labels) const {
  return countCorrect(pre_.back(), labels, options_.layers.back());
}

void TensorParallelMlp::backward() {
  if (!haveLoss_) throw std::logic_error("TensorParallelMlp::backward: call loss() after forward() first");
  size_t widest = 0;
  for (const Layer& l : layers_) widest = std::max({widest, l.full.in, l.full.out});
  for (auto& s : gradScratch_) s.resize(batch_ * widest);
  std::span<float> gradZ = gradLogits_;
  for (size_t i = layers_.size(); i-- > 0;) {
    const Layer& l = layers_[i];
    DenseShape full = l.full;
    full.batch = batch_;
    std::span<const float> x = i == 0 ? std::span<const float>(input_) : std::span<const float>(post_[i - 1]);
    const size_t inLocal = x.size() / batch_;
    std::span<float> gradBelow = std::span<float>(gradScratch_[i % 2]).first(i == 0 ? 0 : batch_ * inLocal);
    if (l.kind == Kind::kColumn) {
      if (i == 0) {
        // No input gradient needed: only the parameter gradients.
        const DenseShape local = columnParallelShape(full, tp_.size);
        denseBackwardBias(local, gradZ, store_.grad(l.bias));
        denseBackwardWeight(local, gradZ, x, store_.grad(l.weight));
      } else {
        columnParallelBackward(full, tp_, gradZ, x, store_.value(l.weight), store_.grad(l.weight), store_.grad(l.bias), gradBelow);
      }
    } else if (l.kind == Kind::kRow) {
      std::vector<float> unused;
      if (i == 0) unused.resize(batch_ * inLocal), gradBelow = unused;
      rowParallelBackward(full, tp_, gradZ, x, store_.value(l.weight), store_.grad(l.weight), store_.grad(l.bias), gradBelow);
    } else {
      denseBackwardBias(full, gradZ, store_.grad(l.bias));
      denseBackwardWeight(full, gradZ, x, store_.grad(l.weight));
      if (i > 0) denseBackwardInput(full, gradZ, store_.value(l.weight), gradBelow);
    }
    store_.markGradReady(l.bias);
    store_.markGradReady(l.weight);
    if (i == 0) break;
    activationBackward(options_.activation, pre_[i - 1], gradBelow, gradBelow);
    gradZ = gradBelow;
  }
  haveLoss_ = false;
}

std::vector<float> TensorParallelMlp::fullParameters() {
  std::vector<float> full;
  for (const Layer& l : layers_) {
    std::span<const float> w = store_.value(l.weight), b = store_.value(l.bias);
    std::vector<float> fw(w.begin(), w.end()), fb(b.begin(), b.end());
    if (l.kind == Kind::kColumn) {
      fw = gatherColumnParallel(w, tp_);
      fb = gatherColumnParallel(b, tp_);
    } else if (l.kind == Kind::kRow) {
      fw = gatherRowParallelWeight(w, l.full, tp_);
    }
    full.insert(full.end(), fw.begin(), fw.end());
    full.insert(full.end(), fb.begin(), fb.end());
  }
  return full;
}

}  // namespace loom::ddp
