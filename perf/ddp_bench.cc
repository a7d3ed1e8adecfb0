// ddp_bench: what DDP's overlap, ZeRO, and the other ways of synchronizing
// gradients buy on this machine.
//
//   loomrun -n 2 build/bin/ddp_bench [--hidden 2048 --depth 4 --batch 32 --steps 20 --warmup 3]
//   build/bin/ddp_bench --threads 4 [...]       ranks as threads of one process
//   ddp_bench --table overlap|memory|strategies|scaling|all
//
// Trains an MLP (input 784, `depth` hidden layers of `hidden`, 10 classes;
// by default 4 x 2048, 14.2M parameters, 57 MB of fp32 gradient) on
// synthetic data, one OpenBLAS thread per rank (each rank has about one core
// here). Tables (ddp_bench_tables.h), each printed by rank 0:
//   overlap (default): per configuration the median step time over --steps
//     steps (forward, backward, gradient sync, SGD step), the communication
//     time per step, the part finishGradientSync waited for, and the hidden
//     share (DistributedDataParallel::CommStats); then ZeRO's
//     optimizer-state bytes per rank (AdamW: two moments) against the
//     unsharded optimizer's;
//   memory: bytes per rank held for parameters, gradients, optimizer state
//     and gather window under DDP, ZeRO-1, ZeRO-2 and ZeRO-3;
//   strategies: ring vs tree all-reduce vs a parameter server (1 server and
//     --servers S sharded servers, default every rank);
//   scaling: one line of samples/s (perf/ddp_scaling.sh makes the table).
// The configurations of a table run interleaved, one step each in turn,
// after --warmup untimed rounds.
#include <cblas.h>

#include "ddp/blas_runtime.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.h"
#include "perf/ddp_bench_runner.h"
#include "perf/ddp_bench_tables.h"

namespace {

using namespace loom::bench;

constexpr const char* kUsage =
    "usage: loomrun -n N ddp_bench [--hidden H] [--depth D] [--batch B(per rank)] [--steps S] [--warmup W] "
    "[--bucket-cap-mb M] [--table overlap|memory|strategies|scaling|all] [--servers S] [--threads N] | --help | --version\n";

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "ddp_bench: %s\n%s", why.c_str(), kUsage);
  std::exit(2);
}

BenchOptions parse(int argc, char** argv) {
  BenchOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::printf("%s", kUsage);
      std::exit(0);
    }
    if (flag == "--version") {
      std::printf("ddp_bench (Loom) %s\n", LOOM_TOOL_VERSION);
      std::exit(0);
    }
    if (i + 1 >= argc) usage("missing value after " + flag);
    const char* value = argv[++i];
    if (flag == "--table") {
      o.table = value;
      if (o.table != "overlap" && o.table != "memory" && o.table != "strategies" && o.table != "scaling" && o.table != "all")
        usage("bad value for --table: " + o.table);
      continue;
    }
    char* end = nullptr;
    const double v = std::strtod(value, &end);
    if (*end != '\0' || v <= 0) usage("bad value for " + flag + ": " + value);
    if (flag == "--hidden") o.hidden = static_cast<size_t>(v);
    else if (flag == "--depth") o.depth = static_cast<size_t>(v);
    else if (flag == "--batch") o.batch = static_cast<size_t>(v);
    else if (flag == "--steps") o.steps = static_cast<int>(v);
    else if (flag == "--warmup") o.warmup = static_cast<int>(v);
    else if (flag == "--bucket-cap-mb") o.bucketCapMb = v;
    else if (flag == "--servers") o.servers = static_cast<int>(v);
    else if (flag == "--threads") o.threads = static_cast<int>(v);
    else usage("unknown flag " + flag);
  }
  return o;
}

}  // namespace

namespace loom::bench {

void overlapTable(const BenchOptions& o, const BenchWorld& w) {
  const struct {
    const char* name;
    Sync sync;
  } rows[] = {{"local (no communication)", Sync::kLocal},
              {"DDP, overlap on", Sync::kDdp},
              {"DDP, overlap off", Sync::kDdpNoOverlap},
              {"DDP + fp16 hook, overlap", Sync::kDdpFp16},
              {"DDP + ZeRO-1 (AdamW)", Sync::kZero1},
              {"ZeRO-2 (AdamW, no DDP)", Sync::kZero2}};
  if (w.rank == 0) std::printf("%-28s %10s %10s %12s %8s\n", "configuration", "step ms", "comm ms", "exposed ms", "hidden");
  std::vector<std::unique_ptr<Runner>> runners;
  for (const auto& row : rows) {
    const bool adamw = row.sync == Sync::kZero1 || row.sync == Sync::kZero2;
    runners.push_back(std::make_unique<Runner>(o, row.sync, w.comm, w.rank, adamw));
  }
  stepInTurn(o, w, runners);
  size_t zeroBytes = 0;
  for (size_t i = 0; i < runners.size(); ++i) {
    const RunResult r = runners[i]->result();
    if (rows[i].sync == Sync::kZero1) zeroBytes = r.stateBytes;
    if (w.rank != 0) continue;
    if (rows[i].sync == Sync::kLocal || rows[i].sync == Sync::kZero2)
      std::printf("%-28s %10.1f %10s %12s %8s\n", rows[i].name, r.stepMs, "-", "-", "-");
    else
      std::printf("%-28s %10.1f %10.1f %12.1f %7.0f%%\n", rows[i].name, r.stepMs, r.commMs, r.exposedMs, r.hidden * 100);
  }
  // The unsharded AdamW's state for the same model, measured, not computed.
  auto adamw = ddp::makeAdamW({});
  std::vector<float> p(o.parameters(), 0.0f), g(o.parameters(), 1e-3f);
  adamw->step(p, g);
  if (w.rank == 0) {
    std::printf("ZeRO optimizer state (AdamW) per rank: %.1f MB sharded vs %.1f MB unsharded (%.2fx less, %d ranks)\n",
                zeroBytes / 1e6, adamw->stateBytes() / 1e6, double(adamw->stateBytes()) / zeroBytes, w.nranks);
  }
}

}  // namespace loom::bench

namespace {

// Every table the options ask for, on one rank; false (message printed) on an error.
bool runTables(const BenchOptions& o, const BenchWorld& w) {
  try {
    if (w.rank == 0) {
      std::printf("# ddp_bench: %d ranks (%s), MLP %zu-%zux%zu-%zu (%zu parameters, %.1f MB of fp32 gradient), batch %zu "
                  "per rank, median of %d steps after %d warm-up, bucket cap %.0f MB (first 1 MB), 1 BLAS thread per rank\n",
                  w.nranks, w.mode, o.input, o.depth, o.hidden, o.classes, o.parameters(), o.parameters() * 4 / 1e6,
                  o.batch, o.steps, o.warmup, o.bucketCapMb);
      std::fflush(stdout);
    }
    const bool all = o.table == "all";
    if (all || o.table == "overlap") overlapTable(o, w);
    if (all || o.table == "memory") memoryTable(o, w);
    if (all || o.table == "strategies") strategiesTable(o, w);
    if (all || o.table == "scaling") scalingLine(o, w);
    std::fflush(stdout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_bench: rank %d: %s\n", w.rank, e.what());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // One BLAS thread per rank (each has about one core), and OpenBLAS's fast
  // kernels where it misdetects the CPU (ddp/blas_runtime.h).
  loom::ddp::configureBlasForRanks(argv);
  const BenchOptions o = parse(argc, argv);
  if (o.threads > 0) {
    // DataParallel-style: the ranks are threads of this process.
    std::vector<loomComm_t> comms(static_cast<size_t>(o.threads));
    if (loomCommInitAll(comms.data(), o.threads, nullptr) != loomSuccess) {
      std::fprintf(stderr, "ddp_bench: loomCommInitAll(%d) failed: %s\n", o.threads, loomGetLastError(nullptr));
      return 1;
    }
    std::vector<std::thread> threads;
    std::atomic<bool> ok{true};
    for (int r = 0; r < o.threads; ++r)
      threads.emplace_back([&, r] {
        if (!runTables(o, BenchWorld{comms[r], r, o.threads, "threads"})) ok = false;
      });
    for (auto& t : threads) t.join();
    for (loomComm_t c : comms) loomCommDestroy(c);
    return ok ? 0 : 1;
  }
  loomUniqueId id;
  int rank = 0, nranks = 1;
  if (loomGetUniqueIdFromEnv(&id, &rank, &nranks) != loomSuccess) {
    std::fprintf(stderr, "ddp_bench: run it under a launcher (loomrun, torchrun, mpirun or srun), or with --threads N (%s)\n",
                 loomGetLastError(nullptr));
    return 2;
  }
  loomComm_t comm = nullptr;
  if (loomCommInitRank(&comm, nranks, id, rank) != loomSuccess) {
    std::fprintf(stderr, "ddp_bench: rank %d: loomCommInitRank failed: %s\n", rank, loomGetLastError(nullptr));
    return 1;
  }
  const bool ok = runTables(o, BenchWorld{comm, rank, nranks, "processes"});
  loomCommDestroy(comm);
  return ok ? 0 : 1;
}
