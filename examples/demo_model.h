// What train_demo's training loop needs from a parallel layout: one
// optimizer step on this rank's share of a batch, evaluation, the whole
// model's parameters and optimizer state (for checkpoints and the final
// checksum), and a line of statistics per epoch. One implementation per
// layout:
//   demo_replicated_model.cc  DDP (+ ZeRO-1/2) over the world: every rank a replica
//   demo_sharded_model.cc     ZeRO-3: FullyShardedMlp over the world
//   demo_tensor_model.cc      TP x DP: TensorParallelMlp, DDP (+ ZeRO-1/2) over the DP group
//   demo_pipeline_model.cc    PP x TP x DP: 1F1B stages (tensor-parallel with --tp), DDP (+ ZeRO-1/2) over the DP group
// Calls marked collective must be made by every rank of the world in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "examples/train_demo_options.h"
#include "loom/loom.h"

namespace loom::demo {

// Sums this rank reports for a step; ranks that share a replica's work (TP
// ranks, pipeline stages) report it once, so that sums over all ranks count
// every sample once.
struct StepTally {
  double lossSum = 0, correct = 0, samples = 0;
};

class DemoModel {
 public:
  virtual ~DemoModel() = default;
  // The sampler's replicas: the data-parallel group.
  virtual int dataParallelSize() const = 0;
  virtual int dataParallelRank() const = 0;
  // Collective: forward, backward, gradient synchronization and optimizer
  // step on `batch` rows (this replica's share of the global batch).
  virtual StepTally trainStep(std::span<const float> images, std::span<const uint8_t> labels, size_t batch, float lr) = 0;
  // Collective: correct rows, reported once per replica.
  virtual double evaluate(std::span<const float> images, std::span<const uint8_t> labels, size_t batch) = 0;
  // Collective: the whole model in Mlp's layout, on every rank.
  virtual std::vector<float> fullParameters() = 0;
  virtual void loadFullParameters(std::span<const float> values) = 0;
  // Collective: the optimizer state in the unsharded layout.
  virtual std::vector<float> saveOptimizerState() = 0;
  virtual void loadOptimizerState(std::span<const float> state) = 0;
  virtual bool supportsCheckpoints() const { return true; }
  // Optimizer-state bytes on this rank.
  virtual size_t optimizerStateBytes() const = 0;
  // Bytes this rank holds for parameters, gradients and optimizer state
  // (and, for ZeRO-3, its gather window).
  virtual size_t modelBytes() const = 0;
  virtual std::string describe() const = 0;
  // Collective: the epoch's communication statistics (printed by rank 0).
  virtual std::string epochSummary() = 0;
  virtual void resetStats() {}
};

// The layout the options ask for (--zero, --tp, --pp); std::invalid_argument
// if the world does not fit it. layers: the MLP's widths.
std::unique_ptr<DemoModel> makeDemoModel(const DemoOptions& o, loomComm_t world, const std::vector<size_t>& layers);

// Implementations (one file each).
std::unique_ptr<DemoModel> makeReplicatedModel(const DemoOptions& o, loomComm_t world, const std::vector<size_t>& layers);
std::unique_ptr<DemoModel> makeShardedModel(const DemoOptions& o, loomComm_t world, const std::vector<size_t>& layers);
std::unique_ptr<DemoModel> makeTensorParallelModel(const DemoOptions& o, loomComm_t world, const std::vector<size_t>& layers);
std::unique_ptr<DemoModel> makePipelineModel(const DemoOptions& o, loomComm_t world, const std::vector<size_t>& layers);

}  // namespace loom::demo
