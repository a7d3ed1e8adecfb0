// One ddp_bench configuration: its own replica of the MLP, gradient
// synchronization and optimizer, stepped on synthetic data (different per
// rank, as a sampler's shards would be). The tables (ddp_bench.cc,
// ddp_bench_tables.cc) step several in turn and read their results.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ddp/distributed/distributed_data_parallel.h"
#include "ddp/distributed/fully_sharded_mlp.h"
#include "ddp/distributed/parameter_server.h"
#include "ddp/distributed/sharded_optimizer.h"
#include "ddp/model/mlp.h"
#include "loom/loom.h"

namespace loom::bench {

struct BenchOptions {
  size_t hidden = 2048, depth = 4, batch = 32, input = 784, classes = 10;
  int steps = 20, warmup = 3;
  double bucketCapMb = 25;
  int threads = 0;             // > 0: ranks as threads of this process (loomCommInitAll)
  std::string table = "overlap";  // overlap | memory | strategies | scaling | all
  int servers = 0;             // parameter servers for the strategies table (0: N and 1)
  std::vector<size_t> layers() const;
  size_t parameters() const;
};

enum class Sync { kLocal, kDdp, kDdpNoOverlap, kDdpFp16, kZero1, kZero2, kZero3, kParameterServer };

// Bytes this rank holds for the model's buffers, by kind.
struct HeldBytes {
  size_t parameters = 0, gradients = 0, optimizerState = 0, gatherWindow = 0;
  size_t total() const { return parameters + gradients + optimizerState + gatherWindow; }
};

struct RunResult {
  double stepMs = 0, commMs = 0, exposedMs = 0, hidden = 0;
  size_t stateBytes = 0;
  HeldBytes held;
};

class Runner {
 public:
  // adamw: AdamW (two moments of state), else SGD with momentum. servers:
  // for kParameterServer.
  Runner(const BenchOptions& o, Sync sync, loomComm_t comm, int rank, bool adamw = false, int servers = 1);
  void step(bool timed);
  RunResult result() const;
  Sync sync() const { return sync_; }

 private:
  const BenchOptions& o_;
  Sync sync_;
  ddp::ParameterStore store_;
  std::unique_ptr<ddp::Mlp> mlp_;
  std::unique_ptr<ddp::FullyShardedMlp> sharded_;
  std::unique_ptr<ddp::DistributedDataParallel> ddp_;
  std::unique_ptr<ddp::ShardedOptimizer> zero_;
  std::unique_ptr<ddp::ParameterServer> ps_;
  std::unique_ptr<ddp::Optimizer> plain_;
  std::vector<float> x_;
  std::vector<uint8_t> y_;
  std::vector<double> seconds_;
};

double median(std::vector<double> v);

}  // namespace loom::bench
