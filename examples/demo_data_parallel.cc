#include "examples/demo_data_parallel.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace loom::demo {
namespace {

// Below this bound on the hidden share, the epoch line says what limits it.
constexpr double kTargetHiddenShare = 0.8;
// commSummary's figures per rank, gathered: comm, exposed, window, tail, steps.
constexpr size_t kFields = 5;
constexpr size_t kStepsField = 4;

}  // namespace

std::unique_ptr<ddp::Optimizer> makeDemoOptimizer(const DemoOptions& o) {
  if (o.optimizer == "sgd") return ddp::makeSgd({.lr = o.lr, .momentum = o.momentum, .weightDecay = o.weightDecay});
  return ddp::makeAdamW({.lr = o.lr, .weightDecay = o.weightDecay});
}

DataParallelOptimizer::DataParallelOptimizer(const DemoOptions& o, loomComm_t dp, ddp::ParameterStore& store)
    : o_(o), dp_(dp), store_(store) {
  if (o.zero != 2) {  // ZeRO-2 reduce-scatters the gradients itself
    ddp::DdpOptions d;
    d.bucketCapBytes = static_cast<size_t>(o.bucketCapMb * (1 << 20));
    d.firstBucketCapBytes = std::min(d.firstBucketCapBytes, d.bucketCapBytes);
    d.lastBucketCapBytes = static_cast<size_t>(o.lastBucketCapMb * (1 << 20));
    d.closeAfterBytes = static_cast<size_t>(o.closeAfterMb * (1 << 20));
    d.overlap = o.overlap;
    d.hook = o.hook;
    ddp_ = std::make_unique<ddp::DistributedDataParallel>(dp, store, d);
  }
  if (o.zero == 0) plain_ = makeDemoOptimizer(o);
  else sharded_ = std::make_unique<ddp::ShardedOptimizer>(dp, store, makeDemoOptimizer(o), o.zero);
}

void DataParallelOptimizer::finishGradientSync() {
  if (!ddp_) return;
  const double before = ddp_->stats().exposedSeconds;
  ddp_->finishGradientSync();
  stepExposed_.push_back(ddp_->stats().exposedSeconds - before);
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

std::string DataParallelOptimizer::commSummary() {
  if (!ddp_) return "comm hidden n/a (ZeRO-2 reduce-scatters after backward)";
  // Every rank's figures: a rank that finishes backward early waits for the
  // slower ones, so one rank's share says little on a busy machine.
  const ddp::DistributedDataParallel::CommStats mine = ddp_->stats();
  int ranks = 1;
  loomCommCount(dp_, &ranks);
  std::vector<double> all(kFields * static_cast<size_t>(ranks));
  const double fields[kFields] = {mine.commSeconds, mine.exposedSeconds, mine.windowSeconds, mine.tailSeconds,
                                  static_cast<double>(mine.steps)};
  if (loomAllGather(fields, all.data(), kFields, loomFloat64, dp_, nullptr) != loomSuccess)
    throw std::runtime_error(std::string("DDP statistics: ") + loomGetLastError(dp_));
  ddp::DistributedDataParallel::CommStats sum;
  double low = 1, high = 0;
  for (int r = 0; r < ranks; ++r) {
    const double* f = all.data() + kFields * static_cast<size_t>(r);
    ddp::DistributedDataParallel::CommStats one{f[0], f[1], f[2], f[3], static_cast<size_t>(f[4])};
    low = std::min(low, one.hiddenShare());
    high = std::max(high, one.hiddenShare());
    sum.commSeconds += one.commSeconds;
    sum.exposedSeconds += one.exposedSeconds;
    sum.windowSeconds += one.windowSeconds;
    sum.tailSeconds += one.tailSeconds;
    sum.steps += one.steps;
  }
  // Per step and rank, in ms.
  const double scale = sum.steps ? 1e3 / static_cast<double>(sum.steps) : 0.0;
  const double comm = scale * sum.commSeconds, exposed = scale * sum.exposedSeconds;
  const double window = scale * sum.windowSeconds, tail = scale * sum.tailSeconds;
  const std::optional<ddp::ExposureSplit> split = gatherExposureSplit(all, ranks);
  char text[640];
  int n = std::snprintf(text, sizeof(text), "comm hidden %.0f%% (ranks %.0f..%.0f%%; %.1f ms comm, %.1f ms exposed per step)",
                        100.0 * sum.hiddenShare(), 100.0 * low, 100.0 * high, comm, exposed);
  if (split && n > 0 && n < static_cast<int>(sizeof(text))) {
    // Per step and rank, as above; the last rank's figure per step.
    n += std::snprintf(text + n, sizeof(text) - n,
                       "; of it %.1f ms waiting for a slower rank's backward, %.1f ms exposed on the rank that ended it last",
                       scale * split->waitingSeconds, scale * ranks * split->lastRankExposedSeconds);
  }
  // Say why whenever less than the target is hidden: either what backward
  // leaves to overlap bounds the share (DDP's CommStats), or the bound
  // allows it and the ranks did not reach it.
  if (o_.overlap && sum.steps && sum.hiddenShare() < kTargetHiddenShare && n > 0 &&
      n < static_cast<int>(sizeof(text))) {
    // What limits it: the default model is too small; otherwise ranks that
    // end backward later (fewer cycles on a shared core) make the others
    // wait, or all-reduces slowed by backward's use of the cores stretch
    // the communication past backward.
    const char* why = o_.model == "small" && o_.hidden == DemoOptions{}.hidden
                          ? "model too small to overlap; try --model large"
                      : split && split->waitingSeconds > 0.5 * split->exposedSeconds
                          ? "mostly ranks that ended backward first waiting for a slower one: load imbalance, "
                            "which no bucket plan hides"
                          : "slower ranks or busy cores delay the all-reduces; a larger model or batch hides more";
    if (sum.maxHiddenShare() < kTargetHiddenShare)
      std::snprintf(text + n, sizeof(text) - n,
                    "; at most %.0f%% can be hidden: backward runs %.1f ms after the first bucket is ready, "
                    "communication %.1f ms, of which the last bucket %.1f ms after backward (%s)",
                    100.0 * sum.maxHiddenShare(), window, comm, tail, why);
    else
      std::snprintf(text + n, sizeof(text) - n, "; below %.0f%% though up to %.0f%% could be hidden (%s)",
                    100.0 * kTargetHiddenShare, 100.0 * sum.maxHiddenShare(), why);
  }
  return text;
}

std::optional<ddp::ExposureSplit> DataParallelOptimizer::gatherExposureSplit(std::span<const double> gathered, int ranks) {
  // The decision rests on the gathered figures alone, the same on every
  // rank, so all ranks join the all-gather below or none does. A rank's
  // per-step list misses a step only where finishGradientSync threw after
  // counting it; it is padded with zeros then.
  const double common = gathered[kStepsField];
  for (int r = 1; r < ranks; ++r) {
    if (gathered[kFields * static_cast<size_t>(r) + kStepsField] != common) return std::nullopt;
  }
  const size_t steps = static_cast<size_t>(common);
  if (steps == 0) return std::nullopt;
  std::vector<double> mine(steps, 0.0);
  std::copy_n(stepExposed_.begin(), std::min(steps, stepExposed_.size()), mine.begin());
  std::vector<double> exposed(steps * static_cast<size_t>(ranks));
  if (loomAllGather(mine.data(), exposed.data(), steps, loomFloat64, dp_, nullptr) != loomSuccess)
    throw std::runtime_error(std::string("DDP per-step statistics: ") + loomGetLastError(dp_));
  return ddp::splitExposure(exposed, static_cast<size_t>(ranks), steps);
}

void DataParallelOptimizer::resetStats() {
  if (ddp_) ddp_->resetStats();
  stepExposed_.clear();
}

std::string DataParallelOptimizer::describe() const {
  std::string text = o_.zero == 0 ? "replicated optimizer" : "ZeRO-" + std::to_string(o_.zero);
  if (ddp_) {
    char line[200];
    const double lastMiB = static_cast<double>(ddp_->buckets().empty() ? 0 : ddp_->buckets().back().size) *
                           sizeof(float) / (1 << 20);
    std::snprintf(line, sizeof(line),
                  "; DDP %zu bucket%s (cap %g MiB, first %g MiB, last %.2f MiB, close after %g MiB), overlap %s, hook %s",
                  ddp_->buckets().size(), ddp_->buckets().size() == 1 ? "" : "s", o_.bucketCapMb,
                  std::min(o_.bucketCapMb, 1.0), lastMiB, o_.closeAfterMb, o_.overlap ? "on" : "off", hookName(o_.hook));
    text += line;
  }
  return text;
}

}  // namespace loom::demo
