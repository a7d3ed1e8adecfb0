#include "comm/flight_recorder.h"

#include <algorithm>
#include <chrono>

#include "common/format.h"

namespace loom {

const char* opStateName(OpState state) {
  switch (state) {
    case OpState::kQueued: return "queued";
    case OpState::kRunning: return "running";
    case OpState::kDone: return "done";
    case OpState::kFailed: return "failed";
  }
  return "?";
}

const char* opPhaseName(OpPhase phase) {
  switch (phase) {
    case OpPhase::kSetup: return "setup";
    case OpPhase::kDesyncCheck: return "LOOM_CHECK exchange";
    case OpPhase::kDataMovement: return "data movement";
  }
  return "?";
}

int64_t monotonicNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

FlightRecorder::FlightRecorder(size_t capacity) : entries_(capacity) {}

FlightEntry* FlightRecorder::find(uint64_t id) {
  if (entries_.empty()) return nullptr;
  FlightEntry& e = entries_[id % entries_.size()];
  return e.id == id && e.enqueueNs != 0 ? &e : nullptr;
}

OpTicket FlightRecorder::enqueued(const OpDescriptor& op, std::string peers, int64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  OpTicket t;
  t.enqueueNs = now;
  t.id = nextId_++;
  t.seq = op.collective() ? nextSeq_++ : -1;
  t.op = op;
  if (!entries_.empty()) {
    FlightEntry& e = entries_[t.id % entries_.size()];
    e.id = t.id;
    e.seq = t.seq;
    e.op = op;
    e.algorithm.clear();
    e.peers = std::move(peers);
    e.state = OpState::kQueued;
    e.progress = 0;
    e.enqueueNs = now;
    e.startNs = e.endNs = 0;
    e.error.clear();
  }
  return t;
}

void FlightRecorder::started(uint64_t id) {
  progress_.store(0, std::memory_order_relaxed);
  phase_.store(0, std::memory_order_relaxed);
  if (entries_.empty()) return;
  const int64_t now = monotonicNanos();
  std::lock_guard<std::mutex> lock(mu_);
  runningId_ = id;
  if (FlightEntry* e = find(id)) {
    e->state = OpState::kRunning;
    e->startNs = now;
  }
}

void FlightRecorder::chose(uint64_t id, const char* algorithm, const char* protocol) {
  if (entries_.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (FlightEntry* e = find(id)) {
    e->algorithm = algorithm;
    if (protocol && *protocol) e->algorithm += std::string("/") + protocol;
  }
}

void FlightRecorder::finished(uint64_t id, const Status& status) {
  if (entries_.empty()) return;
  const int64_t now = monotonicNanos();
  std::lock_guard<std::mutex> lock(mu_);
  runningId_ = UINT64_MAX;
  if (FlightEntry* e = find(id)) {
    e->state = status.isOk() ? OpState::kDone : OpState::kFailed;
    e->endNs = now;
    if (e->startNs == 0) e->startNs = now;
    e->progress = progress_.load(std::memory_order_relaxed);
    e->phase = static_cast<OpPhase>(phase_.load(std::memory_order_relaxed));
    if (!status.isOk()) e->error = status.message().substr(0, status.message().find('\n'));
  }
}

uint64_t FlightRecorder::operations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return nextId_;
}

std::vector<FlightEntry> FlightRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<FlightEntry> out;
  if (entries_.empty()) return out;
  const uint64_t kept = std::min<uint64_t>(nextId_, entries_.size());
  out.reserve(kept);
  for (uint64_t id = nextId_ - kept; id < nextId_; ++id) {
    const FlightEntry& e = entries_[id % entries_.size()];
    if (e.id != id || e.enqueueNs == 0) continue;
    out.push_back(e);
    if (id == runningId_) {
      out.back().progress = progress_.load(std::memory_order_relaxed);
      out.back().phase = static_cast<OpPhase>(phase_.load(std::memory_order_relaxed));
    }
  }
  return out;
}

namespace {

std::string seconds(int64_t ns, int64_t originNs) {
  if (ns == 0) return "-";
  return strprintf("%.6f", static_cast<double>(ns - originNs) * 1e-9);
}

std::string entryLine(const FlightEntry& e, int64_t originNs, int64_t nowNs) {
  std::string s = strprintf("  op %llu %s: state=%s algo=%s peers=%s progress=%llu chunks enqueued=%s started=%s "
                            "ended=%s",
                            static_cast<unsigned long long>(e.id), describeOp(e.op, e.seq).c_str(),
                            opStateName(e.state), e.algorithm.empty() ? "-" : e.algorithm.c_str(), e.peers.c_str(),
                            static_cast<unsigned long long>(e.progress), seconds(e.enqueueNs, originNs).c_str(),
                            seconds(e.startNs, originNs).c_str(), seconds(e.endNs, originNs).c_str());
  if (e.state == OpState::kRunning)
    s += strprintf(" (running for %.3f s, in %s)", static_cast<double>(nowNs - e.startNs) * 1e-9, opPhaseName(e.phase));
  if (e.state == OpState::kQueued)
    s += strprintf(" (queued for %.3f s)", static_cast<double>(nowNs - e.enqueueNs) * 1e-9);
  if (!e.error.empty()) s += " error: " + e.error;
  return s;
}

}  // namespace

std::string formatFlightRecord(const std::vector<FlightEntry>& entries, const std::string& header, int64_t originNs,
                               int64_t nowNs) {
  std::string out = header + "\n";
  const FlightEntry* running = nullptr;
  const FlightEntry* failed = nullptr;
  for (const auto& e : entries) {
    out += entryLine(e, originNs, nowNs) + "\n";
    if (e.state == OpState::kRunning) running = &e;
    if (e.state == OpState::kFailed && !failed) failed = &e;
  }
  if (running)
    out += strprintf("  => stuck in op %llu: %s (%s, in %s, %llu chunks moved, running for %.3f s)\n",
                     static_cast<unsigned long long>(running->id), describeOp(running->op, running->seq).c_str(),
                     running->algorithm.empty() ? "algorithm not chosen yet" : running->algorithm.c_str(),
                     opPhaseName(running->phase),
                     static_cast<unsigned long long>(running->progress),
                     static_cast<double>(nowNs - running->startNs) * 1e-9);
  else if (failed)
    out += strprintf("  => first failure: op %llu: %s\n", static_cast<unsigned long long>(failed->id),
                     describeOp(failed->op, failed->seq).c_str());
  else if (!entries.empty())
    out += "  => idle: no operation running\n";
  else
    out += "  => no operations recorded\n";
  return out;
}

}  // namespace loom
