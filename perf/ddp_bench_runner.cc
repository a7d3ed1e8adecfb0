#include "perf/ddp_bench_runner.h"

#include <algorithm>
#include <chrono>

namespace loom::bench {

using Clock = std::chrono::steady_clock;

std::vector<size_t> BenchOptions::layers() const {
  std::vector<size_t> l{input};
  for (size_t d = 0; d < depth; ++d) l.push_back(hidden);
  l.push_back(classes);
  return l;
}

size_t BenchOptions::parameters() const {
  const std::vector<size_t> l = layers();
  size_t n = 0;
  for (size_t i = 0; i + 1 < l.size(); ++i) n += l[i + 1] * l[i] + l[i + 1];
  return n;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

Runner::Runner(const BenchOptions& o, Sync sync, loomComm_t comm, int rank, bool adamw, int servers) : o_(o), sync_(sync) {
  auto optimizer = [&] { return adamw ? ddp::makeAdamW({}) : ddp::makeSgd({.lr = 0.01f, .momentum = 0.9f}); };
  const ddp::MlpOptions model{o.layers(), ddp::Activation::kRelu};
  if (sync == Sync::kZero3) {
    sharded_ = std::make_unique<ddp::FullyShardedMlp>(comm, model, optimizer(), 42);
  } else {
    mlp_ = std::make_unique<ddp::Mlp>(store_, model);
    store_.finalize();
    mlp_->initialize(42);
  }
  if (sync == Sync::kDdp || sync == Sync::kDdpNoOverlap || sync == Sync::kDdpFp16 || sync == Sync::kZero1) {
    ddp::DdpOptions d;
    d.bucketCapBytes = static_cast<size_t>(o.bucketCapMb * (1 << 20));
    d.overlap = sync != Sync::kDdpNoOverlap;
    d.hook = sync == Sync::kDdpFp16 ? ddp::CommHook::kFp16Compress : ddp::CommHook::kNone;
    ddp_ = std::make_unique<ddp::DistributedDataParallel>(comm, store_, d);
  }
  if (sync == Sync::kZero1 || sync == Sync::kZero2)
    zero_ = std::make_unique<ddp::ShardedOptimizer>(comm, store_, optimizer(), sync == Sync::kZero1 ? 1 : 2);
  else if (sync == Sync::kParameterServer)
    ps_ = std::make_unique<ddp::ParameterServer>(comm, store_, optimizer(), servers);
  else if (sync != Sync::kZero3)
    plain_ = optimizer();
  x_.resize(o.batch * o.input);
  y_.resize(o.batch);
  for (size_t i = 0; i < x_.size(); ++i) x_[i] = static_cast<float>((i * 2654435761u + rank * 97u) % 1000) / 500.0f - 1.0f;
  for (size_t b = 0; b < o.batch; ++b) y_[b] = static_cast<uint8_t>((b * 7 + rank) % o.classes);
}

void Runner::step(bool timed) {
  const Clock::time_point start = Clock::now();
  if (sharded_) {
    sharded_->forward(x_, o_.batch);
    sharded_->loss(y_);
    sharded_->backward();
    sharded_->step();
  } else {
    store_.zeroGrads();
    mlp_->forward(x_, o_.batch);
    mlp_->loss(y_);
    mlp_->backward();
    if (ddp_) ddp_->finishGradientSync();
    if (zero_) zero_->step();
    else if (ps_) ps_->step();
    else plain_->step(store_.values(), store_.grads());
  }
  if (timed) seconds_.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  else if (ddp_) ddp_->resetStats();
}

RunResult Runner::result() const {
  RunResult r;
  r.stepMs = median(seconds_) * 1e3;
  if (ddp_) {
    const auto s = ddp_->stats();
    r.commMs = s.steps ? s.commSeconds / s.steps * 1e3 : 0;
    r.exposedMs = s.steps ? s.exposedSeconds / s.steps * 1e3 : 0;
    r.hidden = s.hiddenShare();
  }
  if (sharded_) {
    const ddp::FullyShardedMlp::MemoryUse m = sharded_->memoryUse();
    r.held = {m.parameterShards, m.gradientShards, m.optimizerState, m.gatherWindow};
    r.stateBytes = m.optimizerState;
    return r;
  }
  r.stateBytes = zero_ ? zero_->stateBytes() : ps_ ? ps_->stateBytes() : plain_->stateBytes();
  const size_t full = store_.totalSize() * sizeof(float);
  r.held.parameters = full;
  // ZeRO-2 keeps the local full gradient (backward writes it) and its averaged shard.
  r.held.gradients = full + (zero_ && zero_->stage() == 2 ? zero_->paddedShardSize() * sizeof(float) : 0);
  r.held.optimizerState = r.stateBytes;
  return r;
}

}  // namespace loom::bench
