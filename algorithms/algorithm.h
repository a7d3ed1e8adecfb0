// What an algorithm sees: the arguments of one collective, the links to its
// peers (transport connections, by rank), and how to wait. Algorithms know
// nothing of communicators, bootstrap or concrete transports.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "algorithms/cost.h"
#include "common/status.h"
#include "common/types.h"
#include "common/wait.h"
#include "transports/transport.h"

namespace loom::algo {

struct HostLayout;  // algorithms/patterns/host_layout.h

enum class CollType { kAllReduce = 0, kBroadcast, kReduce, kReduceScatter, kAllGather };
constexpr int kNumCollTypes = 5;
const char* collTypeName(CollType type);

// One collective call with NCCL's meaning of every field:
//   count is the element count of allreduce/broadcast/reduce, the per-rank
//   receive count of reduce-scatter and the per-rank send count of all-gather.
struct CollArgs {
  CollType type = CollType::kAllReduce;
  const void* sendbuf = nullptr;
  void* recvbuf = nullptr;
  size_t count = 0;
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int root = 0;
};

// The connections an algorithm may use, by peer rank. Owned by the
// communicator; valid for the duration of the call.
class Links {
 public:
  virtual ~Links() = default;
  virtual transport::SendConnection& sendTo(int peer) = 0;
  virtual transport::RecvConnection& recvFrom(int peer) = 0;
};

struct AlgoContext {
  int rank = 0;
  int nranks = 1;
  Links* links = nullptr;
  WaitContext wait;
  size_t chunkBytes = 256 * 1024;  // largest piece moved per step; <= every connection's chunkBytes()
  transport::Protocol proto = transport::Protocol::kSimple;  // of every connection in `links`
  // The exchange among all ranks for tiny messages (transport.h), or null;
  // set for the LL protocol only, and on every rank or on none.
  transport::Bulletin* bulletin = nullptr;
  // Plain shared memory with every other rank (transport.h), or null; set
  // on every rank or on none, whatever the protocol.
  transport::SharedWindows* windows = nullptr;
  // windows->readPeer/writePeer work between every pair of ranks (agreed
  // by all); set only with `windows`.
  bool peerCopies = false;
  // Every rank is a thread of one process: the peer copies are memcpy (set
  // only with peerCopies, on every rank alike).
  bool peerCopiesInProcess = false;
  bool singleHost = true;  // every rank on this host (shared-memory-only algorithms apply)
  // Which ranks share a host (the communicator's, immutable, outlives the
  // call); null: unknown, treated as one host (rank-order rings).
  const HostLayout* hosts = nullptr;
  // Chunks moved so far, bumped by the primitives for the flight recorder
  // (null: not counted). Only the running thread writes it.
  std::atomic<uint64_t>* progress = nullptr;
};

// Adds `chunks` to ctx.progress, if counted. A plain load and store: only
// the running thread writes it, and an atomic add's lock prefix would wait
// for every earlier store to drain, such as a copy into a peer's slot that
// is still taking its cache lines from the peer's core (measured: 95% of a
// 2-rank 1 KiB post's time sat on that add).
inline void countProgress(const AlgoContext& ctx, uint64_t chunks) {
  if (ctx.progress)
    ctx.progress->store(ctx.progress->load(std::memory_order_relaxed) + chunks, std::memory_order_relaxed);
}

using CollFn = Status (*)(const CollArgs& args, const AlgoContext& ctx);

// Bit p: transport::Protocol p.
using ProtocolSet = unsigned;
constexpr ProtocolSet protocolBit(transport::Protocol p) { return 1u << static_cast<unsigned>(p); }
constexpr ProtocolSet kEveryProtocol = (1u << transport::kNumProtocols) - 1;

// A run of an algorithm in two parts, for a caller that must never wait for
// its peers (a small stream call run on the caller's thread, OpRunner::runInline):
// `post` does the first part, which needs nothing from any peer (publishing
// this rank's input), and `finish` the rest; post then finish computes what
// `run` does. Between the two, `peersPosted` tells without waiting whether
// every peer has done its own post, so that `finish` waits only for peers
// that are inside this collective. `post` sets *posted to kNothing, having
// done nothing, when it cannot start without waiting (a link still full from
// the last collective): the caller then runs the whole algorithm later.
//
// kOnBulletin: the post went to ctx.bulletin, whose own peersPosted() then
// gives peersPosted's answer. A caller polling in a tight loop asks the
// bulletin directly: each poll is part of the hand-off's latency, and the
// split's answer costs two indirect calls and a size check more per poll.
enum class SplitPosted { kNothing, kOnLinks, kOnBulletin };

struct SplitRun {
  bool (*applies)(const CollArgs& args, const AlgoContext& ctx);
  Status (*post)(const CollArgs& args, const AlgoContext& ctx, SplitPosted* posted);
  bool (*peersPosted)(const CollArgs& args, const AlgoContext& ctx);
  CollFn finish;
};

// Everything Loom knows of one algorithm for one collective: the registry
// (registry.cc) holds one record per (algorithm, collective), and the tuner
// reads only these fields to list, filter, price and pick it.
struct AlgorithmInfo {
  const char* name;  // as LOOM_ALGO and the tuning table spell it
  CollType type;     // the collective `run` performs
  CollFn run;
  // Its cost shape for the tuner's model (cost.h); required.
  CostOf cost;
  // Whether the algorithm can run this call at all (null: always).
  bool (*applies)(const CollArgs& args, const AlgoContext& ctx) = nullptr;
  // The protocols it runs over.
  ProtocolSet protocols = kEveryProtocol;
  // Reduces every element in one fixed order, whatever the chunk size,
  // protocol or transport (bit-identical results run to run). The tuner
  // never picks such an algorithm on cost alone: only for
  // LOOM_DETERMINISTIC=1 or when LOOM_ALGO names it.
  bool deterministic = false;
  // The two-part run above, or null.
  const SplitRun* split = nullptr;
};

}  // namespace loom::algo
