// ddp_bench: what DDP's overlap and ZeRO buy on this machine.
//
//   loomrun -n 2 build/bin/ddp_bench [--hidden 2048 --depth 4 --batch 32 --steps 20 --warmup 3]
//
// Trains an MLP (input 784, `depth` hidden layers of `hidden`, 10 classes;
// by default 4 x 2048, 14.2M parameters, 57 MB of fp32 gradient) on
// synthetic data, one OpenBLAS thread per rank (each rank has about one core
// here), and prints per configuration the median step time over --steps
// steps (forward, backward, gradient sync, SGD step), the communication time
// per step, the part finishGradientSync waited for, and the hidden share
// (DistributedDataParallel::CommStats). Then ZeRO's optimizer-state bytes
// per rank (AdamW: two moments) against the unsharded optimizer's.
// Only rank 0 prints. The configurations run interleaved, one step each in
// turn, after --warmup untimed rounds.
#include <cblas.h>

#include "ddp/blas_runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ddp/distributed/distributed_data_parallel.h"
#include "ddp/distributed/sharded_optimizer.h"
#include "ddp/model/mlp.h"
#include "loom/loom.h"

namespace {

using namespace loom::ddp;
using Clock = std::chrono::steady_clock;

struct Options {
  size_t hidden = 2048, depth = 4, batch = 32, input = 784, classes = 10;
  int steps = 20, warmup = 3;
  double bucketCapMb = 25;
};

constexpr const char* kUsage =
    "usage: loomrun -n N ddp_bench [--hidden H] [--depth D] [--batch B(per rank)] [--steps S] [--warmup W] "
    "[--bucket-cap-mb M] | --help | --version\n";

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "ddp_bench: %s\n%s", why, kUsage);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
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
    if (i + 1 >= argc) usage(("missing value after " + flag).c_str());
    const char* value = argv[++i];
    char* end = nullptr;
    const double v = std::strtod(value, &end);
    if (*end != '\0' || v <= 0) usage(("bad value for " + flag + ": " + value).c_str());
    if (flag == "--hidden") o.hidden = static_cast<size_t>(v);
    else if (flag == "--depth") o.depth = static_cast<size_t>(v);
    else if (flag == "--batch") o.batch = static_cast<size_t>(v);
    else if (flag == "--steps") o.steps = static_cast<int>(v);
    else if (flag == "--warmup") o.warmup = static_cast<int>(v);
    else if (flag == "--bucket-cap-mb") o.bucketCapMb = v;
    else usage(("unknown flag " + flag).c_str());
  }
  return o;
}

void check(loomResult_t r, loomComm_t comm, const char* what) {
  if (r != loomSuccess) throw std::runtime_error(std::string(what) + ": " + loomGetErrorString(r) + ": " + loomGetLastError(comm));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

enum class Sync { kLocal, kDdp, kDdpNoOverlap, kDdpFp16, kZero1, kZero2 };

struct Row {
  const char* name;
  Sync sync;
};

struct Result {
  double stepMs = 0, commMs = 0, exposedMs = 0, hidden = 0;
  size_t stateBytes = 0;
};

// One configuration: its own model replica, DDP and optimizer.
class Runner {
 public:
  Runner(const Options& o, Sync sync, loomComm_t comm, int rank) : o_(o) {
    MlpOptions model;
    model.layers.push_back(o.input);
    for (size_t d = 0; d < o.depth; ++d) model.layers.push_back(o.hidden);
    model.layers.push_back(o.classes);
    mlp_ = std::make_unique<Mlp>(store_, model);
    store_.finalize();
    mlp_->initialize(42);
    if (sync != Sync::kLocal && sync != Sync::kZero2) {
      DdpOptions d;
      d.bucketCapBytes = static_cast<size_t>(o.bucketCapMb * (1 << 20));
      d.overlap = sync != Sync::kDdpNoOverlap;
      d.hook = sync == Sync::kDdpFp16 ? CommHook::kFp16Compress : CommHook::kNone;
      ddp_ = std::make_unique<DistributedDataParallel>(comm, store_, d);
    }
    if (sync == Sync::kZero1 || sync == Sync::kZero2)
      zero_ = std::make_unique<ShardedOptimizer>(comm, store_, makeAdamW({}), sync == Sync::kZero1 ? 1 : 2);
    else
      plain_ = makeSgd({.lr = 0.01f, .momentum = 0.9f});
    // Synthetic data, different per rank (as a sampler's shards would be).
    x_.resize(o.batch * o.input);
    y_.resize(o.batch);
    for (size_t i = 0; i < x_.size(); ++i) x_[i] = static_cast<float>((i * 2654435761u + rank * 97u) % 1000) / 500.0f - 1.0f;
    for (size_t b = 0; b < o.batch; ++b) y_[b] = static_cast<uint8_t>((b * 7 + rank) % o.classes);
  }

  void step(bool timed) {
    const Clock::time_point start = Clock::now();
    store_.zeroGrads();
    mlp_->forward(x_, o_.batch);
    mlp_->loss(y_);
    mlp_->backward();
    if (ddp_) ddp_->finishGradientSync();
    if (zero_) zero_->step();
    else plain_->step(store_.values(), store_.grads());
    if (timed) seconds_.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    else if (ddp_) ddp_->resetStats();
  }

  Result result() const {
    Result r;
    r.stepMs = median(seconds_) * 1e3;
    if (ddp_) {
      const auto s = ddp_->stats();
      r.commMs = s.commSeconds / s.steps * 1e3;
      r.exposedMs = s.exposedSeconds / s.steps * 1e3;
      r.hidden = s.hiddenShare();
    }
    r.stateBytes = zero_ ? zero_->stateBytes() : plain_->stateBytes();
    return r;
  }

 private:
  const Options& o_;
  ParameterStore store_;
  std::unique_ptr<Mlp> mlp_;
  std::unique_ptr<DistributedDataParallel> ddp_;
  std::unique_ptr<ShardedOptimizer> zero_;
  std::unique_ptr<Optimizer> plain_;
  std::vector<float> x_;
  std::vector<uint8_t> y_;
  std::vector<double> seconds_;
};

}  // namespace

int main(int argc, char** argv) {
  // One BLAS thread per rank (each has about one core), and OpenBLAS's fast
  // kernels where it misdetects the CPU (ddp/blas_runtime.h).
  loom::ddp::configureBlasForRanks(argv);
  const Options o = parse(argc, argv);
  loomUniqueId id;
  int rank = 0, nranks = 1;
  if (loomGetUniqueIdFromEnv(&id, &rank, &nranks) != loomSuccess) {
    std::fprintf(stderr, "ddp_bench: run it under a launcher: loomrun, torchrun, mpirun or srun (%s)\n",
                 loomGetLastError(nullptr));
    return 2;
  }
  loomComm_t comm = nullptr;
  try {
    check(loomCommInitRank(&comm, nranks, id, rank), nullptr, "loomCommInitRank");
    const size_t params = [&] {
      size_t n = 0, in = o.input;
      for (size_t d = 0; d <= o.depth; ++d) {
        const size_t out = d == o.depth ? o.classes : o.hidden;
        n += out * in + out;
        in = out;
      }
      return n;
    }();
    if (rank == 0) {
      std::printf("# ddp_bench: %d ranks, MLP %zu-%zux%zu-%zu (%zu parameters, %.1f MB of fp32 gradient), batch %zu per rank, "
                  "median of %d steps after %d warm-up, bucket cap %.0f MB (first 1 MB), 1 BLAS thread per rank\n",
                  nranks, o.input, o.depth, o.hidden, o.classes, params, params * 4 / 1e6, o.batch, o.steps, o.warmup,
                  o.bucketCapMb);
      std::printf("%-28s %10s %10s %12s %8s\n", "configuration", "step ms", "comm ms", "exposed ms", "hidden");
    }
    const Row rows[] = {{"local (no communication)", Sync::kLocal},
                        {"DDP, overlap on", Sync::kDdp},
                        {"DDP, overlap off", Sync::kDdpNoOverlap},
                        {"DDP + fp16 hook, overlap", Sync::kDdpFp16},
                        {"DDP + ZeRO-1 (AdamW)", Sync::kZero1},
                        {"ZeRO-2 (AdamW, no DDP)", Sync::kZero2}};
    // Configurations take turns step by step (all ranks entering each step
    // together), so load from elsewhere on the machine hits all of them alike.
    std::vector<std::unique_ptr<Runner>> runners;
    for (const Row& row : rows) runners.push_back(std::make_unique<Runner>(o, row.sync, comm, rank));
    for (int step = 0; step < o.warmup + o.steps; ++step) {
      for (auto& runner : runners) {
        check(loomBarrier(comm, nullptr), comm, "barrier");
        runner->step(step >= o.warmup);
      }
    }
    size_t zeroBytes = 0;
    for (size_t i = 0; i < runners.size(); ++i) {
      const Row& row = rows[i];
      const Result r = runners[i]->result();
      if (row.sync == Sync::kZero1) zeroBytes = r.stateBytes;
      if (rank != 0) continue;
      if (row.sync == Sync::kLocal || row.sync == Sync::kZero2)
        std::printf("%-28s %10.1f %10s %12s %8s\n", row.name, r.stepMs, "-", "-", "-");
      else
        std::printf("%-28s %10.1f %10.1f %12.1f %7.0f%%\n", row.name, r.stepMs, r.commMs, r.exposedMs, r.hidden * 100);
    }
    // The unsharded AdamW's state for the same model, measured, not computed.
    auto adamw = makeAdamW({});
    std::vector<float> p(params, 0.0f), g(params, 1e-3f);
    adamw->step(p, g);
    if (rank == 0) {
      std::printf("ZeRO optimizer state (AdamW) per rank: %.1f MB sharded vs %.1f MB unsharded (%.2fx less, %d ranks)\n",
                  zeroBytes / 1e6, adamw->stateBytes() / 1e6, double(adamw->stateBytes()) / zeroBytes, nranks);
    }
    check(loomCommDestroy(comm), comm, "loomCommDestroy");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_bench: rank %d: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}
