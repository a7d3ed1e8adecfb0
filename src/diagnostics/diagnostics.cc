#include "src/diagnostics/diagnostics.h"

#include <unistd.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <vector>

#include "src/diagnostics/desync_check.h"
#include "src/diagnostics/dump_signal.h"
#include "common/format.h"

namespace loom {
namespace {

// A second communicator of the same rank in one process (a split) gets its
// own dump file: "-comm<K>" after the first.
std::string uniqueDumpPath(const std::string& base) {
  static std::mutex mu;
  static std::map<std::string, int>* used = new std::map<std::string, int>;
  std::lock_guard<std::mutex> lock(mu);
  const int uses = (*used)[base]++;
  return uses == 0 ? base + ".txt" : base + "-comm" + std::to_string(uses) + ".txt";
}

}  // namespace

Diagnostics::Diagnostics(const Config& config, int rank, int nranks, std::string host, Logger log)
    : rank_(rank),
      nranks_(nranks),
      host_(std::move(host)),
      log_(std::move(log)),
      check_(config.check),
      createdNs_(config.tracePath.empty() ? coarseMonotonicNanos() : monotonicNanos()),
      allPeers_(strprintf("all %d ranks", nranks)),
      recorder_(static_cast<size_t>(config.flightRecorderEntries), allPeers_) {
  const std::string dir = config.dumpDir.empty() ? "/tmp" : config.dumpDir;
  dumpPath_ = uniqueDumpPath(strprintf("%s/loom-flight-%s-%d-rank%d", dir.c_str(), host_.c_str(),
                                       static_cast<int>(::getpid()), rank));
  if (!config.tracePath.empty()) trace_ = TraceWriter::open(config.tracePath, rank, host_, log_);
  if (!config.dumpOnSignal.empty()) {
    const int signo = parseSignal(config.dumpOnSignal);
    std::string error;
    if (signo == 0)
      LOOM_WARN(log_, kSubsysEnv, "ignoring LOOM_DUMP_ON_SIGNAL=%s: not a signal name (SIGUSR1, USR2, ...) or number",
                config.dumpOnSignal.c_str());
    else if ((signalToken_ = addSignalDump(signo, [this](int s) { dump(strprintf("signal %d", s)); }, &error)) < 0)
      LOOM_WARN(log_, kSubsysEnv, "LOOM_DUMP_ON_SIGNAL=%s on rank %d: %s", config.dumpOnSignal.c_str(), rank,
                error.c_str());
  }
}

Diagnostics::~Diagnostics() {
  if (signalToken_ >= 0) removeSignalDump(signalToken_);
  trace_.reset();  // flushes
}

Status Diagnostics::agreeOnCheck(bootstrap::Bootstrap& bootstrap, const WaitContext& wait) {
  std::vector<int32_t> flags(static_cast<size_t>(nranks_), 0);
  flags[static_cast<size_t>(rank_)] = check_ ? 1 : 0;
  LOOM_TRY(bootstrap.allGather(flags.data(), sizeof(int32_t), wait).withContext("agreeing on LOOM_CHECK: "));
  const bool agreed = flags[0] != 0;
  if (agreed != check_)
    LOOM_WARN(log_, kSubsysEnv, "LOOM_CHECK=%d on rank %d but %d on rank 0: using rank 0's", check_ ? 1 : 0, rank_,
              agreed ? 1 : 0);
  check_ = agreed;
  return Status::ok();
}

OpTicket Diagnostics::enqueued(const OpDescriptor& op, std::string_view peers) {
  return recorder_.enqueued(op, peers, nowIfRecording());
}

void Diagnostics::started(const OpTicket& ticket, int64_t now) {
  recorder_.started(ticket.id, now);
  if (!trace_) return;
  startNs_ = now;
  checkStartNs_ = checkEndNs_ = moveStartNs_ = 0;
  algorithm_.clear();
}

void Diagnostics::chose(const OpTicket& ticket, const char* algorithm, const char* protocol) {
  recorder_.chose(ticket.id, algorithm, protocol);
  if (trace_) algorithm_ = protocol && *protocol ? std::string(algorithm) + "/" + protocol : algorithm;
}

Status Diagnostics::checkAndMarkDataMovement(const OpTicket& ticket, algo::Links& links, const WaitContext& wait) {
  Status status;
  if (check_ && nranks_ > 1 && ticket.op.collective()) {
    recorder_.setPhase(OpPhase::kDesyncCheck);
    if (trace_) checkStartNs_ = monotonicNanos();
    status = crossCheckCollective(ticket.op, static_cast<uint64_t>(ticket.seq), links, rank_, nranks_, wait);
    if (trace_) checkEndNs_ = monotonicNanos();
  }
  if (status.isOk()) recorder_.setPhase(OpPhase::kDataMovement);
  if (trace_) moveStartNs_ = monotonicNanos();
  return status;
}

void Diagnostics::finished(const OpTicket& ticket, const Status& status, int64_t now) {
  // Dumped before the entry is marked failed, so the dump shows the
  // operation as it was when it gave up ("stuck in ...").
  if (status.code() == Code::kTimeout && !timeoutDumped_.exchange(true))
    dump("timeout in " + describeOp(ticket.op, ticket.seq) + ": " + status.message());
  recorder_.finished(ticket.id, status, now);
  if (trace_) traceOp(ticket, status, now);
}

void Diagnostics::traceOp(const OpTicket& t, const Status& status, int64_t endNs) {
  const std::string name = describeOp(t.op);
  std::string args = strprintf("\"op\":%llu,\"seq\":%lld,\"algorithm\":\"%s\",\"chunks\":%llu,\"status\":\"%s\"",
                               static_cast<unsigned long long>(t.id), static_cast<long long>(t.seq),
                               jsonEscape(algorithm_).c_str(),
                               static_cast<unsigned long long>(recorder_.progressCounter()->load()),
                               status.isOk() ? "ok" : codeName(status.code()));
  if (!status.isOk()) args += ",\"error\":\"" + jsonEscape(status.message()) + "\"";
  if (t.enqueueNs) trace_->complete("queued " + name, "queue", 1, t.enqueueNs, startNs_, "");
  trace_->complete(name, "op", 0, startNs_, endNs, args);
  if (checkStartNs_) trace_->complete("desync check", "phase", 0, checkStartNs_, checkEndNs_, "");
  if (moveStartNs_) trace_->complete("data movement", "phase", 0, moveStartNs_, endNs, "");
  trace_->maybeFlush();
}

void Diagnostics::onAbort() {
  if (!abortDumped_.exchange(true)) dump("loomCommAbort");
}

void Diagnostics::dump(const std::string& reason) {
  std::lock_guard<std::mutex> lock(dumpMu_);
  const int64_t now = this->now();
  const std::string header = strprintf(
      "Loom flight recorder (%s): rank %d of %d, host %s, pid %d, %llu operations, last %zu kept (oldest first), "
      "times in s since the communicator was created (%.3f s ago), LOOM_CHECK=%d",
      reason.c_str(), rank_, nranks_, host_.c_str(), static_cast<int>(::getpid()),
      static_cast<unsigned long long>(recorder_.operations()), recorder_.capacity(),
      static_cast<double>(now - createdNs_) * 1e-9, check_ ? 1 : 0);
  const std::string text = formatFlightRecord(recorder_.snapshot(), header, createdNs_, now);
  LOOM_WARN(log_, kSubsysColl, "%s(also in %s)", text.c_str(), dumpPath_.c_str());
  if (std::FILE* f = std::fopen(dumpPath_.c_str(), "w")) {
    std::fputs(text.c_str(), f);
    std::fclose(f);
  } else {
    LOOM_WARN(log_, kSubsysColl, "flight recorder of rank %d: cannot write %s", rank_, dumpPath_.c_str());
  }
  if (trace_) trace_->flush();
}

}  // namespace loom
