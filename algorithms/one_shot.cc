// One-shot all-reduce, chunked by ctx.chunkBytes. For each chunk index c,
// every rank
//   1. sends its chunk c to every peer (peers r+1, r+2, ... to spread load),
//   2. folds the n chunks c in rank order into recvbuf: its own input, and the
//      one received from each peer (RankOrderFold).
// Deadlock freedom with 2 slots per link: every chunk sent in iteration c is
// consumed by its receiver in iteration c. Take a rank blocked at the
// earliest point (iteration, phase) of all blocked ranks. A receive in phase 2
// cannot be blocked: every sender is at that point or later, so it has done
// phase 1. A send in phase 1 cannot be blocked: the receiver has finished
// iteration c-1, releasing all earlier chunks, so the link holds nothing.
#include "algorithms/one_shot.h"

#include <algorithm>

#include "algorithms/primitives.h"
#include "algorithms/rank_order_fold.h"

namespace loom::algo {

Status oneShotAllReduce(const CollArgs& args, const AlgoContext& ctx) {
  if (ctx.nranks == 1) return reduceOnOneRank(args);
  const int n = ctx.nranks, r = ctx.rank;
  const size_t es = dataTypeSize(args.dtype);
  size_t chunkElems = 0;
  LOOM_TRY(chunkElemsFor(args, ctx, "one-shot all-reduce", &chunkElems));
  const auto* in = static_cast<const std::byte*>(args.sendbuf);
  auto* out = static_cast<std::byte*>(args.recvbuf);
  const Reduction red{args.dtype, args.op, n};
  Steps steps(ctx, red);
  RankOrderFold fold(ctx, red);
  for (size_t at = 0; at < args.count; at += chunkElems) {
    const size_t len = std::min(chunkElems, args.count - at);
    for (int k = 1; k < n; ++k) LOOM_TRY(steps.send((r + k) % n, in + at * es, len));
    LOOM_TRY(fold.fold(in + at * es, out + at * es, len));
  }
  return Status::ok();
}

bool oneShotApplies(const CollArgs& args, const AlgoContext& ctx) {
  return ctx.singleHost && args.count * dataTypeSize(args.dtype) <= kOneShotMaxBytes;
}

}  // namespace loom::algo
