#include "src/comm/stream.h"

#include <cerrno>
#include <cstdlib>

#include "common/config.h"
#include "common/format.h"
#include "common/log.h"

namespace loom {

CompletionPtr Stream::push(const CompletionPtr& op, const void* runner, bool quick) {
  std::lock_guard<std::mutex> lock(mu_);
  pruneLocked();
  CompletionPtr previous = std::move(last_);
  const void* previousRunner = lastRunner_;
  last_ = op;
  lastRunner_ = runner;
  outstanding_.push_back({op, quick});
  if (!quick) ++slowOutstanding_;
  unfinished_.store(outstanding_.size(), std::memory_order_release);
  // The same runner starts its operations in the order they were pushed, and
  // each after the one before it finished: nothing to wait for, and no
  // reference that would make the runner's thread free the previous op.
  if (previous && (previous->done() || previousRunner == runner)) return nullptr;
  return previous;
}

void Stream::pruneLocked() {
  // Each op waits for its predecessor, so ops finish in stream order and
  // dropping finished ones from the front is enough (O(1) per op).
  while (!outstanding_.empty() && outstanding_.front().op->done()) {
    const Completion& done = *outstanding_.front().op;
    if (!done.ok() && firstError_.isOk()) firstError_ = done.status();
    if (!outstanding_.front().quick) --slowOutstanding_;
    outstanding_.pop_front();
  }
  unfinished_.store(outstanding_.size(), std::memory_order_release);
}

size_t Stream::outstanding() {
  std::lock_guard<std::mutex> lock(mu_);
  pruneLocked();
  return outstanding_.size();
}

bool Stream::onlyQuickOutstanding() {
  std::lock_guard<std::mutex> lock(mu_);
  pruneLocked();
  return slowOutstanding_ == 0;
}

CompletionPtr Stream::newestOfQuickBacklog(size_t moreThan) {
  std::lock_guard<std::mutex> lock(mu_);
  pruneLocked();
  if (slowOutstanding_ != 0 || outstanding_.size() <= moreThan) return nullptr;
  return outstanding_.back().op;
}

void Stream::noteFinished(const Status& status) {
  if (status.isOk()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (firstError_.isOk()) firstError_ = status;
}

size_t Stream::maxOutstanding() {
  static const size_t depth = [] {
    constexpr long kDefault = 1024;
    const char* v = readKnob("LOOM_STREAM_DEPTH");
    if (!v || !*v) return size_t{kDefault};
    char* end = nullptr;
    errno = 0;
    const long parsed = std::strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || parsed < 2 || parsed > (1L << 24)) {
      LOOM_WARN(Logger::process(), kSubsysEnv,
                "LOOM_STREAM_DEPTH='%s' ignored: expected an integer in [2, 16777216]; using %ld", v, kDefault);
      return size_t{kDefault};
    }
    return static_cast<size_t>(parsed);
  }();
  return depth;
}

void Stream::waitForRoom() {
  // unfinished_ is at least the true count (ops finish without lowering it),
  // so below the depth there is room without taking the lock push takes next.
  if (unfinished_.load(std::memory_order_acquire) < maxOutstanding()) return;
  CompletionPtr target;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pruneLocked();
    const size_t depth = maxOutstanding();
    if (outstanding_.size() < depth) return;
    // Ops finish in stream order: once this one is done, at most half the
    // depth is left, so the caller sleeps once per half-depth of ops.
    target = outstanding_[outstanding_.size() - depth / 2 - 1].op;
  }
  WaitContext forever;  // each op's waits end at its communicator's timeout
  forever.spinMicros = 2;
  forever.yieldMicros = 0;
  (void)target->wait(forever, "room on the stream");  // a failed op is the stream's error
}

Status Stream::synchronize() {
  // Every op's own waits are bounded by its communicator's LOOM_TIMEOUT and
  // its abort flag, so this wait needs no deadline of its own. It sleeps
  // almost at once: the executor that runs the ops needs the core.
  WaitContext forever;
  forever.spinMicros = 2;
  forever.yieldMicros = 0;
  for (;;) {
    CompletionPtr newest;
    bool drain = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      pruneLocked();
      if (outstanding_.empty()) {
        if (!device_ || !firstError_.isOk()) return firstError_;
        drain = true;
      }
      // Ops normally finish in stream order, so waiting for the newest is
      // enough; an aborted communicator may fail an op before its
      // predecessor finished, which the loop catches.
      if (!drain) newest = outstanding_.back().op;
    }
    // Kernels of the device engine are on the CUDA stream only. Each stops
    // at its communicator's LOOM_TIMEOUT, so this wait ends too.
    if (drain) return device_->drain(forever);
    (void)newest->wait(forever, "stream operation");
  }
}

Status Stream::requireNotCapturing(const char* call, int rank) const {
  if (!device_) return Status::ok();
  auto capturing = device_->capturing();
  if (!capturing.isOk())
    return capturing.status().withContext(strprintf("%s on rank %d: asking whether the CUDA stream is captured: ",
                                                    call, rank));
  if (capturing.value())
    return makeError(Code::kInvalidUsage,
                     "%s on rank %d: the CUDA stream is being captured into a CUDA graph, and this call runs on "
                     "Loom's host executor (host or staged path), which a graph replay cannot run; capture needs "
                     "the device engine path (end the capture, or make the call outside it)",
                     call, rank);
  return Status::ok();
}

Status Stream::query() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pruneLocked();
    if (!firstError_.isOk()) return firstError_;
    if (!outstanding_.empty()) return {Code::kInProgress, "operations still running on the stream"};
    if (!device_) return Status::ok();
  }
  // The device engine's kernels are on the CUDA stream only.
  auto busy = device_->busy();
  LOOM_TRY(busy.status());
  if (busy.value()) return {Code::kInProgress, "kernels still running on the CUDA stream"};
  return Status::ok();
}

}  // namespace loom
