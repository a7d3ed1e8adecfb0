// The data-parallel half of train_demo's layouts: over a data-parallel
// communicator, DistributedDataParallel (unless ZeRO-2 reduce-scatters the
// gradients itself) and the optimizer, replicated or ZeRO-1/2 sharded.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ddp/distributed/distributed_data_parallel.h"
#include "ddp/distributed/exposure_split.h"
#include "ddp/distributed/sharded_optimizer.h"
#include "ddp/optimizer.h"
#include "ddp/parameter_store.h"
#include "examples/train_demo_options.h"
#include "loom/loom.h"

namespace loom::demo {

// The optimizer --optimizer/--lr/... ask for.
std::unique_ptr<ddp::Optimizer> makeDemoOptimizer(const DemoOptions& o);

class DataParallelOptimizer {
 public:
  // Collective over dp (broadcasts its rank 0's parameters). store finalized.
  DataParallelOptimizer(const DemoOptions& o, loomComm_t dp, ddp::ParameterStore& store);
  // After backward: waits for DDP's bucket all-reduces (nothing under ZeRO-2).
  void finishGradientSync();
  void step(float lr);
  std::vector<float> saveState();  // collective under ZeRO; the store's layout
  void loadState(std::span<const float> full);
  size_t stateBytes() const;
  // Collective over dp: DDP's hidden share over all its ranks (their
  // summed exposed time over their summed communication time) with the
  // range over ranks, how much of the exposed time was ranks waiting for a
  // slower rank's backward, and what bounds the share when it is low; or why
  // there is none.
  std::string commSummary();
  void resetStats();
  std::string describe() const;

 private:
  const DemoOptions& o_;
  loomComm_t dp_;
  ddp::ParameterStore& store_;
  std::unique_ptr<ddp::DistributedDataParallel> ddp_;
  std::unique_ptr<ddp::Optimizer> plain_;
  std::unique_ptr<ddp::ShardedOptimizer> sharded_;
  std::vector<double> stepExposed_;  // this rank's exposed seconds, one per step since resetStats

  // Collective over dp: every rank's per-step exposed times, split
  // (ddp/distributed/exposure_split.h); none when the ranks ran different
  // numbers of steps. gathered: commSummary's figures of every rank.
  std::optional<ddp::ExposureSplit> gatherExposureSplit(std::span<const double> gathered, int ranks);
};

}  // namespace loom::demo
