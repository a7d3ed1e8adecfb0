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

StageLayers stageLayers(size_t layers, int stage, int stages) {
  if (stages < 1 || stage < 0 || stage >= stages)
    throw std::invalid_argument("stageLayers: stage " + std::to_string(stage) + " is outside [0, " + std::to_string(stages) + ")");
  if (static_cast<size_t>(stages) > layers) {
    throw std::invalid_argument("stageLayers: " + std::to_string(stages) + " pipeline stages but the MLP has only " +
                                std::to_string(layers) + " layers");
  }
  const size_t base = layers / stages, extra = layers % stages, s = static_cast<size_t>(stage);
  StageLayers r;
  r.first = s * base + std::min(s, extra);
  r.last = r.first + base + (s < extra ? 1 : 0);
  return r;
}

PipelineMlpStage::PipelineMlpStage(ParameterStore& store, MlpOptions options, int stage, int stages)
    : store_(store), options_(std::move(options)), stage_(stage), stages_(stages) {
  if (options_.layers.size() < 2) throw std::invalid_argument("PipelineMlpStage: options.layers needs at least 2 widths");
  if (store.finalized()) throw std::logic_error("PipelineMlpStage: the ParameterStore is already finalized");
  range_ = stageLayers(options_.layers.size() - 1, stage, stages);
  for (size_t i = range_.first; i < range_.last; ++i) {
    const std::string prefix = "fc" + std::to_string(i);
    weight_.push_back(store.add(prefix + ".weight", {options_.layers[i + 1], options_.layers[i]}));
    bias_.push_back(store.add(prefix + ".bias", {options_.layers[i + 1]}));
  }
}

void PipelineMlpStage::initialize(uint64_t seed) {
  if (!store_.finalized()) throw std::logic_error("PipelineMlpStage::initialize: call store.finalize() first");
  // Mlp::initialize draws every layer in order; draw the earlier stages' too.
  std::mt19937_64 rng(seed);
  std::vector<float> skipped;
  for (size_t i = 0; i < range_.last; ++i) {
    const size_t in = options_.layers[i], out = options_.layers[i + 1];
    const float bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(in)));
    if (i < range_.first) {
      skipped.resize(out * in + out);
      fillUniform(rng, bound, skipped);
    } else {
      fillUniform(rng, bound, store_.value(weight_[i - range_.first]));
      fillUniform(rng, bound, store_.value(bias_[i - range_.first]));
    }
  }
}

size_t PipelineMlpStage::firstRowOf(size_t m) const { return m * batch_ / microBatches_; }
size_t PipelineMlpStage::rowsOf(size_t m) const { return firstRowOf(m + 1) - firstRowOf(m); }

DenseShape PipelineMlpStage::shapeOf(size_t local, size_t rows) const {
  const size_t i = range_.first + local;
  return DenseShape{rows, options_.layers[i], options_.layers[i + 1]};
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
    const DenseShape shape = shapeOf(l, rows);
    c.pre[l].resize(rows * shape.out);
    denseForward(shape, x, store_.value(weight_[l]), store_.value(bias_[l]), c.pre[l]);
    const bool logits = lastStage() && l + 1 == count;
    if (logits) break;
    c.post[l].resize(rows * shape.out);
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
  for (size_t l = 0; l < count; ++l) widest = std::max({widest, shapeOf(l, rows).in, shapeOf(l, rows).out});
  for (auto& s : c.gradScratch) s.resize(rows * widest);
  for (size_t l = count; l-- > 0;) {
    const DenseShape shape = shapeOf(l, rows);
    std::span<const float> x = l == 0 ? std::span<const float>(c.input) : std::span<const float>(c.post[l - 1]);
    denseBackwardBias(shape, gradZ, store_.grad(bias_[l]));
    if (lastMicroBatch) store_.markGradReady(bias_[l]);
    denseBackwardWeight(shape, gradZ, x, store_.grad(weight_[l]));
    if (lastMicroBatch) store_.markGradReady(weight_[l]);
    if (l == 0 && firstStage()) return {};
    std::span<float> gradBelow = std::span<float>(c.gradScratch[l % 2]).first(rows * shape.in);
    denseBackwardInput(shape, gradZ, store_.value(weight_[l]), gradBelow);
    if (l == 0) return gradBelow;  // the previous stage applies its activation's derivative
    activationBackward(options_.activation, c.pre[l - 1], gradBelow, gradBelow);
    gradZ = gradBelow;
  }
  return {};
}

}  // namespace loom::ddp
