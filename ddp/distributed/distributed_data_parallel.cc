#include "ddp/distributed/distributed_data_parallel.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace loom::ddp {
namespace {

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Loom's message for a failed call: the communicator's last error, else the
// calling thread's (stream calls carry no communicator).
std::string loomMessage(loomResult_t r, loomComm_t comm) {
  std::string detail = comm ? loomGetLastError(comm) : "";
  if (detail.empty()) detail = loomGetLastError(nullptr);
  return std::string(loomGetErrorString(r)) + (detail.empty() ? "" : ": " + detail);
}

}  // namespace

double DistributedDataParallel::CommStats::hiddenShare() const {
  if (commSeconds <= 0) return 0;
  return std::clamp(1.0 - exposedSeconds / commSeconds, 0.0, 1.0);
}

double DistributedDataParallel::CommStats::maxHiddenShare() const {
  if (commSeconds <= 0) return 0;
  return std::clamp(std::min(windowSeconds, commSeconds - tailSeconds) / commSeconds, 0.0, 1.0);
}

DistributedDataParallel::DistributedDataParallel(loomComm_t comm, ParameterStore& store, DdpOptions options)
    : comm_(comm), store_(store), options_(options) {
  if (!comm) throw std::invalid_argument("DistributedDataParallel: comm is NULL");
  if (!store.finalized()) throw std::invalid_argument("DistributedDataParallel: the ParameterStore is not finalized");
  if (loomCommUserRank(comm, &rank_) != loomSuccess || loomCommCount(comm, &nranks_) != loomSuccess)
    throw std::invalid_argument("DistributedDataParallel: comm is not a valid communicator");

  // Every rank must hold the same layout, else the reductions would mix
  // unrelated parameters: compare (count, total size) across ranks.
  std::vector<uint64_t> layouts(2 * static_cast<size_t>(nranks_));
  layouts[2 * rank_] = store.count();
  layouts[2 * rank_ + 1] = store.totalSize();
  loomResult_t r = loomAllGather(layouts.data() + 2 * rank_, layouts.data(), 2, loomUint64, comm, nullptr);
  if (r != loomSuccess) throw std::runtime_error("DistributedDataParallel: layout check failed on " + where() + ": " + loomMessage(r, comm));
  for (int peer = 0; peer < nranks_; ++peer) {
    if (layouts[2 * peer] != store.count() || layouts[2 * peer + 1] != store.totalSize()) {
      throw std::invalid_argument("DistributedDataParallel: " + where() + " has " + std::to_string(store.count()) +
                                  " parameters of " + std::to_string(store.totalSize()) + " elements but rank " +
                                  std::to_string(peer) + " has " + std::to_string(layouts[2 * peer]) + " of " +
                                  std::to_string(layouts[2 * peer + 1]));
    }
  }
  r = loomBroadcast(store.values().data(), store.values().data(), store.totalSize(), loomFloat32, 0, comm, nullptr);
  if (r != loomSuccess) throw std::runtime_error("DistributedDataParallel: broadcast of parameters failed on " + where() + ": " + loomMessage(r, comm));

  buckets_ = planBuckets(store, options.firstBucketCapBytes, options.bucketCapBytes, options.lastBucketCapBytes,
                         options.closeAfterBytes);
  bucketOfParam_.assign(store.count(), 0);
  state_.resize(buckets_.size());
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (size_t i = buckets_[b].firstParam; i <= buckets_[b].lastParam; ++i) bucketOfParam_[i] = b;
    if (options.hook != CommHook::kNone) state_[b].compressed.resize(buckets_[b].size);
    r = loomStreamCreate(&state_[b].stream);
    if (r != loomSuccess) {
      for (size_t c = 0; c < b; ++c) loomStreamDestroy(state_[c].stream);
      throw std::runtime_error("DistributedDataParallel: loomStreamCreate failed: " + loomMessage(r, nullptr));
    }
  }
  marked_.assign(store.count(), 0);
  resetStep();
  watcher_ = std::thread([this] { watcherLoop(); });
  store_.setGradReadyHook([this](size_t index) { onGradReady(index); });
}

DistributedDataParallel::~DistributedDataParallel() {
  store_.setGradReadyHook(nullptr);
  waitForLaunched();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  watcher_.join();
  for (BucketState& s : state_) loomStreamDestroy(s.stream);
}

std::string DistributedDataParallel::where() const { return "rank " + std::to_string(rank_); }

void DistributedDataParallel::resetStep() {
  std::fill(marked_.begin(), marked_.end(), 0);
  markedCount_ = 0;
  nextLaunch_ = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) state_[b].pending = buckets_[b].lastParam - buckets_[b].firstParam + 1;
  std::lock_guard<std::mutex> lock(mu_);
  finished_ = 0;
  error_.clear();
}

void DistributedDataParallel::onGradReady(size_t index) {
  if (marked_[index]) {
    const bool allReduced = markedCount_ == store_.count() && noSyncDepth_ == 0;
    throw std::logic_error("DistributedDataParallel: markGradReady(" + std::to_string(index) + ", \"" +
                           store_.info(index).name + "\") called twice in one backward pass on " + where() +
                           (allReduced ? " (every gradient of this step was already reduced: call finishGradientSync() before the next backward)" : ""));
  }
  marked_[index] = 1;
  ++markedCount_;
  if (noSyncDepth_ > 0) {
    // Local accumulation only; a complete pass starts the next one afresh.
    if (markedCount_ == store_.count()) resetStep();
    return;
  }
  --state_[bucketOfParam_[index]].pending;
  if (options_.overlap) launchReadyBuckets();
}

void DistributedDataParallel::launchReadyBuckets() {
  // Strictly in bucket order, so every rank issues the same sequence of
  // collectives whatever order its backward marks gradients in.
  while (nextLaunch_ < buckets_.size() && state_[nextLaunch_].pending == 0) {
    launch(nextLaunch_);
    ++nextLaunch_;  // only once enqueued: waitForLaunched counts on it
  }
}

void DistributedDataParallel::launch(size_t bucket) {
  const BucketInfo& info = buckets_[bucket];
  BucketState& s = state_[bucket];
  std::span<float> grads = store_.grads().subspan(info.offset, info.size);
  s.launched = Clock::now();
  loomResult_t r;
  if (options_.hook == CommHook::kNone) {
    r = loomAllReduce(grads.data(), grads.data(), info.size, loomFloat32, loomAvg, comm_, s.stream);
  } else {
    const bool fp16 = options_.hook == CommHook::kFp16Compress;
    compressScaled(grads, 1.0f / static_cast<float>(nranks_), fp16 ? HalfFormat::kFp16 : HalfFormat::kBf16, s.compressed);
    r = loomAllReduce(s.compressed.data(), s.compressed.data(), info.size, fp16 ? loomFloat16 : loomBfloat16, loomSum,
                      comm_, s.stream);
  }
  if (r != loomSuccess) {
    throw std::runtime_error("DistributedDataParallel: all-reduce of bucket " + std::to_string(bucket) + " failed on " +
                             where() + ": " + loomMessage(r, comm_));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    toWatch_.push_back(bucket);
  }
  cv_.notify_all();
}

void DistributedDataParallel::watcherLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !toWatch_.empty(); });
    if (toWatch_.empty()) return;  // stopping, nothing left
    const size_t bucket = toWatch_.front();
    toWatch_.pop_front();
    lock.unlock();
    BucketState& s = state_[bucket];
    std::string failure;
    const loomResult_t r = loomStreamSynchronize(s.stream);
    if (r != loomSuccess) {
      failure = "DistributedDataParallel: all-reduce of bucket " + std::to_string(bucket) + " failed on " + where() +
                ": " + loomMessage(r, comm_);
    } else if (options_.hook != CommHook::kNone) {
      const BucketInfo& info = buckets_[bucket];
      decompress(s.compressed, options_.hook == CommHook::kFp16Compress ? HalfFormat::kFp16 : HalfFormat::kBf16,
                 store_.grads().subspan(info.offset, info.size));
    }
    s.done = Clock::now();
    lock.lock();
    if (!failure.empty() && error_.empty()) error_ = failure;
    ++finished_;
    cv_.notify_all();
  }
}

void DistributedDataParallel::waitForLaunched() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return finished_ == nextLaunch_; });
}

size_t DistributedDataParallel::finishedBuckets() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

void DistributedDataParallel::finishGradientSync() {
  if (noSyncDepth_ > 0) return;
  const Clock::time_point entered = Clock::now();
  if (markedCount_ != store_.count()) {
    // Reduce nothing more (peers may be waiting in a collective this rank
    // will never issue: the job is broken), but leave no work in flight.
    waitForLaunched();
    std::string missing;
    size_t count = 0;
    for (size_t i = 0; i < marked_.size(); ++i) {
      if (marked_[i]) continue;
      if (++count <= 8) missing += (missing.empty() ? "\"" : ", \"") + store_.info(i).name + "\"";
    }
    if (count > 8) missing += " and " + std::to_string(count - 8) + " more";
    resetStep();
    throw std::runtime_error("DistributedDataParallel::finishGradientSync on " + where() + ": " +
                             std::to_string(count) + " parameter(s) never got markGradReady this step: " + missing);
  }
  if (!options_.overlap) launchReadyBuckets();
  waitForLaunched();

  // Union of the buckets' in-flight intervals (launched in order; a bucket
  // may be launched while an earlier one is still running).
  double comm = 0, exposed = 0, tail = 0;
  Clock::time_point coveredUntil = Clock::time_point::min();
  for (const BucketState& s : state_) {
    const Clock::time_point start = std::max(s.launched, coveredUntil);
    if (s.done > start) comm += seconds(s.done - start);
    const Clock::time_point afterBackward = std::max(start, entered);
    if (s.done > afterBackward) exposed += seconds(s.done - afterBackward);
    // The last bucket's run after finishGradientSync was called: exposed,
    // whatever the other buckets do (see CommStats).
    const Clock::time_point tailStart = std::max(start, entered);
    if (&s == &state_.back() && s.done > tailStart) tail = seconds(s.done - tailStart);
    coveredUntil = std::max(coveredUntil, s.done);
  }
  const double window = state_.empty() ? 0.0 : std::max(0.0, seconds(entered - state_.front().launched));
  std::string error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    error = error_;
    stats_.commSeconds += comm;
    stats_.exposedSeconds += exposed;
    stats_.windowSeconds += window;
    stats_.tailSeconds += tail;
    ++stats_.steps;
  }
  resetStep();
  if (!error.empty()) throw std::runtime_error(error);
}

DistributedDataParallel::CommStats DistributedDataParallel::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void DistributedDataParallel::resetStats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = CommStats{};
}

DistributedDataParallel::NoSyncGuard DistributedDataParallel::noSync() { return NoSyncGuard(this); }

void DistributedDataParallel::endNoSync() {
  if (--noSyncDepth_ == 0) resetStep();
}

DistributedDataParallel::NoSyncGuard::NoSyncGuard(DistributedDataParallel* ddp) : ddp_(ddp) {
  if (ddp_->noSyncDepth_ == 0) {
    if (ddp_->nextLaunch_ > 0) {
      throw std::logic_error("DistributedDataParallel::noSync() on " + ddp_->where() +
                             ": buckets of a synchronized step are in flight; call finishGradientSync() first");
    }
    ddp_->resetStep();  // marks of an unfinished pass would be mistaken for double marks
  }
  ++ddp_->noSyncDepth_;
}

DistributedDataParallel::NoSyncGuard::NoSyncGuard(NoSyncGuard&& other) noexcept : ddp_(std::exchange(other.ddp_, nullptr)) {}

DistributedDataParallel::NoSyncGuard::~NoSyncGuard() {
  if (ddp_) ddp_->endNoSync();
}

}  // namespace loom::ddp
