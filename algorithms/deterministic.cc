// The deterministic schedule, chunked by ctx.chunkBytes. Slices are walked in
// pieces: piece c of slice s is its elements [c*k, (c+1)*k), k = chunkBytes /
// element size, and exists when c*k < length(s). For c = 0, 1, ... every rank
//   1. sends piece c of input slice p to rank p, for each peer p;
//   2. folds piece c of its own slice r in rank order (RankOrderFold): into
//      recvbuf, or for reduce on a non-root rank straight into a send slot to
//      the root (no scratch buffer), committing it;
//   3. all-reduce: sends the folded piece to every peer;
//   4. all-reduce: receives piece c of slice q from every peer q into recvbuf;
//      reduce: the root receives piece c of slice q from every peer q.
// Every chunk a rank sends in iteration c (steps 1-3) is consumed by its
// receiver in the same iteration (steps 2 and 4), and over one link a
// receiver consumes in the order the sender sends (step-1 piece, then the
// step-2/3 piece).
//
// Why 2 slots never deadlock: suppose every unfinished rank were blocked, and
// take one, a, blocked at the earliest (iteration c, step) of them all.
//   - a receive (steps 2, 4) waits for a chunk its sender q sends in an
//     earlier step of iteration c; q is at a's point or later, so it has sent.
//   - a send or slot acquire (steps 1-3) to p: p is at iteration >= c, so it
//     has consumed everything a sent before iteration c; of iteration c, only
//     the step-1 piece can still be in the link. At most one of 2 slots is
//     taken, so the send does not wait.
// Contradiction; hence some rank always progresses.
#include "algorithms/deterministic.h"

#include <algorithm>

#include "algorithms/primitives.h"
#include "algorithms/rank_order_fold.h"

namespace loom::algo {
namespace {

enum class Finish { kAllGather, kGatherToRoot, kNothing };

// Where slice s lies in the input (offsets in elements).
struct Slices {
  size_t base, extra;  // slice s: base elements, plus one if s < extra
  size_t start(int s) const { return static_cast<size_t>(s) * base + std::min(static_cast<size_t>(s), extra); }
  size_t length(int s) const { return base + (static_cast<size_t>(s) < extra ? 1 : 0); }
};

struct Piece {
  bool exists;
  size_t offset;  // elements, from the start of the input buffer
  size_t count;
};

Status run(const CollArgs& args, const AlgoContext& ctx, const char* what, Slices slices, Finish finish,
           std::byte* ownSlice) {
  const int n = ctx.nranks, r = ctx.rank;
  const size_t es = dataTypeSize(args.dtype);
  size_t chunkElems = 0;
  LOOM_TRY(chunkElemsFor(args, ctx, what, &chunkElems));
  const auto* in = static_cast<const std::byte*>(args.sendbuf);
  auto* out = static_cast<std::byte*>(args.recvbuf);
  const Reduction red{args.dtype, args.op, n};
  Steps steps(ctx, red);
  RankOrderFold fold(ctx, red);
  auto piece = [&](int s, size_t c) {
    const size_t at = c * chunkElems, len = slices.length(s);
    if (at >= len) return Piece{false, 0, 0};
    return Piece{true, slices.start(s) + at, std::min(chunkElems, len - at)};
  };

  const size_t pieces = divUp(slices.length(0), chunkElems);  // slice 0 is the longest
  for (size_t c = 0; c < pieces; ++c) {
    for (int k = 1; k < n; ++k) {
      const int p = (r + k) % n;
      if (Piece x = piece(p, c); x.exists) LOOM_TRY(steps.send(p, in + x.offset * es, x.count));
    }

    const Piece own = piece(r, c);
    std::byte* folded = own.exists && ownSlice ? ownSlice + (own.offset - slices.start(r)) * es : nullptr;
    if (own.exists) {
      if (finish == Finish::kGatherToRoot && r != args.root) {
        auto& toRoot = ctx.links->sendTo(args.root);
        std::byte* slot = nullptr;
        LOOM_TRY(toRoot.acquire(&slot, ctx.wait));
        LOOM_TRY(fold.fold(in + own.offset * es, slot, own.count));
        toRoot.commit(own.count * es);
      } else {
        LOOM_TRY(fold.fold(in + own.offset * es, folded, own.count));
      }
    }

    if (finish == Finish::kAllGather && own.exists)
      for (int k = 1; k < n; ++k) LOOM_TRY(steps.send((r + k) % n, folded, own.count));
    if (finish == Finish::kAllGather || (finish == Finish::kGatherToRoot && r == args.root)) {
      for (int k = 1; k < n; ++k) {
        const int q = (r + n - k) % n;
        if (Piece x = piece(q, c); x.exists) LOOM_TRY(steps.recv(q, out + x.offset * es, x.count));
      }
    }
  }
  return Status::ok();
}

Slices splitEvenly(size_t count, int n) {
  return {count / static_cast<size_t>(n), count % static_cast<size_t>(n)};
}

}  // namespace

Status deterministicAllReduce(const CollArgs& args, const AlgoContext& ctx) {
  if (ctx.nranks == 1) return reduceOnOneRank(args);
  const Slices slices = splitEvenly(args.count, ctx.nranks);
  auto* own = static_cast<std::byte*>(args.recvbuf) + slices.start(ctx.rank) * dataTypeSize(args.dtype);
  return run(args, ctx, "deterministic all-reduce", slices, Finish::kAllGather, own);
}

Status deterministicReduce(const CollArgs& args, const AlgoContext& ctx) {
  LOOM_ENFORCE(args.root >= 0 && args.root < ctx.nranks, Code::kInvalidArgument,
               "deterministic reduce on rank %d: root %d is not a rank of %d", ctx.rank, args.root, ctx.nranks);
  if (ctx.nranks == 1) return reduceOnOneRank(args);
  const Slices slices = splitEvenly(args.count, ctx.nranks);
  // recvbuf is significant on the root only; other ranks fold into send slots.
  auto* own = ctx.rank == args.root
                  ? static_cast<std::byte*>(args.recvbuf) + slices.start(ctx.rank) * dataTypeSize(args.dtype)
                  : nullptr;
  return run(args, ctx, "deterministic reduce", slices, Finish::kGatherToRoot, own);
}

Status deterministicReduceScatter(const CollArgs& args, const AlgoContext& ctx) {
  if (ctx.nranks == 1) return reduceOnOneRank(args);
  return run(args, ctx, "deterministic reduce-scatter", Slices{args.count, 0}, Finish::kNothing,
             static_cast<std::byte*>(args.recvbuf));
}

}  // namespace loom::algo
