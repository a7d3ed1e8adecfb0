#include "examples/demo_data_parallel.h"

#include <algorithm>
#include <cstdio>

namespace loom::demo {
namespace {

// Below this bound on the hidden share, the epoch line says what limits it.
constexpr double kTargetHiddenShare = 0.8;

}  // namespace

std::unique_ptr<ddp::Optimizer> makeDemoOptimizer(const DemoOptions& o) {
  if (o.optimizer == "sgd") return ddp::makeSgd({.lr = o.lr, .momentum = o.momentum, .weightDecay = o.weightDecay});
  return ddp::makeAdamW({.lr = o.lr, .weightDecay = o.weightDecay});
}

DataParallelOptimizer::DataParallelOptimizer(const DemoOptions& o, loomComm_t dp, ddp::ParameterStore& store)
    : o_(o), store_(store) {
  if (o.zero != 2) {  // ZeRO-2 reduce-scatters the gradients itself
    ddp::DdpOptions d;
    d.bucketCapBytes = static_cast<size_t>(o.bucketCapMb * (1 << 20));
    d.firstBucketCapBytes = std::min(d.firstBucketCapBytes, d.bucketCapBytes);
    d.lastBucketCapBytes = static_cast<size_t>(o.lastBucketCapMb * (1 << 20));
    d.overlap = o.overlap;
    d.hook = o.hook;
    ddp_ = std::make_unique<ddp::DistributedDataParallel>(dp, store, d);
  }
  if (o.zero == 0) plain_ = makeDemoOptimizer(o);
  else sharded_ = std::make_unique<ddp::ShardedOptimizer>(dp, store, makeDemoOptimizer(o), o.zero);
}

void DataParallelOptimizer::finishGradientSync() {
  if (ddp_) ddp_->finishGradientSync();
}

void DataParallelOptimizer::step(float lr) {
  if (sharded_) {
    sharded_->inner().setLearningRate(lr);
    sharded_->step();
  } else {
    plain_->setLearningRate(lr);
    plain_->step(store_.values(), store_.grads());
  }
}

std::vector<float> DataParallelOptimizer::saveState() { return sharded_ ? sharded_->saveState() : plain_->saveState(); }

void DataParallelOptimizer::loadState(std::span<const float> full) {
  if (sharded_) sharded_->loadState(full);
  else plain_->loadState(full);
}

size_t DataParallelOptimizer::stateBytes() const { return sharded_ ? sharded_->stateBytes() : plain_->stateBytes(); }

std::string DataParallelOptimizer::commSummary() const {
  if (!ddp_) return "comm hidden n/a (ZeRO-2 reduce-scatters after backward)";
  const ddp::DistributedDataParallel::CommStats st = ddp_->stats();
  const double perStep = st.steps ? 1e3 / static_cast<double>(st.steps) : 0.0;  // ms
  char text[400];
  int n = std::snprintf(text, sizeof(text), "comm hidden %.0f%% (%.1f ms comm, %.1f ms exposed per step)",
                        100.0 * st.hiddenShare(), perStep * st.commSeconds, perStep * st.exposedSeconds);
  // Say why, when the model cannot hide most of its communication: what
  // backward leaves to overlap (DDP's CommStats) bounds the share.
  if (o_.overlap && st.steps && st.maxHiddenShare() < kTargetHiddenShare && n > 0 && n < static_cast<int>(sizeof(text))) {
    const double window = perStep * st.windowSeconds, comm = perStep * st.commSeconds, tail = perStep * st.tailSeconds;
    if (window < comm - tail) {
      std::snprintf(text + n, sizeof(text) - n,
                    "; at most %.0f%% can be hidden: backward runs %.1f ms after the first bucket is ready < "
                    "communication %.1f ms (model too small to overlap; try --model large)",
                    100.0 * st.maxHiddenShare(), window, comm);
    } else {
      std::snprintf(text + n, sizeof(text) - n,
                    "; at most %.0f%% can be hidden: the last bucket's all-reduce (%.1f ms of %.1f ms) starts only "
                    "when backward ends",
                    100.0 * st.maxHiddenShare(), tail, comm);
    }
  }
  return text;
}

void DataParallelOptimizer::resetStats() {
  if (ddp_) ddp_->resetStats();
}

std::string DataParallelOptimizer::describe() const {
  std::string text = o_.zero == 0 ? "replicated optimizer" : "ZeRO-" + std::to_string(o_.zero);
  if (ddp_) {
    char line[200];
    const double lastMiB = static_cast<double>(ddp_->buckets().empty() ? 0 : ddp_->buckets().back().size) *
                           sizeof(float) / (1 << 20);
    std::snprintf(line, sizeof(line), "; DDP %zu bucket%s (cap %g MiB, first %g MiB, last %.2f MiB), overlap %s, hook %s",
                  ddp_->buckets().size(), ddp_->buckets().size() == 1 ? "" : "s", o_.bucketCapMb,
                  std::min(o_.bucketCapMb, 1.0), lastMiB, o_.overlap ? "on" : "off", hookName(o_.hook));
    text += line;
  }
  return text;
}

}  // namespace loom::demo
