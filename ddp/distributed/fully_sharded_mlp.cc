#include "ddp/distributed/fully_sharded_mlp.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <utility>

#include "ddp/model/init.h"
#include "ddp/model/softmax_cross_entropy.h"
#include "ddp/optim/step_count.h"

namespace loom::ddp {

FullyShardedMlp::FullyShardedMlp(loomComm_t comm, MlpOptions options, std::unique_ptr<Optimizer> inner, uint64_t seed)
    : comm_(comm), options_(std::move(options)), inner_(std::move(inner)) {
  if (!comm) throw std::invalid_argument("FullyShardedMlp: comm is NULL");
  if (!inner_) throw std::invalid_argument("FullyShardedMlp: inner optimizer is NULL");
  if (loomCommUserRank(comm, &rank_) != loomSuccess || loomCommCount(comm, &nranks_) != loomSuccess)
    throw std::invalid_argument("FullyShardedMlp: comm is not a valid communicator");
  const std::vector<size_t>& widths = options_.layers;
  if (widths.size() < 2) throw std::invalid_argument("FullyShardedMlp on " + where() + ": options.layers needs at least 2 widths");
  for (size_t i = 0; i < widths.size(); ++i) {
    if (widths[i] == 0) throw std::invalid_argument("FullyShardedMlp on " + where() + ": options.layers[" + std::to_string(i) + "] is 0");
  }
  if (widths.back() > 256) throw std::invalid_argument("FullyShardedMlp on " + where() + ": more than 256 classes (labels are uint8_t)");

  const size_t n = static_cast<size_t>(nranks_);
  size_t widestLayer = 0;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    Layer layer;
    layer.shape = DenseShape{0, widths[i], widths[i + 1]};
    layer.size = widths[i + 1] * widths[i] + widths[i + 1];
    layer.shard = (layer.size + n - 1) / n;
    layer.shardOffset = shardTotal_;
    shardTotal_ += layer.shard;
    total_ += layer.size;
    widestLayer = std::max(widestLayer, layer.shard * n);
    layers_.push_back(layer);
  }

  // Same model on every rank, else the shards would not line up.
  std::vector<uint64_t> totals(n);
  totals[rank_] = total_;
  check(loomAllGather(totals.data() + rank_, totals.data(), 1, loomUint64, comm_, nullptr), "layout check (all-gather)");
  for (int peer = 0; peer < nranks_; ++peer) {
    if (totals[peer] != total_) {
      throw std::invalid_argument("FullyShardedMlp: " + where() + " has " + std::to_string(total_) +
                                  " parameters but rank " + std::to_string(peer) + " has " + std::to_string(totals[peer]));
    }
  }

  values_.assign(shardTotal_, 0.0f);
  grads_.assign(shardTotal_, 0.0f);
  for (auto& s : slots_) s.assign(widestLayer, 0.0f);
  gradSlot_.assign(widestLayer, 0.0f);
  preActivation_.resize(layers_.size());
  postActivation_.resize(layers_.size() - 1);

  // Mlp::initialize's draws, layer by layer: weight then bias, one bound.
  std::mt19937_64 rng(seed);
  std::vector<float> full;
  for (const Layer& layer : layers_) {
    full.assign(layer.shard * n, 0.0f);
    const size_t weights = layer.shape.out * layer.shape.in;
    const float bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(layer.shape.in)));
    fillUniform(rng, bound, std::span<float>(full).first(weights));
    fillUniform(rng, bound, std::span<float>(full).subspan(weights, layer.shape.out));
    std::copy_n(full.begin() + rank_ * layer.shard, layer.shard, values_.begin() + layer.shardOffset);
  }

  const loomResult_t r = loomStreamCreate(&stream_);
  if (r != loomSuccess) check(r, "loomStreamCreate");
}

FullyShardedMlp::~FullyShardedMlp() {
  if (stream_) loomStreamDestroy(stream_);
}

void FullyShardedMlp::check(loomResult_t r, const std::string& what) const {
  if (r == loomSuccess) return;
  std::string detail = loomGetLastError(comm_);
  throw std::runtime_error("FullyShardedMlp: " + what + " failed on " + where() + ": " + loomGetErrorString(r) +
                           (detail.empty() ? "" : ": " + detail));
}

void FullyShardedMlp::startGather(size_t layer) {
  const size_t s = layer % 2;
  if (slotLayer_[s] == static_cast<int>(layer)) return;  // still there, and the parameters have not changed
  const Layer& l = layers_[layer];
  check(loomAllGather(values_.data() + l.shardOffset, slots_[s].data(), l.shard, loomFloat32, comm_, stream_),
        "all-gather of layer " + std::to_string(layer));
  slotLayer_[s] = static_cast<int>(layer);
}

void FullyShardedMlp::waitComm() { check(loomStreamSynchronize(stream_), "communication of the step"); }

std::span<float> FullyShardedMlp::slot(size_t layer) {
  return std::span<float>(slots_[layer % 2]).first(layers_[layer].size);
}
std::span<const float> FullyShardedMlp::weightOf(size_t layer) {
  return slot(layer).first(layers_[layer].shape.out * layers_[layer].shape.in);
}
std::span<const float> FullyShardedMlp::biasOf(size_t layer) {
  return slot(layer).last(layers_[layer].shape.out);
}

DenseShape FullyShardedMlp::shapeOf(size_t layer) const {
  DenseShape shape = layers_[layer].shape;
  shape.batch = batch_;
  return shape;
}

std::span<const float> FullyShardedMlp::layerInput(size_t layer) const {
  if (layer == 0) return std::span<const float>(input_).first(batch_ * layers_[0].shape.in);
  return std::span<const float>(postActivation_[layer - 1]).first(batch_ * layers_[layer].shape.in);
}

void FullyShardedMlp::reserve(size_t batch) {
  if (batch <= capacity_) return;
  size_t widest = 0;
  for (const Layer& layer : layers_) widest = std::max({widest, layer.shape.in, layer.shape.out});
  input_.resize(batch * layers_.front().shape.in);
  for (size_t i = 0; i < layers_.size(); ++i) preActivation_[i].resize(batch * layers_[i].shape.out);
  for (size_t i = 0; i + 1 < layers_.size(); ++i) postActivation_[i].resize(batch * layers_[i].shape.out);
  gradLogits_.resize(batch * layers_.back().shape.out);
  for (auto& scratch : gradScratch_) scratch.resize(batch * widest);
  capacity_ = batch;
}

std::span<const float> FullyShardedMlp::forward(std::span<const float> input, size_t batch) {
  if (batch == 0) throw std::invalid_argument("FullyShardedMlp::forward on " + where() + ": batch is 0");
  const size_t inWidth = layers_.front().shape.in;
  if (input.size() != batch * inWidth) {
    throw std::invalid_argument("FullyShardedMlp::forward on " + where() + ": input has " + std::to_string(input.size()) +
                                " elements, expected batch * layers.front() = " + std::to_string(batch * inWidth));
  }
  reserve(batch);
  batch_ = batch;
  haveLoss_ = false;
  std::copy(input.begin(), input.end(), input_.begin());
  startGather(0);
  waitComm();
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (i + 1 < layers_.size()) startGather(i + 1);  // prefetch: moves while layer i computes
    const DenseShape shape = shapeOf(i);
    std::span<float> z = std::span<float>(preActivation_[i]).first(batch_ * shape.out);
    denseForward(shape, layerInput(i), weightOf(i), biasOf(i), z);
    if (i + 1 < layers_.size()) {
      activationForward(options_.activation, z, std::span<float>(postActivation_[i]).first(batch_ * shape.out));
      waitComm();
    }
  }
  haveForward_ = true;
  return std::span<const float>(preActivation_.back()).first(batch_ * layers_.back().shape.out);
}

float FullyShardedMlp::loss(std::span<const uint8_t> labels) {
  if (!haveForward_) throw std::logic_error("FullyShardedMlp::loss: no forward() yet");
  if (labels.size() != batch_) {
    throw std::invalid_argument("FullyShardedMlp::loss on " + where() + ": labels has " + std::to_string(labels.size()) +
                                " elements but the last forward's batch is " + std::to_string(batch_));
  }
  const size_t classes = layers_.back().shape.out;
  const float value = softmaxCrossEntropy(std::span<const float>(preActivation_.back()).first(batch_ * classes), labels,
                                          classes, std::span<float>(gradLogits_).first(batch_ * classes));
  haveLoss_ = true;
  return value;
}

size_t FullyShardedMlp::correct(std::span<const uint8_t> labels) const {
  if (!haveForward_) throw std::logic_error("FullyShardedMlp::correct: no forward() yet");
  if (labels.size() != batch_) {
    throw std::invalid_argument("FullyShardedMlp::correct on " + where() + ": labels has " + std::to_string(labels.size()) +
                                " elements but the last forward's batch is " + std::to_string(batch_));
  }
  const size_t classes = layers_.back().shape.out;
  return countCorrect(std::span<const float>(preActivation_.back()).first(batch_ * classes), labels, classes);
}

void FullyShardedMlp::backward() {
  if (!haveLoss_) throw std::logic_error("FullyShardedMlp::backward: call loss() after forward() first");
  startGather(layers_.size() - 1);  // normally still gathered from forward
  waitComm();
  std::span<const float> gradZ = std::span<const float>(gradLogits_).first(batch_ * layers_.back().shape.out);
  for (size_t i = layers_.size(); i-- > 0;) {
    const Layer& layer = layers_[i];
    const DenseShape shape = shapeOf(i);
    if (i > 0) startGather(i - 1);  // prefetch the layer below
    // The full gradient of layer i, padded with zeros to N equal shards.
    std::span<float> gradFull = std::span<float>(gradSlot_).first(layer.shard * static_cast<size_t>(nranks_));
    std::fill(gradFull.begin(), gradFull.end(), 0.0f);
    const size_t weights = shape.out * shape.in;
    denseBackwardWeight(shape, gradZ, layerInput(i), gradFull.first(weights));
    denseBackwardBias(shape, gradZ, gradFull.subspan(weights, shape.out));
    check(loomReduceScatter(gradFull.data(), grads_.data() + layer.shardOffset, layer.shard, loomFloat32, loomAvg, comm_,
                            stream_),
          "reduce-scatter of layer " + std::to_string(i) + "'s gradient");
    if (i > 0) {
      // Overlaps the reduce-scatter above and the gather of layer i-1.
      std::span<float> gradBelow = std::span<float>(gradScratch_[i % 2]).first(batch_ * shape.in);
      denseBackwardInput(shape, gradZ, weightOf(i), gradBelow);
      activationBackward(options_.activation, std::span<const float>(preActivation_[i - 1]).first(batch_ * shape.in),
                         gradBelow, gradBelow);
      gradZ = gradBelow;
    }
    waitComm();  // the gradient slot is reused next, and layer i-1 must be there
  }
  haveLoss_ = false;
}

void FullyShardedMlp::step() {
  inner_->step(values_, grads_);
  slotLayer_[0] = slotLayer_[1] = -1;  // gathered copies are stale now
}

FullyShardedMlp::MemoryUse FullyShardedMlp::memoryUse() const {
  MemoryUse m;
  m.parameterShards = values_.size() * sizeof(float);
  m.gradientShards = grads_.size() * sizeof(float);
  m.optimizerState = inner_->stateBytes();
  m.gatherWindow = (slots_[0].size() + slots_[1].size() + gradSlot_.size()) * sizeof(float);
  return m;
}

std::vector<float> FullyShardedMlp::gatherLayers(std::span<const float> shardArray) {
  waitComm();
  std::vector<float> full(total_);
  std::vector<float> gathered;
  size_t at = 0;
  for (const Layer& layer : layers_) {
    gathered.resize(layer.shard * static_cast<size_t>(nranks_));
    check(loomAllGather(shardArray.data() + layer.shardOffset, gathered.data(), layer.shard, loomFloat32, comm_, nullptr),
          "all-gather of a full layer");
    std::copy_n(gathered.begin(), layer.size, full.begin() + at);
    at += layer.size;
  }
  return full;
}

std::vector<float> FullyShardedMlp::gatherFullParameters() { return gatherLayers(values_); }

void FullyShardedMlp::loadFullParameters(std::span<const float> full) {
  if (full.size() != total_) {
    throw std::invalid_argument("FullyShardedMlp::loadFullParameters on " + where() + ": " + std::to_string(full.size()) +
                                " values, the model has " + std::to_string(total_));
  }
  size_t at = 0;
  for (const Layer& layer : layers_) {
    const size_t begin = std::min(layer.size, static_cast<size_t>(rank_) * layer.shard);
    const size_t count = std::min(layer.size, begin + layer.shard) - begin;
    float* mine = values_.data() + layer.shardOffset;
    std::fill(mine, mine + layer.shard, 0.0f);
    std::copy_n(full.begin() + at + begin, count, mine);
    at += layer.size;
  }
  slotLayer_[0] = slotLayer_[1] = -1;
}

std::vector<float> FullyShardedMlp::saveState() {
  constexpr size_t kHeader = optim::kStepCountFloats;
  const std::vector<float> local = inner_->saveState();
  if (local.size() < kHeader || (local.size() - kHeader) % shardTotal_ != 0) {
    throw std::runtime_error("FullyShardedMlp::saveState on " + where() + ": the inner optimizer's state (" +
                             std::to_string(local.size()) + " floats) is not a step count plus arrays over its " +
                             std::to_string(shardTotal_) + " shard elements");
  }
  const size_t arrays = (local.size() - kHeader) / shardTotal_;
  std::vector<float> full(kHeader + arrays * total_);
  std::copy_n(local.begin(), kHeader, full.begin());
  for (size_t j = 0; j < arrays; ++j) {
    const std::vector<float> array =
        gatherLayers(std::span<const float>(local).subspan(kHeader + j * shardTotal_, shardTotal_));
    std::copy(array.begin(), array.end(), full.begin() + kHeader + j * total_);
  }
  return full;
}

void FullyShardedMlp::loadState(std::span<const float> full) {
  constexpr size_t kHeader = optim::kStepCountFloats;
  if (full.size() < kHeader || (full.size() - kHeader) % total_ != 0) {
    throw std::invalid_argument("FullyShardedMlp::loadState on " + where() + ": state has " + std::to_string(full.size()) +
                                " floats, not a step count plus whole arrays over the model's " + std::to_string(total_) +
                                " parameters");
  }
  const size_t arrays = (full.size() - kHeader) / total_;
  std::vector<float> mine(kHeader + arrays * shardTotal_, 0.0f);
  std::copy_n(full.begin(), kHeader, mine.begin());
  for (size_t j = 0; j < arrays; ++j) {
    size_t at = 0;
    for (const Layer& layer : layers_) {
      const size_t begin = std::min(layer.size, static_cast<size_t>(rank_) * layer.shard);
      const size_t count = std::min(layer.size, begin + layer.shard) - begin;
      std::copy_n(full.begin() + kHeader + j * total_ + at + begin, count,
                  mine.begin() + kHeader + j * shardTotal_ + layer.shardOffset);
      at += layer.size;
    }
  }
  inner_->loadState(mine);
}

}  // namespace loom::ddp
