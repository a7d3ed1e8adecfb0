#include "ddp/parallel/pipeline_mlp_stage.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

#include "ddp/model/init.h"
#include "ddp/model/softmax_cross_entropy.h"

namespace loom::ddp {

StageLayers stageLayers(size_t layers, int stage, int stages, bool pairs) {
  if (stages < 1 || stage < 0 || stage >= stages)
    throw std::invalid_argument("stageLayers: stage " + std::to_string(stage) + " is outside [0, " + std::to_string(stages) + ")");
  if (pairs && layers % 2 == 0) {
    throw std::invalid_argument("stageLayers: " + std::to_string(layers - 1) +
                                " hidden layers cannot be split into column/row pairs (the number must be even)");
  }
  // Units: single layers, or (pairs) column/row pairs plus the classifier.
  const size_t units = pairs ? (layers - 1) / 2 + 1 : layers;
  if (static_cast<size_t>(stages) > units) {
    throw std::invalid_argument("stageLayers: " + std::to_string(stages) + " pipeline stages but the MLP has only " +
                                std::to_string(units) + (pairs ? " units (column/row pairs and the classifier)" : " layers"));
  }
  const size_t base = units / stages, extra = units % stages, s = static_cast<size_t>(stage);
  const size_t firstUnit = s * base + std::min(s, extra);
  const size_t lastUnit = firstUnit + base + (s < extra ? 1 : 0);
  const size_t width = pairs ? 2 : 1;
  return StageLayers{firstUnit * width, std::min(layers, lastUnit * width)};
}

PipelineMlpStage::PipelineMlpStage(ParameterStore& store, MlpOptions options, int stage, int stages,
                                   loomComm_t tensorParallel)
    : store_(store), options_(std::move(options)), stage_(stage), stages_(stages) {
  if (options_.layers.size() < 2) throw std::invalid_argument("PipelineMlpStage: options.layers needs at least 2 widths");
  if (store.finalized()) throw std::logic_error("PipelineMlpStage: the ParameterStore is already finalized");
  if (tensorParallel) tp_ = TensorParallelGroup::of(tensorParallel);
  const size_t count = options_.layers.size() - 1;
  range_ = stageLayers(count, stage, stages, tp_.size > 1);
  for (size_t i = range_.first; i < range_.last; ++i) {
    const DenseShape full{0, options_.layers[i], options_.layers[i + 1]};
    Kind kind = Kind::kDense;
    if (tp_.size > 1 && i + 1 < count) kind = i % 2 == 0 ? Kind::kColumn : Kind::kRow;
    size_t rows = full.out, cols = full.in, bias = full.out;
    if (kind == Kind::kColumn) rows = bias = columnParallelShape(full, tp_.size).out;
    if (kind == Kind::kRow) cols = rowParallelShape(full, tp_.size).in;
    const std::string prefix = "fc" + std::to_string(i);
    kind_.push_back(kind);
    weight_.push_back(store.add(prefix + ".weight", {rows, cols}));
    bias_.push_back(store.add(prefix + ".bias", {bias}));
  }
}

void PipelineMlpStage::initialize(uint64_t seed) {
  if (!store_.finalized()) throw std::logic_error("PipelineMlpStage::initialize: call store.finalize() first");
  // Mlp::initialize draws every layer in order; draw the earlier stages' too.
  std::mt19937_64 rng(seed);
  std::vector<float> weight, bias;
  for (size_t i = 0; i < range_.last; ++i) {
    const DenseShape full{0, options_.layers[i], options_.layers[i + 1]};
    const float bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(full.in)));
    weight.resize(full.out * full.in);
    bias.resize(full.out);
    fillUniform(rng, bound, weight);
    fillUniform(rng, bound, bias);
    if (i < range_.first) continue;
    const size_t l = i - range_.first;
    std::vector<float> w = weight, b = bias;
    if (kind_[l] == Kind::kColumn) {
      w = columnParallelWeight(weight, full, tp_.rank, tp_.size);
      b = columnParallelBias(bias, full, tp_.rank, tp_.size);
    } else if (kind_[l] == Kind::kRow) {
      w = rowParallelWeight(weight, full, tp_.rank, tp_.size);
    }
    std::copy(w.begin(), w.end(), store_.value(weight_[l]).begin());
    std::copy(b.begin(), b.end(), store_.value(bias_[l]).begin());
  }
}

std::vector<float> PipelineMlpStage::fullStageParameters() {
  std::vector<float> full;
  for (size_t l = 0; l < kind_.size(); ++l) {
    std::span<const float> w = store_.value(weight_[l]), b = store_.value(bias_[l]);
    std::vector<float> fw(w.begin(), w.end()), fb(b.begin(), b.end());
    if (kind_[l] == Kind::kColumn) {
      fw = gatherColumnParallel(w, tp_);
      fb = gatherColumnParallel(b, tp_);
    } else if (kind_[l] == Kind::kRow) {
      fw = gatherRowParallelWeight(w, fullShapeOf(l, 0), tp_);
    }
    full.insert(full.end(), fw.begin(), fw.end());
    full.insert(full.end(), fb.begin(), fb.end());
  }
  return full;
}

size_t PipelineMlpStage::firstRowOf(size_t m) const { return m * batch_ / microBatches_; }
size_t PipelineMlpStage::rowsOf(size_t m) const { return firstRowOf(m + 1) - firstRowOf(m); }

DenseShape PipelineMlpStage::fullShapeOf(size_t local, size_t rows) const {
  const size_t i = range_.first + local;
  return DenseShape{rows, options_.layers[i], options_.layers[i + 1]};
}
size_t PipelineMlpStage::inLocal(size_t local) const {
  const size_t in = options_.layers[range_.first + local];
  return kind_[local] == Kind::kRow ? in / static_cast<size_t>(tp_.size) : in;
}
size_t PipelineMlpStage::outLocal(size_t local) const {
  const size_t out = options_.layers[range_.first + local + 1];
  return kind_[local] == Kind::kColumn ? out / static_cast<size_t>(tp_.size) : out;
}

void PipelineMlpStage::beginStep(std::span<const float> images, std::span<const uint8_t> labels, size_t batch,
                                 size_t microBatches, bool train) {
  if (microBatches == 0 || microBatches > batch) {
    throw std::invalid_argument("PipelineMlpStage::beginStep on stage " + std::to_string(stage_) + ": " +
                                std::to_string(microBatches) + " micro-batches for a batch of " + std::to_string(batch) +
                                " rows (need 1 <= M <= batch)");
  }
  if (firstStage() && images.size() != batch * options_.layers.front())
    throw std::invalid_argument("PipelineMlpStage::beginStep: the first stage needs batch x input-width images");
  if (lastStage() && labels.size() != batch)
    throw std::invalid_argument("PipelineMlpStage::beginStep: the last stage needs one label per row");
  images_ = images;
  labels_ = labels;
  batch_ = batch;
  microBatches_ = microBatches;
  train_ = train;
  backwardsDone_ = 0;
  lossSum_ = 0;
  correct_ = 0;
  if (cache_.size() < microBatches) cache_.resize(microBatches);
  if (train) store_.zeroGrads();
}

std::span<float> PipelineMlpStage::inputBuffer(size_t m) {
  Cached& c = cache_.at(m);
  c.input.resize(rowsOf(m) * options_.layers[range_.first]);
  return c.input;
}

std::span<const float> PipelineMlpStage::forward(size_t m) {
  Cached& c = cache_.at(m);
  const size_t rows = rowsOf(m);
  const size_t count = range_.last - range_.first;
  if (firstStage()) {
    const size_t width = options_.layers.front();
    c.input.assign(images_.begin() + firstRowOf(m) * width, images_.begin() + (firstRowOf(m) + rows) * width);
  }
  c.pre.resize(count);
  c.post.resize(count);
  std::span<const float> x = c.input;
  for (size_t l = 0; l < count; ++l) {
    const DenseShape full = fullShapeOf(l, rows);
    c.pre[l].resize(rows * outLocal(l));
    std::span<const float> w = store_.value(weight_[l]), b = store_.value(bias_[l]);
    if (kind_[l] == Kind::kColumn) columnParallelForward(full, tp_, x, w, b, c.pre[l]);
    else if (kind_[l] == Kind::kRow) rowParallelForward(full, tp_, x, w, b, c.pre[l]);
    else denseForward(full, x, w, b, c.pre[l]);
    const bool logits = lastStage() && l + 1 == count;
    if (logits) break;
    c.post[l].resize(c.pre[l].size());
    activationForward(options_.activation, c.pre[l], c.post[l]);
    x = c.post[l];
  }
  if (!lastStage()) return c.post[count - 1];
  const size_t classes = options_.layers.back();
  const std::span<const uint8_t> labels = labels_.subspan(firstRowOf(m), rows);
  correct_ += countCorrect(c.pre[count - 1], labels, classes);
  if (train_) {
    gradLogits_.resize(rows * classes);
    const float loss = softmaxCrossEntropy(c.pre[count - 1], labels, classes, gradLogits_);
    lossSum_ += static_cast<double>(loss) * static_cast<double>(rows);
    // d(mean over the batch)/d(logits) = (rows/B) * d(mean over the micro-batch).
    const float weight = static_cast<float>(rows) / static_cast<float>(batch_);
    c.gradOutput.resize(gradLogits_.size());
    for (size_t i = 0; i < gradLogits_.size(); ++i) c.gradOutput[i] = gradLogits_[i] * weight;
  }
  return {};
}

std::span<float> PipelineMlpStage::gradOutputBuffer(size_t m) {
  Cached& c = cache_.at(m);
  c.gradOutput.resize(rowsOf(m) * options_.layers[range_.last]);
  return c.gradOutput;
}

std::span<const float> PipelineMlpStage::backward(size_t m) {
  if (!train_) throw std::logic_error("PipelineMlpStage::backward: beginStep(train=false) was an evaluation pass");
  Cached& c = cache_.at(m);
  const size_t rows = rowsOf(m);
  const size_t count = range_.last - range_.first;
  const bool lastMicroBatch = ++backwardsDone_ == microBatches_;
  // gradOutput: the gradient of the logits (last stage) or of this stage's
  // output activation, which goes through the activation first.
  std::span<float> gradZ = c.gradOutput;
  if (!lastStage()) activationBackward(options_.activation, c.pre[count - 1], gradZ, gradZ);
  size_t widest = 0;
  for (size_t l = 0; l < count; ++l) widest = std::max({widest, fullShapeOf(l, rows).in, fullShapeOf(l, rows).out});
  for (auto& s : c.gradScratch) s.resize(rows * widest);
  for (size_t l = count; l-- > 0;) {
    const DenseShape full = fullShapeOf(l, rows);
    std::span<const float> x = l == 0 ? std::span<const float>(c.input) : std::span<const float>(c.post[l - 1]);
    std::span<const float> w = store_.value(weight_[l]);
    std::span<float> gw = store_.grad(weight_[l]), gb = store_.grad(bias_[l]);
    const bool needInput = !(l == 0 && firstStage());
    std::span<float> gradBelow = std::span<float>(c.gradScratch[l % 2]).first(rows * inLocal(l));
    if (kind_[l] == Kind::kColumn && needInput) {
      columnParallelBackward(full, tp_, gradZ, x, w, gw, gb, gradBelow);
    } else if (kind_[l] == Kind::kRow) {
      rowParallelBackward(full, tp_, gradZ, x, w, gw, gb, gradBelow);
    } else {
      // Whole layers, and a column-parallel first layer (no input gradient, so no all-reduce).
      const DenseShape local{rows, inLocal(l), outLocal(l)};
      denseBackwardBias(local, gradZ, gb);
      denseBackwardWeight(local, gradZ, x, gw);
      if (needInput) denseBackwardInput(local, gradZ, w, gradBelow);
    }
    if (lastMicroBatch) {
      store_.markGradReady(bias_[l]);
      store_.markGradReady(weight_[l]);
    }
    if (!needInput) return {};
    if (l == 0) return gradBelow;  // the previous stage applies its activation's derivative
    activationBackward(options_.activation, c.pre[l - 1], gradBelow, gradBelow);
    gradZ = gradBelow;
  }
  return {};
}

}  // namespace loom::ddp
