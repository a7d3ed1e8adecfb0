#include "src/comm/op_runner.h"

#include <algorithm>

#include <utility>

#include "algorithms/subgroup.h"
#include "common/clock.h"
#include "common/format.h"
#include "src/comm/comm.h"
#include "src/comm/stream.h"
#include "src/device/comm_devices.h"

// The steps of a blocking collective are inlined into one function: an
// 8-byte all-reduce is a few hundred instructions around one cache-line
// hand-off, and each call layer (frame, Status moves) shows in it.
#define LOOM_STEP inline __attribute__((always_inline))

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

// One operation as it runs: what it is, its flight-recorder ticket and what
// it waits for first.
struct OpRunner::Run {
  const algo::CollArgs* args = nullptr;  // a collective of the registry, or
  const OpWork* work = nullptr;          // other work
  OpTicket ticket;
  // False until the ticket exists: a one-step record takes it at the choice.
  bool recorded = false;
  // The operation started when it was enqueued (it runs right after, on the
  // same thread): one clock read fewer.
  bool startsAtEnqueue = false;
  // One-step records: the end may reuse the start's coarse clock reading.
  bool quick = false;
  int64_t startNs = 0;
  // The caller's thread already counted and announced the collective and ran
  // its algorithm's split post (runInline): the run finishes it.
  bool posted = false;
  const Completion* after = nullptr;       // stream predecessor
  cuda::PriorWork* devicePrior = nullptr;  // CUDA stream's earlier work

  OpDescriptor descriptor() const { return args ? OpDescriptor::of(*args) : work->op; }
  // Empty: every rank (the recorder's default); send/recv name their peers.
  std::string_view peers() const { return work && !work->op.collective() ? std::string_view(work->what) : ""; }
};

// A queued operation in one allocation: the completion its stream and callers
// share, and the executor's task that runs it. The executor holds it through
// `self` until it ran.
struct OpRunner::Queued final : Completion, ExecutorTask {
  OpRunner* runner = nullptr;
  algo::CollArgs args;
  std::unique_ptr<OpWork> work;  // other work than a collective of the registry
  Run run;
  CompletionPtr after;  // the stream predecessor, dropped once this op ran (no chain of old ops)
  std::shared_ptr<cuda::PriorWork> devicePrior;
  // The op's place on the CUDA stream's gate: released once the op ran,
  // whatever its status, so later work on the CUDA stream never waits on a
  // failed op (its error is the communicator's and the stream's).
  cuda::StreamOrderTicket deviceOrder;
  CompletionPtr self;  // the executor's reference

  Status execute() override {
    struct DropPredecessor {
      Queued* op;
      ~DropPredecessor() {
        op->deviceOrder.release();
        op->run.after = nullptr;
        op->run.devicePrior = nullptr;
        op->after.reset();
        op->devicePrior.reset();
      }
    } drop{this};
    return runner->run(run);
  }
  void finish(Status status) override {
    // The last reference may be this one (the stream and the caller let go):
    // it goes after the completion, which is this object.
    CompletionPtr keep = std::move(self);
    complete(std::move(status));
  }
};

const char* OpRunner::nameOf(const Run& run) {
  return run.args ? algo::collTypeName(run.args->type) : run.work->what.c_str();
}

Status OpRunner::runBlocking(const algo::CollArgs& args) {
  Run run;
  run.args = &args;
  return runBlocking(run);
}

Status OpRunner::runBlocking(const OpWork& work) {
  Run run;
  run.work = &work;
  return runBlocking(run);
}

LOOM_STEP Status OpRunner::runBlocking(Run& r) {
  Communicator& c = comm_;
  if (!oneStep_ || !r.args) {
    r.ticket = c.diag_->enqueued(r.descriptor(), r.peers());
    r.recorded = true;
    r.startsAtEnqueue = true;
  }
  // Every return below is a prvalue: the status is built where the caller
  // receives it, with no move of its message on the way up.
  if (std::unique_lock<std::mutex> turn = c.executor_->inlineTurn(); turn.owns_lock()) return run(r);
  return runQueued(r);
}

Status OpRunner::runQueued(Run& r) {
  Communicator& c = comm_;
  // Operations are queued before this one: it runs after them, on this
  // thread or the worker's, and this call returns when it is done.
  if (!r.recorded) {
    r.ticket = c.diag_->enqueued(r.descriptor(), r.peers());
    r.recorded = true;
  }
  r.startsAtEnqueue = false;
  auto completion = std::make_shared<Completion>();
  c.executor_->submit({[this, &r] { return run(r); }, completion}, false);
  c.executor_->runUntil(completion);
  return completion->status();
}

CompletionPtr OpRunner::enqueueAsync(const algo::CollArgs& args, Stream* stream) {
  return enqueueAsync(args, stream, false);
}

CompletionPtr OpRunner::enqueueAsync(const algo::CollArgs& args, Stream* stream, bool posted,
                                     const OpTicket* ticket) {
  auto op = std::make_shared<Queued>();
  op->args = args;
  op->run.args = &op->args;
  op->run.posted = posted;
  if (ticket) {
    op->run.ticket = *ticket;
    op->run.recorded = true;
  }
  return enqueueAsync(std::move(op), stream);
}

CompletionPtr OpRunner::enqueueAsync(OpWork work, Stream* stream) {
  auto op = std::make_shared<Queued>();
  op->work = std::make_unique<OpWork>(std::move(work));
  op->run.work = op->work.get();
  return enqueueAsync(std::move(op), stream);
}

CompletionPtr OpRunner::enqueueAsync(std::shared_ptr<Queued> op, Stream* stream) {
  Communicator& c = comm_;
  std::unique_lock<std::mutex> turn;  // CUDA-bound streams only: host streams have no second order to agree with
  if (stream && stream->device()) turn = stream->enqueueTurn();
  const bool quick = op->run.args && opBytes(*op->run.args, c.nranks_) <= kQuickOpBytes;
  op->after = stream ? stream->push(op, c.executor_.get(), quick) : nullptr;
  op->run.after = op->after.get();
  if (!op->run.recorded) {
    op->run.ticket = c.diag_->enqueued(op->run.descriptor(), op->run.peers());
    op->run.recorded = true;
  }
  cuda::DeviceStream* device = stream ? stream->device() : nullptr;
  uint64_t deviceSequence = 0;
  if (device) {
    op->devicePrior = device->markPriorWork();
    op->run.devicePrior = op->devicePrior.get();
    // Reserved before the op is queued: it may complete before orderAfter.
    op->deviceOrder = device->reserveOrder();
    deviceSequence = op->deviceOrder.sequence();
  }
  op->runner = this;
  Queued* raw = op.get();
  CompletionPtr completion = op;
  raw->self = std::move(op);
  c.executor_->submit(raw, true);
  if (device) {
    if (Status s = device->orderAfter(deviceSequence); !s.isOk() && !c.failed_.load())
      c.recordError(
          s.withContext(strprintf("ordering the CUDA stream after %s on rank %d: ", nameOf(raw->run), c.rank_)));
  }
  return completion;
}

template <typename Ready>
bool OpRunner::peersSoon(Ready ready) {
  Communicator& c = comm_;
  // Peers in step get there within a cache-line hand-off: poll without
  // reading the clock first (a read costs as much as the hand-off).
  for (int i = 0; i < 256; ++i) {
    if (ready()) return true;
    cpuRelax();
  }
  WaitContext brief;
  brief.deadline = Deadline::after(c.config_.asyncInlineMicros * 1e-6);
  brief.spinMicros = std::min(c.config_.asyncInlineMicros, 2);
  brief.yieldMicros = c.config_.asyncInlineMicros;
  brief.abort = &c.abort_;
  return waitUntil(ready, nullptr, brief, [] { return std::string(); }).isOk();
}

bool OpRunner::idleSoon(Stream& stream, std::unique_lock<std::mutex>* turn) {
  Communicator& c = comm_;
  // Earlier small calls went to the worker (a peer was late): the workers
  // are running them now. Waiting a moment for them lets this call, and the
  // ones after it, run inline again. Without the wait, a caller that
  // enqueues faster than the workers finish keeps every later call on the
  // worker, and competes with it for the cores while it enqueues (with two
  // ranks on two cores, some 8-byte loops ran at 9-12 us a call instead of
  // 0.8). The wait is bounded, so a deep queue still drains through the
  // worker; each call then waits once, which slows the caller down to the
  // workers' pace until they catch up. A large op on the stream is left to
  // the worker: waiting for it would not pay.
  if (!stream.onlyQuickOutstanding()) return false;
  const Deadline until = Deadline::after(c.config_.asyncInlineMicros * 1e-6);
  // A backlog of more than a couple of calls: the workers lag, and polling
  // for them below (again on every later call) takes the cores they need. At
  // 2 ranks on 2 cores an 8-byte loop stuck in that state for thousands of
  // calls, at 1.5-3.5 us a call against 0.4 inline. Sleeping instead, within
  // the same bound, gives the workers the cores until the newest call is
  // done, and the calls after it run inline again.
  if (CompletionPtr newest = stream.newestOfQuickBacklog(kBacklogToSleepOn))
    (void)newest->sleepUntilDone(c.config_.asyncInlineMicros);
  WaitContext brief;
  brief.deadline = until;
  brief.spinMicros = std::min(c.config_.asyncInlineMicros, 2);
  brief.yieldMicros = c.config_.asyncInlineMicros;
  brief.abort = &c.abort_;
  return waitUntil(
             [&] {
               if (!stream.idle()) return false;
               *turn = c.executor_->inlineTurn();
               return turn->owns_lock();
             },
             nullptr, brief, [] { return std::string(); })
      .isOk();
}

bool OpRunner::runInline(const algo::CollArgs& args, Stream& stream) {
  Communicator& c = comm_;
  // A rank alone has no peer to wait for: its small calls are a local copy
  // or reduction, cheaper than the hand-off to the worker (1 rank, 8 B:
  // 0.13-0.25 us a call inline against 0.73-1.20 us through the worker).
  const bool alone = c.nranks_ == 1;
  if (c.config_.asyncInlineMicros <= 0 || (!c.bulletin_ && !alone) || stream.device() ||
      opBytes(args, c.nranks_) > kQuickOpBytes)
    return false;
  // Nothing queued on the communicator, nothing running; held while the op runs.
  std::unique_lock<std::mutex> turn = c.executor_->inlineTurn();
  if (!turn.owns_lock() || !stream.idle()) {
    if (turn.owns_lock()) turn.unlock();
    if (!idleSoon(stream, &turn)) return false;
  }
  if (!alone && runSplit(args, stream)) return true;
  return runInlineWhole(args, stream);
}

bool OpRunner::runInlineWhole(const algo::CollArgs& args, Stream& stream) {
  Communicator& c = comm_;
  if (c.nranks_ > 1) {
    // steps() announces the same number again if the op goes to the worker.
    const uint64_t seq = collectivesStarted_ + 1;
    c.bulletin_->announceStart(seq);
    if (!peersSoon([&] { return c.bulletin_->peersStarted(seq); }))
      return false;  // the worker runs it; the call returns now
  }
  // Every peer is inside this collective, or has handed it to its own
  // worker, which runs it next: it completes without anything more from the
  // caller, so running it on the caller's thread cannot make the call wait
  // on work the caller has yet to do (the deadlock an asynchronous call must
  // never risk). It runs as a blocking call would; the stream keeps its
  // outcome for loomStreamSynchronize and loomStreamQuery.
  Run r;
  r.args = &args;
  if (!oneStep_) {
    r.ticket = c.diag_->enqueued(r.descriptor(), r.peers());
    r.recorded = true;
    r.startsAtEnqueue = true;
  }
  stream.noteFinished(run(r));
  return true;
}

bool OpRunner::runSplit(const algo::CollArgs& args, Stream& stream) {
  Communicator& c = comm_;
  // The algorithm's post stands in for the wait for the peers' announcements:
  // once every peer has posted, every peer is inside this collective, and the
  // finish waits only for their writes in flight. One hand-off per call
  // instead of two. Not under LOOM_CHECK or the trace (oneStep_ off): the
  // check's exchange must come before any data moves. Not while online
  // tuning explores: an exploring call first agrees on its candidate.
  if (!oneStep_ || c.abort_.load() || c.failed_.load()) return false;
  Communicator::ChoiceMemo& memo = c.choiceMemo_;
  const int64_t now = coarseMonotonicNanos();
  if (!memo.matches(args)) (void)c.chooseAlgorithm(args, c.makeWait(now));
  if (!memo.hasContext || !memo.split || (memo.online && !memo.online->settled())) return false;
  const algo::SplitRun* split = memo.split;
  algo::AlgoContext& ctx = memo.context;
  ctx.wait.deadline = Deadline::afterCoarse(now, c.config_.timeoutSeconds);
  algo::SplitPosted posted = algo::SplitPosted::kNothing;
  const uint64_t seq = collectivesStarted_ + 1;
  c.bulletin_->announceStart(seq);
  if (Status s = split->post(args, ctx, &posted); !s.isOk()) {
    // Refused before any data moved (the bulletin's own checks): the run reports it.
    return false;
  }
  if (posted == algo::SplitPosted::kNothing) return false;  // a link still full: the whole run goes to the worker
  collectivesStarted_ = seq;
  // What steps() records before the algorithm's body (the one-step record,
  // the last algorithm), done now, while the peers' posts are in flight: a
  // rank in step with its peers would otherwise wait here anyway, and do it
  // after their posts arrived, on the path of every call.
  Run r;
  r.args = &args;
  r.posted = true;
  c.lastAlgorithm_.store(memo.algorithmRecord, std::memory_order_relaxed);
  r.ticket = c.diag_->startedNow(OpDescriptor::of(args), memo.choice.algorithm->name,
                                 transport::protocolName(memo.choice.proto), now);
  r.recorded = true;
  r.startNs = now;
  // The poll is on the hand-off's path: the bulletin's own check when the
  // post went there (algorithm.h's SplitPosted).
  const transport::Bulletin* bulletin = posted == algo::SplitPosted::kOnBulletin ? ctx.bulletin : nullptr;
  const bool peersIn = bulletin ? peersSoon([bulletin] { return bulletin->peersPosted(); })
                                : peersSoon([&] { return split->peersPosted(args, ctx); });
  if (peersIn) {
    if (memo.online) memo.online->countSettledCall();
    Status status = runAlgorithm(r, args, memo.choice, ctx, nullptr, false);
    endOneStepRecord(r, status);
    stream.noteFinished(status);
  } else {
    // A peer has not posted yet: the worker finishes, under the record
    // started above, and the call returns.
    (void)enqueueAsync(args, &stream, /*posted=*/true, &r.ticket);
  }
  return true;
}

LOOM_STEP Status OpRunner::run(Run& r) {
  if (r.recorded) return runRecorded(r);
  return runOneStep(r);
}

LOOM_STEP Status OpRunner::runOneStep(Run& r) {
  // The record is taken at the choice (or at a refusal) and ended here.
  Status status = steps(r);
  if (r.recorded) endOneStepRecord(r, status);
  return status;
}

LOOM_STEP void OpRunner::endOneStepRecord(const Run& r, const Status& status) {
  if (r.quick) comm_.diag_->finished(r.ticket, status, r.startNs);
  else comm_.diag_->finished(r.ticket, status);
}

Status OpRunner::runRecorded(Run& r) {
  Diagnostics& diag = *comm_.diag_;
  return r.startsAtEnqueue ? diag.runNow(r.ticket, [&] { return steps(r); })
                           : diag.run(r.ticket, [&] { return steps(r); });
}

LOOM_STEP Status OpRunner::steps(Run& r) {
  Communicator& c = comm_;
  // One clock read serves the deadline and a one-step record's start.
  const int64_t now = coarseMonotonicNanos();
  // 1-2. Refusal and waits.
  if (r.devicePrior) LOOM_TRY(waitDevicePrior(r.devicePrior));
  if (c.abort_.load())
    return refuse(r, makeError(Code::kRemoteError, "communicator of rank %d was aborted", c.rank_), now);
  if (c.failed_.load()) return refuse(r, c.asyncError(), now);
  if (const Completion* after = r.after) {
    // Stream order: the previous op of the same stream may run on another communicator.
    LOOM_TRY(waitUntil([&] { return after->done(); }, nullptr, c.makeWait(now),
                       [] { return std::string("the previous operation on the stream"); }));
  }
  // Every rank counts the same collectives in the same order; peers of an
  // asynchronous call read the count (inlineTurn). Send/recv are not counted:
  // ranks make different ones.
  if (!r.posted && (r.args || r.work->op.collective())) {
    ++collectivesStarted_;
    if (c.bulletin_) c.bulletin_->announceStart(collectivesStarted_);
  }
  // 3-5. Every wait of the operation has the deadline that `now` gives.
  if (!r.args) return runWork(r, *r.work, now);
  if (c.devices_) return runOnDevices(r, *r.args, now);
  return runCollective(r, *r.args, now);
}

Status OpRunner::refuse(Run& r, Status status, int64_t now) {
  // A one-step call refused after all (aborted meanwhile) still leaves a record.
  if (!r.recorded) {
    r.ticket = comm_.diag_->startedNow(r.descriptor(), nullptr, nullptr, now);
    r.recorded = true;
  }
  return status;
}

Status OpRunner::runOnDevices(Run& r, const algo::CollArgs& args, int64_t now) {
  Communicator& c = comm_;
  const WaitContext wait = c.makeWait(now);
  // Device buffers (src/device): staged through pinned host memory, with the
  // host algorithm run on the staging buffers, or run directly between the
  // devices. Host buffers fall through.
  bool handled = false;
  // The inter-host step of a device collective across hosts
  // (src/device/engine_across_hosts.h): the host ring or chain algorithm of
  // the collective among the rail's ranks over the communicator's links; an
  // average sums there and divides by the whole communicator's size.
  auto runOnRail = [&](const algo::CollArgs& host, const std::vector<int>& members) -> Status {
    algo::AlgoContext ctx;
    if (!c.contextFor(transport::Protocol::kSimple, wait, &ctx))
      return makeError(Code::kInternalError, "rank %d: no links for the inter-host step", c.rank_);
    algo::Subgroup rail(ctx, members, /*singleHost=*/false);
    return algo::runOnSubgroup(host, rail, c.nranks_);
  };
  Status device = c.devices_->runCollective(
      args, wait, [&](const algo::CollArgs& host) { return runCollective(r, host, now); }, &handled, runOnRail);
  if (!device.isOk() && !c.failed_.load())
    c.recordError(device.withContext(strprintf("%s (count %zu, %s) on rank %d: ", algo::collTypeName(args.type),
                                               args.count, dataTypeName(args.dtype), c.rank_)));
  if (handled && c.devices_->lastPath() == cuda::DataPath::kEngine)
    c.lastAlgorithm_.store(Communicator::kEngineRecord, std::memory_order_relaxed);
  if (handled && c.devices_->lastPath() == cuda::DataPath::kEngineAcrossHosts)
    c.lastAlgorithm_.store(Communicator::kEngineAcrossHostsRecord, std::memory_order_relaxed);
  if (handled || !device.isOk()) return device;
  return runCollective(r, args, now);
}

LOOM_STEP Status OpRunner::runCollective(Run& r, const algo::CollArgs& args, int64_t now) {
  Communicator& c = comm_;
  // 3. The plan. A loop repeats one call: the memo has its algorithm and
  // context ready, and only the deadline changes per call.
  Communicator::ChoiceMemo& memo = c.choiceMemo_;
  if (!memo.matches(args)) (void)c.chooseAlgorithm(args, c.makeWait(now));
  if (!memo.hasContext) return noAlgorithmFor(args);
  tuner::Choice choice = memo.choice;
  algo::AlgoContext* ctx = &memo.context;
  int lastAlgorithm = memo.algorithmRecord;
  bool exploring = false, timed = false;
  tuner::OnlineSlot* const online = memo.online;
  if (online) {
    if (online->settled()) {
      online->countSettledCall();
    } else {
      // Exploring: a candidate, or the winner once the due agreement ran.
      LOOM_TRY(exploreOnline(args, *online, c.makeWait(now), &choice, &exploring, &timed));
      ctx = &candidate_;
      lastAlgorithm = Communicator::algorithmRecord(*choice.algorithm, choice.proto);
    }
  }
  ctx->wait.deadline = Deadline::afterCoarse(now, c.config_.timeoutSeconds);
  // 4. Diagnostics.
  if (Status check; !recordChoice(r, choice.algorithm->name, transport::protocolName(choice.proto), lastAlgorithm,
                                  now, &check))
    return check;
  return runAlgorithm(r, args, choice, *ctx, exploring ? online : nullptr, timed);
}

LOOM_STEP Status OpRunner::runAlgorithm(Run& r, const algo::CollArgs& args, const tuner::Choice& choice,
                                        algo::AlgoContext& ctx, tuner::OnlineSlot* trial, bool timed) {
  // 5. The body.
  Communicator& c = comm_;
  const algo::AlgorithmInfo& algorithm = *choice.algorithm;
  ctx.wait.slowWaits = &slowWaits_;
  const uint32_t slowWaitsBefore = slowWaits_;
  const int64_t start = timed ? monotonicNanos() : 0;
  Status status = !r.posted          ? algorithm.run(args, ctx)
                  : algorithm.split ? algorithm.split->finish(args, ctx)
                                    : makeError(Code::kInternalError, "%s has no finish for its posted run",
                                                algorithm.name);
  if (trial) trial->finishTrial(timed ? monotonicNanos() - start : -1);
  if (!status.isOk()) {
    status = status.withContext(strprintf("%s (%s/%s, count %zu, %s) on rank %d: ", algo::collTypeName(args.type),
                                          algorithm.name, transport::protocolName(choice.proto), args.count,
                                          dataTypeName(args.dtype), c.rank_));
    c.recordError(status);
  } else {
    // The end time of a one-step record. Its clock is the coarse one (a tick of
    // 1-4 ms): a small operation over shared memory whose every wait ended
    // within its first polls took microseconds, so reading that clock again
    // would return the start's value, or one tick more as often as a tick falls
    // into those microseconds (a thread descheduled meanwhile is the exception,
    // which the coarse clock blurs as well). The second read was 5% of a 2-rank
    // 8-byte call (two communicators in the same processes, alternating blocks:
    // 0.950-0.954 of the time without it). Over other transports some waits are
    // loops of their own that do not count slow waits: those always read the clock.
    r.quick = c.bulletin_ != nullptr && slowWaits_ == slowWaitsBefore && opBytes(args, c.nranks_) <= kQuickOpBytes;
  }
  return status;
}

Status OpRunner::exploreOnline(const algo::CollArgs& args, tuner::OnlineSlot& slot, const WaitContext& wait,
                               tuner::Choice* choice, bool* exploring, bool* timed) {
  Communicator& c = comm_;
  LOOM_TRY(c.onlineChoice(args, slot, wait, choice, exploring, timed));
  if (!choice->algorithm || !c.contextFor(choice->proto, wait, &candidate_)) return noAlgorithmFor(args);
  candidate_.progress = c.diag_->progress();
  return Status::ok();
}

Status OpRunner::runWork(Run& r, const OpWork& work, int64_t now) {
  Communicator& c = comm_;
  const WaitContext wait = c.makeWait(now);
  // 3. Not an algorithm of the registry: the Simple links, and
  // loomCommGetLastAlgorithm must not keep naming the collective before it.
  algo::AlgoContext ctx;
  (void)c.contextFor(transport::Protocol::kSimple, wait, &ctx);
  // 4. LOOM_CHECK compares all-to-all and barrier descriptors alike.
  if (Status check; !recordChoice(r, work.algorithm, transport::protocolName(transport::Protocol::kSimple), -1, now,
                                  &check))
    return check;
  // 5.
  ctx.progress = c.diag_->progress();
  Status status = work.run(ctx);
  if (!status.isOk()) {
    status = status.withContext(work.what + " on rank " + std::to_string(c.rank_) + ": ");
    c.recordError(status);
  }
  return status;
}

LOOM_STEP bool OpRunner::recordChoice(Run& r, const char* algorithm, const char* protocol, int lastAlgorithm,
                                      int64_t now, Status* failure) {
  Communicator& c = comm_;
  c.lastAlgorithm_.store(lastAlgorithm, std::memory_order_relaxed);
  if (!r.recorded) {
    // One step (oneStep_: no check, no trace): enqueue, start and choice.
    r.ticket = c.diag_->startedNow(r.descriptor(), algorithm, protocol, now);
    r.recorded = true;
    r.startNs = now;
    return true;
  }
  *failure = recordSeparately(r, algorithm, protocol, now);
  return failure->isOk();
}

Status OpRunner::recordSeparately(Run& r, const char* algorithm, const char* protocol, int64_t now) {
  Communicator& c = comm_;
  if (r.args) {
    const algo::CollArgs& a = *r.args;
    LOOM_TRACE(c.log_, kSubsysColl, "%s %s/%s count %zu %s %s root %d", algo::collTypeName(a.type), algorithm,
               protocol, a.count, dataTypeName(a.dtype), redOpName(a.op), a.root);
  } else {
    LOOM_TRACE(c.log_, kSubsysColl, "%s", r.work->what.c_str());
  }
  c.diag_->chose(r.ticket, algorithm, protocol);
  // LOOM_CHECK: a mismatch fails every rank with the same message, before any data moves.
  if (Status check = c.diag_->beforeDataMovement(r.ticket, c.simpleLinks(), c.makeWait(now)); !check.isOk()) {
    c.recordError(check);
    return check;
  }
  return Status::ok();
}

Status OpRunner::runWithinOperation(const algo::CollArgs& args, const WaitContext& wait) {
  Communicator& c = comm_;
  algo::AlgoContext ctxs[transport::kNumProtocols];
  tuner::ProtoContexts available{};
  for (int p = 0; p < transport::kNumProtocols; ++p)
    if (c.contextFor(static_cast<transport::Protocol>(p), wait, &ctxs[p])) available[static_cast<size_t>(p)] = &ctxs[p];
  const tuner::Choice how = c.tuner_->choose(args, available);
  if (!how.algorithm) return noAlgorithmFor(args);
  algo::AlgoContext& ctx = ctxs[static_cast<int>(how.proto)];
  ctx.progress = c.diag_->progress();
  return how.algorithm->run(args, ctx);
}

Status OpRunner::waitDevicePrior(cuda::PriorWork* prior) {
  Communicator& c = comm_;
  Status s = prior->wait(c.makeWait());
  if (!s.isOk()) {
    s = s.withContext(strprintf("rank %d, waiting for the CUDA stream: ", c.rank_));
    if (!c.failed_.load()) c.recordError(s);
  }
  return s;
}

Status OpRunner::noAlgorithmFor(const algo::CollArgs& args) {
  Status status = makeError(Code::kInternalError, "no algorithm can run %s (count %zu, %s) on rank %d",
                            algo::collTypeName(args.type), args.count, dataTypeName(args.dtype), comm_.rank_);
  comm_.recordError(status);
  return status;
}

}  // namespace loom
