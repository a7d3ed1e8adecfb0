// Ring reduce-scatter: rank r ends with block r of the reduction.
//
// sendbuf holds n blocks of `count` elements. Pieces of at most chunkBytes of
// every block travel together; per piece, rank r sends block r-1, then for
// k = 1..n-2 receives block r-k-1, adds its own and sends it on, and finally
// receives block r, adds its own and finalizes into recvbuf. r is the ring
// position (RingOrder); the block at position p is that of rank rankAt(p),
// so every rank still ends with the block of its own rank. A recvbuf of
// kStreamingOutputBytes or more is written non-temporally (Steps::
// streamReducedOutputs): nothing reads it back.
#include <algorithm>

#include "algorithms/primitives.h"
#include "algorithms/ring.h"
#include "algorithms/patterns/ring_order.h"
#include "common/ring_schedule.h"
#include "kernels/stream_copy.h"

namespace loom::algo {

Status ringReduceScatter(const CollArgs& args, const AlgoContext& ctx) {
  if (ctx.nranks == 1) return reduceOnOneRank(args);
  const RingView ring(args, ctx);
  const RingOrder order(ctx.rank, ctx.nranks, ctx.hosts);
  const int n = ring.n, r = order.position(), next = order.next(), prev = order.prev();
  const size_t es = ring.elemSize, chunkElems = ring.chunkElems;
  const std::byte* in = ring.in;
  std::byte* out = ring.out;
  Steps steps(ctx, {args.dtype, args.op, n});
  steps.streamReducedOutputs(args.count * es >= kernels::kStreamingOutputBytes);
  auto blockPiece = [&](int position, size_t base) {
    const int j = order.rankAt(position);
    return in + (static_cast<size_t>(j) * args.count + base) * es;
  };
  for (size_t base = 0; base < args.count; base += chunkElems) {
    const size_t len = std::min(chunkElems, args.count - base);
    LOOM_TRY(steps.send(next, blockPiece(ring::reduceScatterBlock(r, 0, n), base), len));
    for (int k = 1; k <= n - 2; ++k)
      LOOM_TRY(steps.recvReduceSend(prev, next, blockPiece(ring::reduceScatterBlock(r, k, n), base), len));
    LOOM_TRY(steps.recvReduceFinal(prev, blockPiece(ring::reduceScatterBlock(r, n - 1, n), base), out + base * es,
                                   len));
  }
  return Status::ok();
}

}  // namespace loom::algo
