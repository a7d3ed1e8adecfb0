#include "src/diagnostics/flight_recorder.h"

#include <algorithm>

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

// One operation's entry. Every field is an atomic written with relaxed stores
// by the enqueuing or the running thread; `stamp` = (id << 2) | OpState is
// written last (release) and re-read by snapshot() to reject torn entries.
// Cache-line aligned: the enqueuing thread fills the next slot while the
// worker advances the one before it.
struct alignas(64) FlightRecorder::Slot {
  static constexpr uint64_t kUnused = UINT64_MAX;
  std::atomic<uint64_t> stamp{kUnused};
  std::atomic<int64_t> seq{-1};
  std::atomic<uint64_t> count{0};
  std::atomic<uint64_t> shape{0};  // kind, dtype, op in bytes 0..2; root in the upper 32 bits
  std::atomic<const char*> algorithm{nullptr};
  std::atomic<const char*> protocol{nullptr};
  std::atomic<uint8_t> phase{0};
  std::atomic<bool> customPeers{false};
  std::atomic<bool> hasError{false};
  std::atomic<uint64_t> progress{0};
  std::atomic<int64_t> enqueueNs{0}, startNs{0}, endNs{0};
};

namespace {

constexpr uint64_t stampOf(uint64_t id, OpState state) { return (id << 2) | static_cast<uint64_t>(state); }
constexpr uint64_t idOf(uint64_t stamp) { return stamp >> 2; }
constexpr OpState stateOf(uint64_t stamp) { return static_cast<OpState>(stamp & 3); }

uint64_t packShape(const OpDescriptor& op) {
  return static_cast<uint64_t>(static_cast<uint8_t>(op.kind)) |
         static_cast<uint64_t>(static_cast<uint8_t>(op.dtype)) << 8 |
         static_cast<uint64_t>(static_cast<uint8_t>(op.op)) << 16 |
         static_cast<uint64_t>(static_cast<uint32_t>(op.root)) << 32;
}

OpDescriptor unpackShape(uint64_t shape, uint64_t count) {
  OpDescriptor op;
  op.kind = static_cast<OpKind>(shape & 0xff);
  op.dtype = static_cast<DataType>((shape >> 8) & 0xff);
  op.op = static_cast<RedOp>((shape >> 16) & 0xff);
  op.root = static_cast<int32_t>(static_cast<uint32_t>(shape >> 32));
  op.count = count;
  return op;
}

}  // namespace

FlightRecorder::FlightRecorder(size_t capacity, std::string defaultPeers)
    : capacity_(capacity),
      mask_(capacity && (capacity & (capacity - 1)) == 0 ? capacity - 1 : 0),
      defaultPeers_(std::move(defaultPeers)),
      slots_(capacity ? new Slot[capacity] : nullptr) {}

FlightRecorder::~FlightRecorder() = default;

FlightRecorder::Slot* FlightRecorder::slotOf(uint64_t id) const {
  if (mask_) return &slots_[id & mask_];  // the default 64 entries: no division per edge
  return capacity_ ? &slots_[id % capacity_] : nullptr;
}

OpTicket FlightRecorder::enqueued(const OpDescriptor& op, std::string_view peers, int64_t now) {
  return record(op, peers, now, OpState::kQueued, nullptr, nullptr);
}

OpTicket FlightRecorder::startedNow(const OpDescriptor& op, int64_t now, const char* algorithm, const char* protocol) {
  progress_.store(0, std::memory_order_relaxed);
  phase_.store(static_cast<uint8_t>(OpPhase::kDataMovement), std::memory_order_relaxed);
  OpTicket t = record(op, {}, now, OpState::kRunning, algorithm, protocol);
  runningId_.store(t.id, std::memory_order_relaxed);
  return t;
}

OpTicket FlightRecorder::record(const OpDescriptor& op, std::string_view peers, int64_t now, OpState state,
                                const char* algorithm, const char* protocol) {
  OpTicket t;
  t.enqueueNs = now;
  // One enqueuing thread at a time (loom.h), so no read-modify-write: a
  // locked add per counter was a tenth of an 8-byte call's own cost.
  t.id = nextId_.load(std::memory_order_relaxed);
  nextId_.store(t.id + 1, std::memory_order_relaxed);
  t.seq = -1;
  if (op.collective()) {
    t.seq = nextSeq_.load(std::memory_order_relaxed);
    nextSeq_.store(t.seq + 1, std::memory_order_relaxed);
  }
  t.op = op;
  Slot* s = slotOf(t.id);
  if (!s) return t;
  // Unpublish first, so that a concurrent snapshot skips the half-written slot.
  s->stamp.store(Slot::kUnused, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s->seq.store(t.seq, std::memory_order_relaxed);
  s->count.store(op.count, std::memory_order_relaxed);
  s->shape.store(packShape(op), std::memory_order_relaxed);
  s->algorithm.store(algorithm, std::memory_order_relaxed);
  s->protocol.store(protocol, std::memory_order_relaxed);
  s->phase.store(0, std::memory_order_relaxed);
  s->hasError.store(false, std::memory_order_relaxed);
  s->progress.store(0, std::memory_order_relaxed);
  s->enqueueNs.store(now, std::memory_order_relaxed);
  s->startNs.store(state == OpState::kQueued ? 0 : now, std::memory_order_relaxed);
  s->endNs.store(0, std::memory_order_relaxed);
  if (!peers.empty()) {  // send/recv only: collectives show defaultPeers_
    std::lock_guard<std::mutex> lock(textMu_);
    if (peers_.empty()) peers_.resize(capacity_);
    peers_[t.id % capacity_].assign(peers);
  }
  s->customPeers.store(!peers.empty(), std::memory_order_relaxed);
  s->stamp.store(stampOf(t.id, state), std::memory_order_release);
  return t;
}

bool FlightRecorder::advance(Slot& s, uint64_t id, OpState state) {
  const uint64_t current = s.stamp.load(std::memory_order_relaxed);
  if (current == Slot::kUnused || idOf(current) != id) return false;  // reused by a newer operation
  // A plain store, not a compare-and-swap: the slot is reused only by the
  // operation enqueued `capacity` later, so only with that many queued behind
  // this one (never for blocking calls) could a reuse slip in between the
  // check and the store, and then the dump misses one of the two entries.
  s.stamp.store(stampOf(id, state), std::memory_order_release);
  return true;
}

void FlightRecorder::started(uint64_t id, int64_t now) {
  progress_.store(0, std::memory_order_relaxed);
  phase_.store(0, std::memory_order_relaxed);
  runningId_.store(id, std::memory_order_relaxed);
  Slot* s = slotOf(id);
  if (!s) return;
  // Written before the state moves to running; snapshot() ignores startNs of
  // a queued entry, so a store that lands in a reused slot is harmless.
  s->startNs.store(now, std::memory_order_relaxed);
  advance(*s, id, OpState::kRunning);
}

void FlightRecorder::chose(uint64_t id, const char* algorithm, const char* protocol) {
  Slot* s = slotOf(id);
  if (!s || idOf(s->stamp.load(std::memory_order_relaxed)) != id) return;
  s->algorithm.store(algorithm, std::memory_order_relaxed);
  s->protocol.store(protocol, std::memory_order_relaxed);
}

void FlightRecorder::finished(uint64_t id, const Status& status, int64_t now) {
  runningId_.store(UINT64_MAX, std::memory_order_relaxed);
  Slot* s = slotOf(id);
  if (!s) return;
  const uint64_t current = s->stamp.load(std::memory_order_relaxed);
  if (current == Slot::kUnused || idOf(current) != id) return;
  if (stateOf(current) == OpState::kQueued) s->startNs.store(now, std::memory_order_relaxed);
  s->endNs.store(now, std::memory_order_relaxed);
  s->progress.store(progress_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  s->phase.store(phase_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  if (!status.isOk()) {
    std::lock_guard<std::mutex> lock(textMu_);
    if (errors_.empty()) errors_.resize(capacity_);
    errors_[id % capacity_] = status.message().substr(0, status.message().find('\n'));
    s->hasError.store(true, std::memory_order_relaxed);
  }
  advance(*s, id, status.isOk() ? OpState::kDone : OpState::kFailed);
}

std::vector<FlightEntry> FlightRecorder::snapshot() const {
  std::vector<FlightEntry> out;
  if (!capacity_) return out;
  std::lock_guard<std::mutex> lock(textMu_);  // the texts; writers of the atomics never wait for it
  const uint64_t next = nextId_.load(std::memory_order_acquire);
  const uint64_t kept = std::min<uint64_t>(next, capacity_);
  const uint64_t running = runningId_.load(std::memory_order_relaxed);
  out.reserve(kept);
  for (uint64_t id = next - kept; id < next; ++id) {
    const Slot& s = *slotOf(id);
    const uint64_t stamp = s.stamp.load(std::memory_order_acquire);
    if (stamp == Slot::kUnused || idOf(stamp) != id) continue;
    FlightEntry e;
    e.id = id;
    e.state = stateOf(stamp);
    e.seq = s.seq.load(std::memory_order_relaxed);
    e.op = unpackShape(s.shape.load(std::memory_order_relaxed), s.count.load(std::memory_order_relaxed));
    e.enqueueNs = s.enqueueNs.load(std::memory_order_relaxed);
    // Times and results of later phases count only once the state says so.
    if (e.state != OpState::kQueued) {
      e.startNs = s.startNs.load(std::memory_order_relaxed);
      const char* algorithm = s.algorithm.load(std::memory_order_relaxed);
      const char* protocol = s.protocol.load(std::memory_order_relaxed);
      if (algorithm) e.algorithm = protocol && *protocol ? std::string(algorithm) + "/" + protocol : algorithm;
    }
    if (e.state == OpState::kDone || e.state == OpState::kFailed) {
      e.endNs = s.endNs.load(std::memory_order_relaxed);
      e.progress = s.progress.load(std::memory_order_relaxed);
      e.phase = static_cast<OpPhase>(s.phase.load(std::memory_order_relaxed));
      if (s.hasError.load(std::memory_order_relaxed)) e.error = errors_[id % capacity_];
    }
    if (e.state == OpState::kRunning && id == running) {
      e.progress = progress_.load(std::memory_order_relaxed);
      e.phase = static_cast<OpPhase>(phase_.load(std::memory_order_relaxed));
    }
    e.peers = s.customPeers.load(std::memory_order_relaxed) ? peers_[id % capacity_] : defaultPeers_;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.stamp.load(std::memory_order_relaxed) == Slot::kUnused ||
        idOf(s.stamp.load(std::memory_order_relaxed)) != id)
      continue;  // reused while being read
    out.push_back(std::move(e));
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
