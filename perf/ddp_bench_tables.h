// ddp_bench's tables; each is collective over comm and printed by rank 0.
//   overlap:    DDP overlap on/off, fp16 hook, ZeRO-1/2 step times and the
//               hidden share of communication (ddp_bench.cc)
//   memory:     bytes held per rank for parameters, gradients, optimizer
//               state and ZeRO-3's gather window: DDP vs ZeRO-1/2/3 (AdamW)
//   strategies: DDP's all-reduce forced to ring and to tree against a
//               parameter server with 1 and with S sharded servers
//   scaling:    one line of DDP samples/s at this world size and mode, for
//               perf/ddp_scaling.sh to tabulate over 1/2/4/8 ranks
#pragma once

#include "loom/loom.h"
#include "perf/ddp_bench_runner.h"

namespace loom::bench {

struct BenchWorld {
  loomComm_t comm;
  int rank;
  int nranks;
  const char* mode;  // "processes" or "threads"
};

void overlapTable(const BenchOptions& o, const BenchWorld& w);
void memoryTable(const BenchOptions& o, const BenchWorld& w);
void strategiesTable(const BenchOptions& o, const BenchWorld& w);
void scalingLine(const BenchOptions& o, const BenchWorld& w);

// Steps every runner in turn (all ranks entering each step together) for
// o.warmup untimed and o.steps timed rounds.
void stepInTurn(const BenchOptions& o, const BenchWorld& w, std::vector<std::unique_ptr<Runner>>& runners);
void check(loomResult_t r, loomComm_t comm, const char* what);

}  // namespace loom::bench
