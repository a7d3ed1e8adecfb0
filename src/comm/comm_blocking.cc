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
#include "comm/comm.h"

#include "common/clock.h"
#include "common/format.h"

namespace loom {

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
  // The memo's own context, not a copy: only the deadline changes per call,
  // and nothing else reads the memo while this thread holds the executor.
  algo::AlgoContext& ctx = choiceMemo_.context;
  ctx.wait.deadline = Deadline::afterCoarse(now, config_.timeoutSeconds);
  const tuner::Choice& choice = choiceMemo_.choice;
  const algo::AlgorithmInfo& algorithm = *choice.algorithm;
  lastAlgorithm_.store(choiceMemo_.algorithmRecord, std::memory_order_relaxed);
  const OpTicket ticket =
      diag_->startedNow(OpDescriptor::of(args), algorithm.name, transport::protocolName(choice.proto), now);
  Status status = algorithm.run(args, ctx);
  if (!status.isOk()) status = algorithmFailed(std::move(status), args, algorithm, choice.proto);
  diag_->finished(ticket, status);
  return status;
}

}  // namespace loom
