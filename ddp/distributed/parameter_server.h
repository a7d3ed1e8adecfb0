// A sharded parameter server (the "PS" of TensorFlow 1 and of the first
// distributed-training papers), as the baseline that all-reduce replaced.
// Ranks 0..S-1 of the communicator are also servers; every rank is a
// worker. The flat parameter buffer is split into S contiguous shards
// (padded equally); server s owns shard s and the optimizer state for it.
// Each step():
//   push: every worker sends shard s of its local gradient to server s;
//   server s averages the N contributions (summed in rank order) and
//   updates its shard with its own inner optimizer;
//   pull: server s sends its updated shard to every worker.
// With S = 1 one server receives and sends everything (its links carry
// 2(N-1)/1 times the model per step); sharding over S servers divides that
// by S. Pushes and pulls are each one group of loomSend/loomRecv, so a
// server never waits on a worker that waits on it.
//
// Collective: every rank calls step() in the same order. Errors name the rank.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "ddp/optimizer.h"
#include "ddp/parameter_store.h"
#include "loom/loom.h"

namespace loom::ddp {

class ParameterServer {
 public:
  // `inner` is used on server ranks only (a fresh optimizer). servers in
  // [1, N] (std::invalid_argument otherwise). Broadcasts rank 0's values.
  ParameterServer(loomComm_t comm, ParameterStore& store, std::unique_ptr<Optimizer> inner, int servers);

  void step();

  int servers() const { return servers_; }
  bool isServer() const { return rank_ < servers_; }
  // Optimizer-state bytes held here (0 on pure workers).
  size_t stateBytes() const { return isServer() ? inner_->stateBytes() : 0; }

 private:
  void check(loomResult_t r, const std::string& what) const;
  std::string where() const { return "rank " + std::to_string(rank_); }
  size_t shardBegin(int s) const;
  size_t shardCount(int s) const;

  loomComm_t comm_;
  ParameterStore& store_;
  std::unique_ptr<Optimizer> inner_;
  int servers_;
  int rank_ = 0, nranks_ = 1;
  size_t total_ = 0, shard_ = 0;
  std::vector<float> received_;  // server: N workers' gradient shards
  std::vector<float> average_;   // server: their average
};

}  // namespace loom::ddp
