// Everything a communicator does to make failures debuggable, behind one
// object the communicator calls at a few points of each operation:
//   enqueued()            when an operation is queued (or about to run inline);
//   run()                 wraps the whole operation on the thread that runs it;
//   chose()               once the algorithm and protocol are known;
//   beforeDataMovement()  LOOM_CHECK's cross-rank comparison, right before any
//                         byte of user data moves;
//   progress()            the per-chunk counter for AlgoContext::progress;
//   onAbort()             from loomCommAbort.
// It owns the flight recorder (LOOM_FLIGHT_RECORDER_ENTRIES), the desync check
// (LOOM_CHECK), the signal-triggered dump (LOOM_DUMP_ON_SIGNAL) and the
// Chrome trace (LOOM_TRACE). Dumps go to the log (WARN) and to
// <LOOM_DUMP_DIR, default /tmp>/loom-flight-<host>-<pid>-rank<R>.txt,
// rewritten at each dump; they happen on the first timeout of an operation,
// on loomCommAbort and on the signal.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include "algorithms/algorithm.h"
#include "bootstrap/bootstrap.h"
#include "src/diagnostics/flight_recorder.h"
#include "src/diagnostics/op_descriptor.h"
#include "src/diagnostics/trace_writer.h"
#include "common/config.h"
#include "common/log.h"

namespace loom {

class Diagnostics {
 public:
  Diagnostics(const Config& config, int rank, int nranks, std::string host, Logger log);
  ~Diagnostics();
  Diagnostics(const Diagnostics&) = delete;
  Diagnostics& operator=(const Diagnostics&) = delete;

  // Collective, at communicator creation: every rank adopts rank 0's
  // LOOM_CHECK (ranks that disagree would read descriptors as data), with a
  // warning on the ranks whose setting differed.
  Status agreeOnCheck(bootstrap::Bootstrap& bootstrap, const WaitContext& wait);
  bool checking() const { return check_; }

  // `peers` for the record; empty means every rank.
  OpTicket enqueued(const OpDescriptor& op, std::string_view peers = {});

  template <class Body>
  Status run(const OpTicket& ticket, Body&& body) {
    started(ticket, nowIfRecording());
    Status status = body();
    finished(ticket, status);
    return status;
  }
  // The same for an operation that runs right after enqueued(), on the same
  // thread: it starts when it was enqueued (one clock read fewer per call;
  // the trace's precise clock is still read).
  template <class Body>
  Status runNow(const OpTicket& ticket, Body&& body) {
    started(ticket, trace_ ? now() : ticket.enqueueNs);
    Status status = body();
    finished(ticket, status);
    return status;
  }

  void chose(const OpTicket& ticket, const char* algorithm, const char* protocol);
  // Whether an operation may be recorded in one step (startedNow), as the
  // blocking path does: not with LOOM_CHECK's exchange or the trace's phases.
  bool recordsInOneStep() const { return !check_ && !trace_; }
  // enqueued() + run()'s start + chose() + beforeDataMovement() for an
  // operation that runs at once on the calling thread; end it with finished().
  // `coarseNowNanos`: coarseMonotonicNanos() read by the caller, who needed
  // it anyway (the operation's deadline).
  OpTicket startedNow(const OpDescriptor& op, const char* algorithm, const char* protocol, int64_t coarseNowNanos) {
    return recorder_.startedNow(op, recorder_.capacity() > 0 ? coarseNowNanos : 0, algorithm, protocol);
  }
  void finished(const OpTicket& ticket, const Status& status) { finished(ticket, status, nowIfRecording()); }
  // The same with the end time known to the caller (blocking path, see
  // src/comm/op_runner.cc); `endNs` is in the clock of the operation's start.
  void finished(const OpTicket& ticket, const Status& status, int64_t endNs);
  // LOOM_CHECK's exchange over the Simple `links` (nothing when off, for
  // send/recv, or on one rank); marks the start of data movement.
  Status beforeDataMovement(const OpTicket& ticket, algo::Links& links, const WaitContext& wait) {
    if (!check_ && !trace_) {  // the per-call common case: one relaxed store
      recorder_.setPhase(OpPhase::kDataMovement);
      return Status::ok();
    }
    return checkAndMarkDataMovement(ticket, links, wait);
  }
  std::atomic<uint64_t>* progress() { return recorder_.progressCounter(); }

  void onAbort();
  // Writes the flight record to the log and the dump file.
  void dump(const std::string& reason);
  const std::string& dumpPath() const { return dumpPath_; }
  const FlightRecorder& recorder() const { return recorder_; }

 private:
  void started(const OpTicket& ticket, int64_t now);
  Status checkAndMarkDataMovement(const OpTicket& ticket, algo::Links& links, const WaitContext& wait);
  // One clock read per operation edge, only when something records time.
  // The trace needs precise times; the flight recorder alone takes the
  // coarse clock (a blocking call reads it three times).
  int64_t now() const { return trace_ ? monotonicNanos() : coarseMonotonicNanos(); }
  int64_t nowIfRecording() const { return recorder_.capacity() > 0 || trace_ ? now() : 0; }
  void traceOp(const OpTicket& ticket, const Status& status, int64_t endNs);

  const int rank_;
  const int nranks_;
  const std::string host_;
  Logger log_;
  bool check_;
  const int64_t createdNs_;
  std::string allPeers_;
  std::string dumpPath_;
  FlightRecorder recorder_;
  std::unique_ptr<TraceWriter> trace_;
  int signalToken_ = -1;
  std::atomic<bool> timeoutDumped_{false};
  std::atomic<bool> abortDumped_{false};
  std::mutex dumpMu_;  // one dump at a time (signal thread, executor, abort)
  // Phase times of the running operation (only its thread writes them).
  int64_t startNs_ = 0, checkStartNs_ = 0, checkEndNs_ = 0, moveStartNs_ = 0;
  std::string algorithm_;
};

}  // namespace loom
