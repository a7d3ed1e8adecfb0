// ZeRO stages 1 and 2 (DeepSpeed; PyTorch's ZeroRedundancyOptimizer):
// optimizer state is partitioned across ranks instead of replicated.
//
// The flat parameter buffer is padded to a multiple of nranks and split into
// equal shards; rank r owns elements [r*shard, (r+1)*shard) (its last rank's
// shard may reach into the padding, which it ignores). Each step:
//   stage 2: reduce-scatter (average) the local gradients: each rank receives
//            only its shard's averaged gradient (no DistributedDataParallel);
//   stage 1: the gradients are already averaged (DistributedDataParallel ran);
//            each rank reads its shard of them;
// then each rank updates only its shard with its own inner Optimizer (state
// for ~1/N of the elements) and all-gathers the parameters so every rank
// again holds the whole, identical model.
//
// Every call except stateBytes() is collective: all ranks call it in the
// same order. Errors: std::invalid_argument / std::runtime_error naming the
// rank and carrying Loom's message.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ddp/optimizer.h"
#include "ddp/parameter_store.h"
#include "loom/loom.h"

namespace loom::ddp {

class ShardedOptimizer {
 public:
  // `inner` is a fresh optimizer (no state yet); it will only ever see this
  // rank's shard. Broadcasts rank 0's parameter values (blocking) so the
  // replicas start identical. stage is 1 or 2.
  ShardedOptimizer(loomComm_t comm, ParameterStore& store, std::unique_ptr<Optimizer> inner, int stage);

  void step();

  // Optimizer-state bytes held by this rank (the unsharded optimizer would
  // hold about nranks times as much).
  size_t stateBytes() const { return inner_->stateBytes(); }

  // Checkpoints. saveState() returns on every rank the FULL state in the
  // layout of the unsharded inner optimizer over the whole model (step count,
  // then each per-element array over all elements), so a checkpoint does not
  // depend on the number of ranks. loadState() takes such a full state and
  // keeps this rank's shard of it. Both assume the inner optimizer's state is
  // [step count (2 floats)][k arrays, one float per element], as SGD's and
  // AdamW's are, and check it.
  std::vector<float> saveState();
  void loadState(std::span<const float> full);

  Optimizer& inner() { return *inner_; }
  int stage() const { return stage_; }
  // This rank's shard: first element and number of real (unpadded) elements.
  size_t shardOffset() const { return ownBegin_; }
  size_t shardSize() const { return ownCount_; }
  size_t paddedShardSize() const { return shard_; }

 private:
  void check(loomResult_t r, const char* what) const;
  std::string where() const { return "rank " + std::to_string(rank_); }

  loomComm_t comm_;
  ParameterStore& store_;
  std::unique_ptr<Optimizer> inner_;
  int stage_;
  int rank_ = 0, nranks_ = 1;
  size_t total_ = 0;
  size_t shard_ = 0;     // elements per rank, padding included
  size_t ownBegin_ = 0;  // rank * shard
  size_t ownCount_ = 0;  // elements of the real buffer in this rank's shard
  std::vector<float> gradShard_;  // stage 2: this rank's averaged gradient
  std::vector<float> padded_;     // nranks*shard staging buffer, only when total % nranks != 0
};

}  // namespace loom::ddp
