// The transport interface: the only thing algorithms know about moving bytes.
//
// A connection between two ranks is, in each direction, a FIFO of chunks
// (NCCL's "simple protocol" connector). The sender acquires a slot, writes up
// to chunkBytes() into it (an algorithm reduces straight into it), and
// commits; the receiver acquires the oldest committed chunk, reads it in place
// (reducing straight out of it) and releases it. Chunks arrive in commit
// order. At most slots() chunks are in flight per direction, which is what
// lets a ring pipeline without deadlock as long as each step of an algorithm
// sends at most one chunk more than it has received.
//
// Threading: one thread drives a connection at a time (the communicator's
// executor). acquire() blocks with the WaitContext's deadline and abort flag;
// commit() and release() never block. Acquiring again before the commit (or
// release) returns the same slot (or chunk): a caller may probe with
// tryAcquire() and have the algorithm acquire it later.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/log.h"
#include "common/status.h"
#include "common/wait.h"

namespace loom::bootstrap { class Bootstrap; }

namespace loom::transport {

// How bytes cross a connection (NCCL's protocols). Simple moves large chunks
// published with one counter store; LL ("low latency") writes each 4 bytes of
// payload together with a 4-byte flag in one 8-byte store, so a receiver polls
// the data itself and needs no separate flag line: lowest latency, half the
// bandwidth. Both offer the same acquire/commit/release interface below, so
// every algorithm runs over either.
enum class Protocol { kSimple = 0, kLL = 1 };
constexpr int kNumProtocols = 2;
inline const char* protocolName(Protocol p) { return p == Protocol::kLL ? "LL" : "Simple"; }

// What every rank publishes about itself during bootstrap.
struct PeerInfo {
  int rank = -1;
  int pid = 0;
  uint64_t hostHash = 0;  // equal hashes <=> same host (hostname + boot id)
  char hostName[64] = {};
};

class SendConnection {
 public:
  virtual ~SendConnection() = default;
  virtual size_t chunkBytes() const = 0;
  // Waits for a free slot and returns it (chunkBytes() writable bytes).
  virtual Status acquire(std::byte** slot, const WaitContext& wait) = 0;
  // acquire() that never waits: true and a slot if one is free right now.
  // Lets one thread drive several connections at once (fused send/recv).
  virtual bool tryAcquire(std::byte** slot) = 0;
  // Publishes the first `bytes` bytes of the slot acquired last.
  virtual void commit(size_t bytes) = 0;
};

class RecvConnection {
 public:
  virtual ~RecvConnection() = default;
  virtual size_t chunkBytes() const = 0;
  // Waits for the oldest unreleased chunk and returns it, read-only, in place.
  virtual Status acquire(const std::byte** data, size_t* bytes, const WaitContext& wait) = 0;
  // acquire() that never waits: true and the chunk if one has arrived. A
  // false return may also mean the chunk is malformed; acquire() reports it.
  virtual bool tryAcquire(const std::byte** data, size_t* bytes) = 0;
  // Gives the chunk returned by the last acquire() back to the sender.
  virtual void release() = 0;
};

// A one-round, all-ranks exchange of tiny messages, for the latency-bound
// end of the collectives (one-shot all-reduce): each rank posts one message
// per round into a bulletin of its own, and every other rank reads it
// straight from there. One store of a few lines per rank and round, where the
// per-peer FIFOs cost a send and a receive (with their slot bookkeeping) for
// every pair.
//
// Contract: rounds are numbered alike on every rank (each rank posts once per
// round, in the same order of calls). Within a round a rank posts first, then
// reads the message of every other rank. A bulletin keeps the last few
// rounds (at least two), so a post overwrites an older round's message; the
// full read is what makes that safe: a rank that posts round k+2 has read
// every peer's round k+1, which each peer posted only after reading round k.
// post() refuses to start a round while the previous one has not been read
// in full.
//
// Threading: one thread drives a bulletin at a time (the communicator's executor).
class Bulletin {
 public:
  virtual ~Bulletin() = default;
  // The largest message, in bytes: fixed at creation, and asked on every
  // small collective's path (so no virtual call).
  size_t capacity() const { return capacity_; }
  // Starts the next round by publishing `bytes` (<= capacity()) of `data`.
  virtual Status post(const void* data, size_t bytes) = 0;
  // Waits for `peer`'s message of the round this rank posted last and copies
  // it to `out`; an error if it is not `bytes` long.
  virtual Status read(int peer, void* out, size_t bytes, const WaitContext& wait) = 0;
  // Whether every peer has begun posting the round this rank posted last
  // (its message may still be arriving): never waits.
  virtual bool peersPosted() const = 0;
  // Publishes that this rank has started its collective number `seq` (1, 2,
  // ... in call order, counted alike on every rank) on the communicator.
  virtual void announceStart(uint64_t seq) = 0;
  // Whether every peer has announced `seq` or later.
  virtual bool peersStarted(uint64_t seq) const = 0;

 protected:
  explicit Bulletin(size_t capacity) : capacity_(capacity) {}

 private:
  size_t capacity_;
};

// Plain shared memory among every rank of the communicator, for algorithms
// that read their peers' data in place instead of passing it along links
// (windowed all-reduce: each rank reduces one slice straight out of every
// peer's copy). Each rank owns one window that it alone writes and every
// other rank reads; the ranks move through numbered phases together.
//
// Contract: within a phase a rank writes only its own window and reads only
// what its peers wrote in earlier phases. arrive() ends the phase: it
// publishes that this rank's writes are done and waits until every other rank
// has ended the same phase. So after it returns, every rank's writes of the
// phase are visible here, and every read of the phases before it is over.
// Bytes written in phase k may thus be read in phase k+1 and rewritten from
// phase k+2 on (the peers may read them while the next phase runs). Phases
// are counted alike on every rank (each rank arrives once per phase, in the
// same order of calls).
//
// Threading: one thread drives the windows at a time (the communicator's executor).
class SharedWindows {
 public:
  virtual ~SharedWindows() = default;
  // Each window's size in bytes.
  virtual size_t bytes() const = 0;
  virtual std::byte* own() = 0;
  // `rank`'s window, as mapped here (own() for this rank).
  virtual const std::byte* of(int rank) const = 0;
  // Ends the phase as above. `tag` says what the phase was (e.g. its byte
  // count): a peer that passed another tag is in another collective, and
  // the call fails naming both ranks rather than mixing the two.
  virtual Status arrive(uint64_t tag, const WaitContext& wait) = 0;
  // The tag of a rank that failed within the phase: it still ends the phase
  // (its peers need not wait out their timeout), and each peer's arrive()
  // then fails with kRemoteError naming it, unless waiting for the other
  // peers turned up a cause of more weight (a peer that died). The failing
  // rank's own arrive() checks no tags and returns only such a cause.
  static constexpr uint64_t kFailedTag = ~uint64_t{0};
  // Phases this rank has ended: the same on every rank between calls.
  virtual uint64_t phasesEnded() const = 0;

  // Copies straight between this rank's memory and a peer's private memory
  // (its user buffers, by the addresses it published in its window): one
  // copy where passing data through a window takes two. Only where
  // peerCopies() says so; it may differ between ranks, so the communicator
  // agrees on it before any algorithm relies on it. The same phase rules
  // apply: a rank touches a peer's buffer only between the phase ends that
  // the algorithm's contract names.
  virtual bool peerCopies() const { return false; }
  // Every peer is a thread of this process: the copies are plain memcpy,
  // without the system call and page pinning of a copy between processes
  // (the tuner prices the two differently).
  virtual bool peerCopiesInProcess() const { return false; }
  // `bytes` from `remote` (an address in `rank`'s address space) to `local`.
  virtual Status readPeer(int rank, void*, const void*, size_t) { return noPeerCopies(rank); }
  // `bytes` from `local` to `remote` in `rank`'s address space.
  virtual Status writePeer(int rank, const void*, void*, size_t) { return noPeerCopies(rank); }

 private:
  static Status noPeerCopies(int rank) {
    return makeError(Code::kInternalError, "shared windows: no direct copies with rank %d here", rank);
  }
};

// Everything a transport needs while connecting a communicator.
struct SetupContext {
  int rank = 0;
  int nranks = 1;
  const std::vector<PeerInfo>* peers = nullptr;  // indexed by rank
  std::string jobTag;                            // unique per communicator (names resources)
  const Config* config = nullptr;
  Logger log;
  bootstrap::Bootstrap* bootstrap = nullptr;  // for collective exchanges during connect()
  WaitContext wait;
  // Whether the transport policy gave this backend any pair of ranks of the
  // communicator (the same answer on every rank): if not, connect() may return
  // at once without its collective exchanges, on every rank alike.
  bool usedByAnyPair = true;
};

// One backend (shared memory, TCP, ...) serving one communicator.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // Connects this rank with each rank in `peers` (both directions). Collective:
  // every rank of the communicator calls it, with the peers this transport
  // serves for it (the relation is symmetric).
  virtual Status connect(const SetupContext& ctx, const std::vector<int>& peers) = 0;
  // Whether connect() also set up connections of protocol `proto`.
  virtual bool supports(Protocol proto) const { return proto == Protocol::kSimple; }
  virtual SendConnection& sendTo(int peer, Protocol proto) = 0;
  virtual RecvConnection& recvFrom(int peer, Protocol proto) = 0;
  // Liveness of the peers this backend serves, for every wait to observe
  // (WaitContext::health); null if it cannot tell. Valid after connect().
  virtual PeerHealth* health() { return nullptr; }
  // The bulletin exchange with every other rank of the communicator, or null
  // if this backend does not serve them all or has none. Valid after connect().
  virtual Bulletin* bulletin() { return nullptr; }
  // Shared windows with every other rank of the communicator, or null, as
  // for bulletin(). Valid after connect().
  virtual SharedWindows* windows() { return nullptr; }
};

// A backend in the compile-time registry (src/comm/transport_registry.cc).
struct TransportFactory {
  const char* name;
  // Whether this backend can physically reach `peer` from `self` (same host
  // for shm, a device for ib, ...). Preference, LOOM_TRANSPORT and the
  // LOOM_*_DISABLE switches are the policy's (src/comm/transport_policy.h).
  bool (*canConnect)(const PeerInfo& self, const PeerInfo& peer, const Config& config);
  std::unique_ptr<Transport> (*create)();
  // The Simple-protocol chunk this backend works best with under `config`
  // (null: LOOM_CHUNK_SIZE). The communicator uses the smallest preference of
  // the backends that serve any pair, so every rank agrees (src/comm/comm.cc).
  size_t (*preferredChunkBytes)(const Config& config) = nullptr;
};

}  // namespace loom::transport
