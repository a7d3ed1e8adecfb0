#include "algorithms/direct_allreduce.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/patterns/slices.h"
#include "algorithms/primitives.h"
#include "algorithms/rank_order_fold.h"

namespace loom::algo {
namespace {

// What a rank publishes at the start of its window's current half.
struct Buffers {
  uint64_t send = 0;
  uint64_t recv = 0;
};
constexpr size_t kHeaderBytes = 64;
// Bytes per fold step, at most: one piece per rank, in the core's L2 while
// they are folded and written out. At 2 and 4 ranks on 2 cores, 128-256 KiB
// chunks ran 256 KiB-16 MiB fastest; 16-64 KiB chunks took up to 1.4x as
// long (more system calls).
constexpr size_t kChunkBytes = 128 * 1024;
// Sets the phase tags apart from the windowed all-reduce's (its round's byte count).
constexpr uint64_t kTagBit = uint64_t{1} << 62;
// Ranks whose per-rank tables live on the stack (more: on the heap).
constexpr int kStackRanks = 64;

class SliceFold {
 public:
  SliceFold(const CollArgs& args, const AlgoContext& ctx, const Buffers* peers, std::byte* scratch, size_t chunkBytes)
      : args_(args), ctx_(ctx), windows_(*ctx.windows), peers_(peers), es_(dataTypeSize(args.dtype)),
        scratch_(scratch), chunkBytes_(chunkBytes), inPlace_(args.sendbuf == args.recvbuf),
        heapPieces_(ctx.nranks > kStackRanks ? static_cast<size_t>(ctx.nranks) : 0),
        pieces_(ctx.nranks > kStackRanks ? heapPieces_.data() : stackPieces_) {}

  // Folds elements [begin, end) of every rank's input into every rank's output.
  Status run(size_t begin, size_t end) {
    const size_t chunkElems = chunkBytes_ / es_;
    for (size_t at = begin; at < end; at += chunkElems) LOOM_TRY(foldChunk(at, std::min(chunkElems, end - at)));
    return Status::ok();
  }

 private:
  Status foldChunk(size_t at, size_t len) {
    const int n = ctx_.nranks, r = ctx_.rank;
    const size_t bytes = len * es_;
    auto* out = static_cast<std::byte*>(args_.recvbuf) + at * es_;
    const auto* own = static_cast<const std::byte*>(args_.sendbuf) + at * es_;
    // Each peer's piece lands in its scratch slot. In place, the fold's first
    // step overwrites this rank's input, which may then serve only as one of
    // that step's operands (x_0 or x_1); a later rank's is set aside first.
    for (int q = 0; q < n; ++q) {
      std::byte* slot = scratch_ + static_cast<size_t>(q) * chunkBytes_;
      if (q == r) {
        if (inPlace_ && r >= 2) std::memcpy(slot, own, bytes);
        pieces_[q] = inPlace_ && r >= 2 ? slot : own;
        continue;
      }
      LOOM_TRY(windows_.readPeer(q, slot, reinterpret_cast<const void*>(peers_[q].send + at * es_), bytes));
      pieces_[q] = slot;
    }
    foldInRankOrder({args_.dtype, args_.op, n}, pieces_, out, len);
    for (int k = 1; k < n; ++k) {
      const int q = (r + k) % n;
      LOOM_TRY(windows_.writePeer(q, out, reinterpret_cast<void*>(peers_[q].recv + at * es_), bytes));
    }
    return Status::ok();
  }

  const CollArgs& args_;
  const AlgoContext& ctx_;
  transport::SharedWindows& windows_;
  const Buffers* peers_;
  const size_t es_;
  std::byte* scratch_;  // one chunk per rank
  const size_t chunkBytes_;
  const bool inPlace_;
  const std::byte* stackPieces_[kStackRanks];
  std::vector<const std::byte*> heapPieces_;
  const std::byte** pieces_;
};

}  // namespace

Status directAllReduce(const CollArgs& args, const AlgoContext& ctx) {
  if (ctx.nranks == 1) return reduceOnOneRank(args);
  LOOM_ENFORCE(ctx.windows != nullptr && ctx.peerCopies, Code::kInternalError,
               "direct all-reduce on rank %d without shared windows and direct copies", ctx.rank);
  transport::SharedWindows& windows = *ctx.windows;
  const int n = ctx.nranks, r = ctx.rank;
  const size_t es = dataTypeSize(args.dtype);
  // The header and scratch take the window's half that the phase count
  // names, as the windowed all-reduce's rounds do (two phase ends each):
  // after one of its rounds, peers may still be copying out of the other.
  const size_t half = windows.bytes() / 2 / 64 * 64;
  const size_t chunkBytes =
      std::min(kChunkBytes, half > kHeaderBytes ? (half - kHeaderBytes) / static_cast<size_t>(n) / es * es : 0);
  LOOM_ENFORCE(chunkBytes >= es, Code::kInternalError, "direct all-reduce on rank %d: windows of %zu bytes", r,
               windows.bytes());
  std::byte* mine = windows.own() + windows.phasesEnded() / 2 % 2 * half;
  const Buffers own{reinterpret_cast<uintptr_t>(args.sendbuf), reinterpret_cast<uintptr_t>(args.recvbuf)};
  std::memcpy(mine, &own, sizeof own);
  const uint64_t tag = kTagBit | (args.count * es);
  LOOM_TRY(windows.arrive(tag, ctx.wait));

  // Every rank's buffers, from the header each wrote before the phase end.
  Buffers stackPeers[kStackRanks];
  std::vector<Buffers> heapPeers(n > kStackRanks ? static_cast<size_t>(n) : 0);
  Buffers* peers = n > kStackRanks ? heapPeers.data() : stackPeers;
  const size_t offset = static_cast<size_t>(mine - windows.own());
  for (int q = 0; q < n; ++q) std::memcpy(&peers[q], windows.of(q) + offset, sizeof(Buffers));

  const size_t begin = sliceBegin(args.count, r, n, es), end = sliceBegin(args.count, r + 1, n, es);
  SliceFold fold(args, ctx, peers, mine + kHeaderBytes, chunkBytes);
  Status folded = fold.run(begin, end);
  if (!folded.isOk()) {
    // The peers must not take an output that lacks this slice: they fail
    // too. A copy fails mostly because its peer died; waiting for the peers
    // then says so (the peer monitor names the rank), which the copy's own
    // error (ESRCH) does not.
    Status ended = windows.arrive(transport::SharedWindows::kFailedTag, ctx.wait);
    if (ended.code() == Code::kRemoteError) return ended;
    // Every peer ended the phase, a dead one too if it did so just before it
    // died: the peer monitor still names it once its next poll (a few ms
    // apart) sees the exit.
    if (Status dead = peerFailureWithin(ctx.wait, "the peers after a failed copy from a peer's buffer"); !dead.isOk()) return dead;
    return folded;
  }
  return windows.arrive(tag, ctx.wait);
}

bool directAllReduceApplies(const CollArgs&, const AlgoContext& ctx) {
  return ctx.windows != nullptr && ctx.peerCopies;
}

}  // namespace loom::algo
