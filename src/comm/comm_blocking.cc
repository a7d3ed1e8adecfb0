// The blocking call's short path. A blocking collective with nothing queued
// before it runs on the calling thread (as through the executor's inline
// turn), but without execute()'s separate steps: one flight-recorder record
// for enqueue, start and choice (Diagnostics::startedNow), no stream
// predecessor, no device staging, no LOOM_CHECK exchange and no trace, all of
// which blockingShortcut_ rules out at creation. Why it exists: an 8-byte
// all-reduce between two processes is a few hundred instructions on each side
// around one cache-line hand-off, and every layer shows. Measured here (AMD
// EPYC VM, 2 processes, 8 B, the two paths in alternating blocks of 5000
// calls within one run, medians of 4 runs): 0.29-0.30 us a call through
// execute(), 0.26-0.27 us through this path.
#include "src/comm/comm.h"

#include "common/clock.h"
#include "common/format.h"

namespace loom {
namespace {

// Up to this many bytes an operation without a slow wait takes microseconds
// (one-shot's largest: about 10 us at 2 ranks here), far below a coarse tick.
constexpr size_t kQuickOpBytes = 64 * 1024;

size_t opBytes(const algo::CollArgs& a, int nranks) {
  const bool perRank = a.type == algo::CollType::kReduceScatter || a.type == algo::CollType::kAllGather;
  return a.count * dataTypeSize(a.dtype) * (perRank ? static_cast<size_t>(nranks) : 1);
}

}  // namespace

bool Communicator::tryRunBlocking(const algo::CollArgs& args, Status* status) {
  // An aborted or failed communicator takes the general path, which records
  // the refused call.
  if (!blockingShortcut_ || abort_.load() || failed_.load()) return false;
  return executor_->tryRunInline([&] { return runBlocking(args); }, status);
}

Status Communicator::runBlocking(const algo::CollArgs& args) {
  // One clock read serves the deadline and the flight recorder's start.
  const int64_t now = coarseMonotonicNanos();
  // A loop repeats one call: the memo has its algorithm and context ready.
  if (!choiceMemo_.matches(args)) (void)chooseAlgorithm(args, makeWait(now));
  if (!choiceMemo_.hasContext) return noAlgorithmFor(args);
  if (tuner::OnlineSlot* online = choiceMemo_.online) {
    // Exploring (or agreeing on) the fastest candidate: execute()'s steps.
    if (!online->settled()) {
      const OpTicket ticket = diag_->enqueued(OpDescriptor::of(args));
      return diag_->runNow(ticket, [&] { return execute(args, nullptr, ticket); });
    }
    online->countSettledCall();
  }
  // The memo's own context, not a copy: only the deadline changes per call,
  // and nothing else reads the memo while this thread holds the executor.
  algo::AlgoContext& ctx = choiceMemo_.context;
  ctx.wait.deadline = Deadline::afterCoarse(now, config_.timeoutSeconds);
  const tuner::Choice& choice = choiceMemo_.choice;
  const algo::AlgorithmInfo& algorithm = *choice.algorithm;
  lastAlgorithm_.store(choiceMemo_.algorithmRecord, std::memory_order_relaxed);
  const OpTicket ticket =
      diag_->startedNow(OpDescriptor::of(args), algorithm.name, transport::protocolName(choice.proto), now);
  ctx.wait.slowWaits = &slowWaits_;
  const uint32_t slowWaitsBefore = slowWaits_;
  Status status = algorithm.run(args, ctx);
  if (!status.isOk()) {
    status = algorithmFailed(std::move(status), args, algorithm, choice.proto);
    diag_->finished(ticket, status);
    return status;
  }
  // The end time. The record's clock is the coarse one (a tick of 1-4 ms): a
  // small operation over shared memory whose every wait ended within its
  // first polls took microseconds, so reading that clock again would return
  // the start's value, or one tick more as often as a tick falls into those
  // microseconds (a thread descheduled meanwhile is the exception, which the
  // coarse clock blurs as well). The second read was 5% of a 2-rank 8-byte
  // call (two communicators in the same processes, alternating blocks:
  // 0.950-0.954 of the time without it). Over other transports some waits
  // are loops of their own that do not count slow waits: those always read
  // the clock.
  const bool quick =
      bulletin_ != nullptr && slowWaits_ == slowWaitsBefore && opBytes(args, nranks_) <= kQuickOpBytes;
  if (quick) diag_->finished(ticket, status, now);
  else diag_->finished(ticket, status);
  return status;
}

}  // namespace loom
