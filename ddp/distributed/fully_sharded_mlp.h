// ZeRO stage 3 / fully sharded data parallel (PyTorch's FSDP with one unit
// per layer) for the demo's MLP: each rank holds 1/N of every layer's
// parameters, of their gradients and of the optimizer state; full layers
// exist only while they compute.
//
// A layer's parameters, weight then bias (torch.nn.Linear's order, the same
// flat layout as Mlp's ParameterStore), are padded to a multiple of N and
// split into N equal shards; rank r owns shard r. Per step:
//   forward:  layer i is all-gathered into one of two layer-sized slots while
//             layer i-1 computes (prefetch), used, and its slot is reused by
//             layer i+2 (freed after use); the last layer stays gathered for
//             backward;
//   backward: layer i-1 is gathered while layer i computes; layer i's full
//             gradient is reduce-scattered (average over ranks) into this
//             rank's gradient shard while the input gradient computes;
//   step():   the inner optimizer updates this rank's shards only.
// All communication of one step is enqueued on one Loom stream, in the same
// order on every rank. Under LOOM_DETERMINISTIC=1 the reduce-scatter folds
// ranks in the same order as DDP's all-reduce, so training is bit-identical
// to DistributedDataParallel + the same optimizer.
//
// Activations are not sharded (each rank's batch is its own). Gradients are
// not accumulated across backward calls: every backward reduces its
// gradients and step() consumes them.
//
// Every call except the accessors is collective. Errors: std::invalid_argument
// / std::runtime_error naming the rank and carrying Loom's message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ddp/model/activation.h"
#include "ddp/model/dense.h"
#include "ddp/model/mlp.h"
#include "ddp/optimizer.h"
#include "loom/loom.h"

namespace loom::ddp {

class FullyShardedMlp {
 public:
  // `inner` is a fresh optimizer; it sees only this rank's shards (all layers'
  // shards concatenated, padding included: padding has zero gradient). The
  // parameters start as Mlp::initialize(seed) would set them, each rank
  // drawing the full sequence and keeping its shards (one layer at a time).
  FullyShardedMlp(loomComm_t comm, MlpOptions options, std::unique_ptr<Optimizer> inner, uint64_t seed);
  ~FullyShardedMlp();
  FullyShardedMlp(const FullyShardedMlp&) = delete;
  FullyShardedMlp& operator=(const FullyShardedMlp&) = delete;

  // As Mlp's: logits of batch x classes, valid until the next forward.
  std::span<const float> forward(std::span<const float> input, size_t batch);
  float loss(std::span<const uint8_t> labels);
  size_t correct(std::span<const uint8_t> labels) const;
  // Computes the gradients and reduce-scatters them; returns once this rank's
  // gradient shards hold the average over ranks.
  void backward();
  // One optimizer update of this rank's shards from its gradient shards.
  void step();

  Optimizer& inner() { return *inner_; }
  size_t numLayers() const { return layers_.size(); }
  size_t totalParameters() const { return total_; }

  // Bytes this rank holds for the model, by kind (the activations excluded).
  struct MemoryUse {
    size_t parameterShards = 0;  // this rank's shards of every layer
    size_t gradientShards = 0;
    size_t optimizerState = 0;
    size_t gatherWindow = 0;     // two gathered-parameter slots + one full-gradient slot
    size_t total() const { return parameterShards + gradientShards + optimizerState + gatherWindow; }
  };
  MemoryUse memoryUse() const;

  // The whole model's parameters in Mlp's ParameterStore layout, on every
  // rank (all-gather, layer by layer): for checkpoints and checks.
  std::vector<float> gatherFullParameters();
  // Keeps this rank's shards of a full parameter vector (same layout).
  void loadFullParameters(std::span<const float> full);
  // Optimizer state in the layout of the unsharded inner optimizer over the
  // whole model (step count, then each per-element array in Mlp's layout), so
  // a checkpoint does not depend on the number of ranks; and back.
  std::vector<float> saveState();
  void loadState(std::span<const float> full);

 private:
  struct Layer {
    DenseShape shape;         // batch filled in per call
    size_t size = 0;          // out*in + out: weight then bias
    size_t shard = 0;         // elements per rank, padding included
    size_t shardOffset = 0;   // first element of this layer's shard in the flat shard buffers
  };

  void check(loomResult_t r, const std::string& what) const;
  std::string where() const { return "rank " + std::to_string(rank_); }
  // Enqueues the all-gather of layer i into its slot (i % 2).
  void startGather(size_t layer);
  void waitComm();
  std::span<float> slot(size_t layer);
  std::span<const float> weightOf(size_t layer);
  std::span<const float> biasOf(size_t layer);
  DenseShape shapeOf(size_t layer) const;
  std::span<const float> layerInput(size_t layer) const;
  void reserve(size_t batch);
  // Gathers each layer's full per-element array `arrays` of the shards
  // (`shardArray` is this rank's concatenated shard array) into Mlp's layout.
  std::vector<float> gatherLayers(std::span<const float> shardArray);

  loomComm_t comm_;
  MlpOptions options_;
  std::unique_ptr<Optimizer> inner_;
  int rank_ = 0, nranks_ = 1;
  std::vector<Layer> layers_;
  size_t total_ = 0;       // parameters of the whole model
  size_t shardTotal_ = 0;  // sum of the layers' padded shards
  loomStream_t stream_ = nullptr;

  std::vector<float> values_;  // this rank's shards, layer after layer
  std::vector<float> grads_;
  std::vector<float> slots_[2];   // gathered layers (padded), alternating
  std::vector<float> gradSlot_;   // one layer's full (padded) gradient
  int slotLayer_[2] = {-1, -1};   // which layer each slot holds

  size_t capacity_ = 0, batch_ = 0;
  bool haveForward_ = false, haveLoss_ = false;
  std::vector<float> input_;
  std::vector<std::vector<float>> preActivation_, postActivation_;
  std::vector<float> gradLogits_;
  std::vector<float> gradScratch_[2];
};

}  // namespace loom::ddp
