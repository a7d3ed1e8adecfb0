#include "perf/ddp_bench_tables.h"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace loom::bench {

void check(loomResult_t r, loomComm_t comm, const char* what) {
  if (r != loomSuccess)
    throw std::runtime_error(std::string(what) + ": " + loomGetErrorString(r) + ": " + loomGetLastError(comm));
}

void stepInTurn(const BenchOptions& o, const BenchWorld& w, std::vector<std::unique_ptr<Runner>>& runners) {
  for (int step = 0; step < o.warmup + o.steps; ++step) {
    for (auto& runner : runners) {
      check(loomBarrier(w.comm, nullptr), w.comm, "barrier");
      runner->step(step >= o.warmup);
    }
  }
}

namespace {

double mb(size_t bytes) { return static_cast<double>(bytes) / 1e6; }

// A communicator over the same ranks whose all-reduce may only use `algo`:
// LOOM_ALGO is read when a communicator is created, and every rank adopts
// rank 0's, so only rank 0 of a threads world needs to set it (processes
// each set their own). Barriers keep other threads' splits off the change.
loomComm_t commWithAlgorithm(const BenchWorld& w, const char* algo) {
  const bool setsEnvironment = std::string(w.mode) == "processes" || w.rank == 0;
  check(loomBarrier(w.comm, nullptr), w.comm, "barrier");
  const char* previous = std::getenv("LOOM_ALGO");
  const std::string saved = previous ? previous : "";
  if (setsEnvironment) setenv("LOOM_ALGO", algo, 1);
  loomComm_t out = nullptr;
  check(loomCommSplit(w.comm, 0, w.rank, &out), w.comm, "loomCommSplit");
  check(loomBarrier(w.comm, nullptr), w.comm, "barrier");
  if (setsEnvironment) {
    if (previous) setenv("LOOM_ALGO", saved.c_str(), 1);
    else unsetenv("LOOM_ALGO");
  }
  return out;
}

}  // namespace

void memoryTable(const BenchOptions& o, const BenchWorld& w) {
  const struct {
    const char* name;
    Sync sync;
  } rows[] = {{"DDP (replicated)", Sync::kDdp}, {"ZeRO-1", Sync::kZero1}, {"ZeRO-2", Sync::kZero2}, {"ZeRO-3 (fully sharded)", Sync::kZero3}};
  std::vector<std::unique_ptr<Runner>> runners;
  for (const auto& row : rows) runners.push_back(std::make_unique<Runner>(o, row.sync, w.comm, w.rank, true));
  stepInTurn(o, w, runners);
  if (w.rank == 0) {
    std::printf("\n# memory per rank (AdamW, %d ranks, %s): bytes held by the model's buffers after %d steps "
                "(activations excluded); 'max' is the largest total of any rank\n", w.nranks, w.mode, o.warmup + o.steps);
    std::printf("%-24s %8s %9s %9s %9s %9s %9s %9s %8s\n", "configuration", "step ms", "params MB", "grads MB", "optim MB",
                "gather MB", "total MB", "max MB", "vs DDP");
  }
  double ddpTotal = 0;
  for (size_t i = 0; i < runners.size(); ++i) {
    const RunResult r = runners[i]->result();
    double total = static_cast<double>(r.held.total());
    double max = total;
    check(loomAllReduce(&max, &max, 1, loomFloat64, loomMax, w.comm, nullptr), w.comm, "all-reduce (max)");
    if (i == 0) ddpTotal = max;
    if (w.rank != 0) continue;
    std::printf("%-24s %8.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %7.2fx\n", rows[i].name, r.stepMs, mb(r.held.parameters),
                mb(r.held.gradients), mb(r.held.optimizerState), mb(r.held.gatherWindow), total / 1e6, max / 1e6,
                max / ddpTotal);
  }
}

void strategiesTable(const BenchOptions& o, const BenchWorld& w) {
  loomComm_t ring = commWithAlgorithm(w, "allreduce:ring");
  loomComm_t tree = commWithAlgorithm(w, "allreduce:tree");
  const int sharded = o.servers > 0 ? std::min(o.servers, w.nranks) : w.nranks;
  std::vector<std::unique_ptr<Runner>> runners;
  runners.push_back(std::make_unique<Runner>(o, Sync::kDdp, ring, w.rank));
  runners.push_back(std::make_unique<Runner>(o, Sync::kDdp, tree, w.rank));
  runners.push_back(std::make_unique<Runner>(o, Sync::kParameterServer, w.comm, w.rank, false, 1));
  runners.push_back(std::make_unique<Runner>(o, Sync::kParameterServer, w.comm, w.rank, false, sharded));
  stepInTurn(o, w, runners);
  char ringAlgo[64] = "", treeAlgo[64] = "";
  loomCommGetLastAlgorithm(ring, ringAlgo, sizeof(ringAlgo));
  loomCommGetLastAlgorithm(tree, treeAlgo, sizeof(treeAlgo));
  const std::string names[] = {std::string("DDP all-reduce, ") + ringAlgo, std::string("DDP all-reduce, ") + treeAlgo,
                               "parameter server, 1 server", "parameter server, " + std::to_string(sharded) + " servers"};
  if (w.rank == 0) {
    std::printf("\n# gradient synchronization strategies (%d ranks, %s, SGD): median step ms (forward, backward, sync, update)\n",
                w.nranks, w.mode);
    std::printf("%-36s %10s %10s %10s\n", "strategy", "step ms", "comm ms", "vs ring");
  }
  double ringMs = 0;
  for (size_t i = 0; i < runners.size(); ++i) {
    const RunResult r = runners[i]->result();
    if (i == 0) ringMs = r.stepMs;
    if (w.rank != 0) continue;
    if (i < 2) std::printf("%-36s %10.1f %10.1f %9.2fx\n", names[i].c_str(), r.stepMs, r.commMs, r.stepMs / ringMs);
    else std::printf("%-36s %10.1f %10s %9.2fx\n", names[i].c_str(), r.stepMs, "-", r.stepMs / ringMs);
  }
  runners.clear();
  loomCommDestroy(ring);
  loomCommDestroy(tree);
}

void scalingLine(const BenchOptions& o, const BenchWorld& w) {
  std::vector<std::unique_ptr<Runner>> runners;
  runners.push_back(std::make_unique<Runner>(o, w.nranks == 1 ? Sync::kLocal : Sync::kDdp, w.comm, w.rank));
  stepInTurn(o, w, runners);
  double stepMs = runners[0]->result().stepMs;
  // The slowest rank sets the pace.
  check(loomAllReduce(&stepMs, &stepMs, 1, loomFloat64, loomMax, w.comm, nullptr), w.comm, "all-reduce (max)");
  if (w.rank == 0) {
    std::printf("scaling: ranks %d mode %s step_ms %.2f samples_per_s %.0f\n", w.nranks, w.mode, stepMs,
                1e3 * static_cast<double>(o.batch) * w.nranks / stepMs);
  }
}

}  // namespace loom::bench
