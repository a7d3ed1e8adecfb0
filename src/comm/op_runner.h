// Runs every operation of one communicator: a collective of the algorithm
// registry or other work (fused send/recv, barrier), blocking or queued on a
// stream, on host or device buffers, exploring candidates under online
// tuning or not. One sequence of steps serves them all, so none can skip one:
//   1. after the CUDA stream's earlier work (CUDA-bound streams), a refused
//      call (aborted or failed communicator) fails at once;
//   2. the wait for the stream predecessor;
//   3. the plan: algorithm, protocol and the AlgoContext it runs in;
//   4. diagnostics: the last-algorithm record, LOOM_TRACE, the flight
//      recorder's choice and LOOM_CHECK's exchange, before any data moves;
//   5. the body, with failures given the call's context and made sticky.
// A blocking collective with nothing queued before it, while no check, trace
// or device is active, records enqueue, start and choice in one flight-
// recorder step (Diagnostics::startedNow): a branch of step 4, decided per
// call from flags fixed at creation.
//
// Only the thread holding the communicator's executor runs operations, so
// the runner's state needs no lock.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "algorithms/algorithm.h"
#include "common/completion.h"
#include "common/status.h"
#include "common/wait.h"
#include "src/diagnostics/flight_recorder.h"
#include "src/diagnostics/op_descriptor.h"
#include "src/tuner/online_tuner.h"
#include "src/tuner/tuner.h"

namespace loom {

class Communicator;
class Stream;
namespace cuda {
class PriorWork;
}  // namespace cuda

// An operation that is not a collective of the algorithm registry: it runs
// its own body over the Simple links.
struct OpWork {
  std::string what;       // "barrier", "send of 8 bytes to peer 1": trace, errors, recorder peers
  OpDescriptor op;        // what the flight recorder and LOOM_CHECK see
  const char* algorithm = nullptr;  // the recorder's name for it (a static string)
  std::function<Status(const algo::AlgoContext&)> run;
};

class OpRunner {
 public:
  explicit OpRunner(Communicator& comm) : comm_(comm) {}
  OpRunner(const OpRunner&) = delete;
  OpRunner& operator=(const OpRunner&) = delete;

  // Whether a blocking collective may be recorded in one step: not with
  // LOOM_CHECK, the trace, per-call trace logging or device memory, which
  // need the separate steps. Set once at creation.
  void setOneStepRecords(bool on) { oneStep_ = on; }

  // Runs the operation and returns when it is done: on the calling thread at
  // once when nothing is queued, else after the queued operations.
  Status runBlocking(const algo::CollArgs& args);
  Status runBlocking(const OpWork& work);
  // Queues the operation for the executor's worker behind `stream`'s
  // previous one (null: none) and returns its completion.
  CompletionPtr enqueueAsync(const algo::CollArgs& args, Stream* stream);
  CompletionPtr enqueueAsync(OpWork work, Stream* stream);
  // A collective for `stream` run at once on the calling thread, when that
  // cannot make the call wait for its peers (LOOM_ASYNC_INLINE_US): it is
  // small, the stream and the executor are idle, and either the rank is
  // alone or the communicator has a shared-memory bulletin and every peer
  // announces this collective within the knob's time. False: nothing was
  // done, enqueueAsync it.
  bool runInline(const algo::CollArgs& args, Stream& stream);

  // A collective that is a step of the running operation (the agreement of
  // online tuning): the tuner's algorithm over `wait`, no record of its own.
  Status runWithinOperation(const algo::CollArgs& args, const WaitContext& wait);

 private:
  struct Run;
  struct Queued;
  Status runBlocking(Run& run);
  Status runQueued(Run& run);
  CompletionPtr enqueueAsync(std::shared_ptr<Queued> op, Stream* stream);
  // `posted`: the caller's thread ran the split post (runSplit); the worker
  // finishes, under `ticket` (the record the caller started) if not null.
  CompletionPtr enqueueAsync(const algo::CollArgs& args, Stream* stream, bool posted, const OpTicket* ticket = nullptr);
  // runInline for an algorithm with a split run: posts on the caller's
  // thread, then finishes there once every peer has posted within
  // LOOM_ASYNC_INLINE_US, or hands the finish to the worker. False: nothing
  // was posted.
  bool runSplit(const algo::CollArgs& args, Stream& stream);
  // The rest of runInline, the executor's turn held, for a rank alone or an
  // algorithm without a split run: the whole run on the caller's thread once
  // every peer has announced the collective. Kept out of runInline, whose
  // frame is on every small stream call's path.
  [[gnu::noinline]] bool runInlineWhole(const algo::CollArgs& args, Stream& stream);
  // Whether `stream` and the executor become idle within LOOM_ASYNC_INLINE_US
  // (only small ops still on the stream); then *turn owns the executor's
  // inline turn.
  [[gnu::noinline]] bool idleSoon(Stream& stream, std::unique_lock<std::mutex>* turn);
  // More unfinished calls than this on the stream, all small: idleSoon
  // sleeps on the newest instead of polling.
  static constexpr size_t kBacklogToSleepOn = 2;
  // Whether `ready` (every peer announced, or posted) holds within LOOM_ASYNC_INLINE_US.
  template <typename Ready>
  bool peersSoon(Ready ready);
  // The whole operation on the thread that runs it, recorder edges included.
  Status run(Run& run);
  Status runRecorded(Run& run);
  Status runOneStep(Run& run);
  // Ends a one-step record (taken by startedNow); a quick operation reuses
  // its start's coarse clock reading as its end.
  void endOneStepRecord(const Run& run, const Status& status);
  // Steps 1 to 5.
  Status steps(Run& run);
  Status refuse(Run& run, Status status, int64_t now);
  // Steps 3-5; `now` (coarse clock) gives every wait of the operation its deadline.
  Status runOnDevices(Run& run, const algo::CollArgs& args, int64_t now);
  Status runCollective(Run& run, const algo::CollArgs& args, int64_t now);
  // Step 5 of a collective; `trial`: the online slot whose candidate it times.
  Status runAlgorithm(Run& run, const algo::CollArgs& args, const tuner::Choice& choice, algo::AlgoContext& ctx,
                      tuner::OnlineSlot* trial, bool timed);
  // Online tuning's choice for an exploring call, its context in candidate_.
  Status exploreOnline(const algo::CollArgs& args, tuner::OnlineSlot& slot, const WaitContext& wait,
                       tuner::Choice* choice, bool* exploring, bool* timed);
  Status runWork(Run& run, const OpWork& work, int64_t now);
  // Step 4; false with *failure set on LOOM_CHECK's mismatch, which is
  // recorded as the communicator's error.
  bool recordChoice(Run& run, const char* algorithm, const char* protocol, int lastAlgorithm, int64_t now,
                    Status* failure);
  Status recordSeparately(Run& run, const char* algorithm, const char* protocol, int64_t now);
  Status waitDevicePrior(cuda::PriorWork* prior);
  Status noAlgorithmFor(const algo::CollArgs& args);
  // What the trace and errors call the operation.
  static const char* nameOf(const Run& run);

  Communicator& comm_;
  bool oneStep_ = false;
  // Collectives started on this communicator, counted alike on every rank
  // (Bulletin::announceStart).
  uint64_t collectivesStarted_ = 0;
  // Waits of the running operation that outlasted their first polls
  // (WaitContext::slowWaits).
  uint32_t slowWaits_ = 0;
  // The context of an exploring call's candidate.
  algo::AlgoContext candidate_;
};

}  // namespace loom
