// The flight recorder: the last N operations of one communicator (NCCL's and
// PyTorch's "flight recorder"), kept in a ring so that when something hangs
// or fails the dump shows which operation each rank is in and how far it got.
//
// Per entry: local operation number, collective sequence number (the one
// LOOM_CHECK compares), what was called, algorithm/protocol, peers, chunks
// moved, enqueue/start/end times and state. Cost per operation: a few relaxed
// atomic stores into a preallocated slot, no lock and no allocation (the
// per-call path of an 8-byte all-reduce is a few hundred instructions, so a
// mutex or a string per edge would show); only the rare texts (send/recv
// peers, an error) take a mutex. The per-chunk progress counter is one
// relaxed atomic store by the thread running the operation.
//
// Threading: enqueued() runs on the calling thread (one at a time per
// communicator, as loom.h requires of enqueuers), started()/chose()/
// finished() on whichever thread runs the operation (one at a time), and
// snapshot() on any thread (a dump). A slot's state word carries the
// operation number, so an update for an operation whose slot was already
// reused by a newer one (more than `capacity` operations queued) is dropped,
// and a dump never mixes two operations' fields (seqlock-style re-check).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "src/diagnostics/op_descriptor.h"
#include "common/clock.h"
#include "common/status.h"

namespace loom {

enum class OpState : uint8_t { kQueued, kRunning, kDone, kFailed };
const char* opStateName(OpState state);
// Where a running operation is: choosing its algorithm, in LOOM_CHECK's
// exchange, or moving data.
enum class OpPhase : uint8_t { kSetup, kDesyncCheck, kDataMovement };
const char* opPhaseName(OpPhase phase);


struct FlightEntry {
  uint64_t id = 0;   // operation number on this communicator (every kind)
  int64_t seq = -1;  // collective sequence number, -1 for send/recv
  OpDescriptor op;
  std::string algorithm;  // "ring/Simple"; empty until chosen
  std::string peers;      // "all 4 ranks" or the send/recv description
  OpState state = OpState::kQueued;
  OpPhase phase = OpPhase::kSetup;  // last phase reached
  uint64_t progress = 0;  // chunks moved so far
  int64_t enqueueNs = 0, startNs = 0, endNs = 0;  // monotonicNanos(); 0: not yet
  std::string error;      // first line of the failure, if any
};

// What identifies an operation between its enqueue and its run.
struct OpTicket {
  uint64_t id = 0;
  int64_t seq = -1;
  OpDescriptor op;
  int64_t enqueueNs = 0;  // monotonicNanos() when recorded or traced, else 0
};

class FlightRecorder {
 public:
  // capacity 0 keeps no entries (numbering still works). `defaultPeers`
  // ("all 4 ranks") is shown for entries enqueued without peers.
  explicit FlightRecorder(size_t capacity, std::string defaultPeers = {});
  ~FlightRecorder();

  // `nowNs`: monotonicNanos() of the enqueue (0 when nothing records time).
  // Empty `peers` means defaultPeers (no copy, no lock).
  OpTicket enqueued(const OpDescriptor& op, std::string_view peers, int64_t nowNs);
  void started(uint64_t id, int64_t nowNs);
  // enqueued() + started() + chose() in one record, for an operation that
  // runs at once on the enqueuing thread with its algorithm already known
  // (the blocking path, src/comm/op_runner.cc); its phase is data movement.
  OpTicket startedNow(const OpDescriptor& op, int64_t nowNs, const char* algorithm, const char* protocol);
  // `algorithm` and `protocol` must be static strings (names from tables):
  // only the pointers are kept.
  void chose(uint64_t id, const char* algorithm, const char* protocol);
  void finished(uint64_t id, const Status& status, int64_t nowNs);

  // The running operation's phase: one relaxed store, read by dumps.
  void setPhase(OpPhase phase) { phase_.store(static_cast<uint8_t>(phase), std::memory_order_relaxed); }
  // Bumped once per chunk by the running operation (AlgoContext::progress).
  std::atomic<uint64_t>* progressCounter() { return &progress_; }

  // Oldest first; the running entry carries the live progress count.
  std::vector<FlightEntry> snapshot() const;
  size_t capacity() const { return capacity_; }
  uint64_t operations() const { return nextId_.load(std::memory_order_relaxed); }

 private:
  struct Slot;
  Slot* slotOf(uint64_t id) const;
  // Numbers the operation and fills its slot, published in `state`.
  OpTicket record(const OpDescriptor& op, std::string_view peers, int64_t nowNs, OpState state,
                  const char* algorithm, const char* protocol);
  // Moves the slot of `id` to `state` unless it was reused; false then.
  bool advance(Slot& slot, uint64_t id, OpState state);

  const size_t capacity_;
  const size_t mask_;  // capacity_ - 1 when a power of two, else 0
  const std::string defaultPeers_;
  std::unique_ptr<Slot[]> slots_;  // slots_[id % capacity]
  // Written by the enqueuing thread, and below by the running one: on
  // separate cache lines, since with a stream those are two threads on two
  // cores, and a shared line moved between them on every operation.
  alignas(64) std::atomic<uint64_t> nextId_{0};
  std::atomic<int64_t> nextSeq_{0};
  alignas(64) std::atomic<uint64_t> runningId_{UINT64_MAX};
  std::atomic<uint64_t> progress_{0};
  std::atomic<uint8_t> phase_{0};
  // Guards the rare texts: peers_ and errors_ (one per slot, allocated lazily).
  mutable std::mutex textMu_;
  std::vector<std::string> peers_;
  std::vector<std::string> errors_;
};

// The dump: a header line, then one line per entry, then which operation the
// rank is in ("stuck in" when one is running). `originNs` is subtracted from
// every time.
std::string formatFlightRecord(const std::vector<FlightEntry>& entries, const std::string& header,
                               int64_t originNs, int64_t nowNs);

}  // namespace loom
