// The demo's MLP with Megatron tensor parallelism over a TP group of T ranks:
// hidden layers alternate column-parallel (even index) and row-parallel (odd
// index), so each pair costs one all-reduce forward and one backward
// (tensor_parallel_dense.h); the classifier (the last layer) is replicated:
// every TP rank computes it on the same input, so its gradients agree
// without communication. The number of hidden layers must be even and every
// hidden width a multiple of T.
//
// Parameters live in the caller's ParameterStore with their local shapes
// ("fc<i>.weight" = this rank's rows or columns), so DistributedDataParallel
// or ZeRO-1/2 over the data-parallel group work unchanged: the members of a
// DP group hold the same shards. Backward marks each parameter ready as Mlp
// does. Initial values are the matching slices of Mlp::initialize(seed).
// Collective over the TP group: forward, backward, fullParameters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ddp/model/mlp.h"
#include "ddp/parallel/tensor_parallel_dense.h"
#include "ddp/parameter_store.h"

namespace loom::ddp {

class TensorParallelMlp {
 public:
  // std::invalid_argument naming the layer if a width does not divide or the
  // number of hidden layers is odd.
  TensorParallelMlp(ParameterStore& store, MlpOptions options, loomComm_t tensorParallel);

  void initialize(uint64_t seed);
  std::span<const float> forward(std::span<const float> input, size_t batch);
  float loss(std::span<const uint8_t> labels);
  size_t correct(std::span<const uint8_t> labels) const;
  void backward();

  // The whole model in Mlp's layout, on every TP rank (all-gathers the shards).
  std::vector<float> fullParameters();

 private:
  enum class Kind { kColumn, kRow, kReplicated };
  struct Layer {
    Kind kind;
    DenseShape full;  // batch filled per call
    size_t weight = 0, bias = 0;
    size_t outLocal = 0;  // width of this rank's output
  };

  ParameterStore& store_;
  MlpOptions options_;
  TensorParallelGroup tp_;
  std::vector<Layer> layers_;
  size_t batch_ = 0;
  bool haveLoss_ = false;
  std::vector<float> input_;
  std::vector<std::vector<float>> pre_, post_;
  std::vector<float> gradLogits_, gradScratch_[2];
};

}  // namespace loom::ddp
