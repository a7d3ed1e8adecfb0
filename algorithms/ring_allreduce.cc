// Ring all-reduce = ring reduce-scatter followed by ring all-gather, fused.
//
// The buffer is processed in rounds of n blocks (one per rank) of at most
// chunkBytes each. In a round, rank r (next = r+1, prev = r-1):
//   step 0          send block r-1
//   steps 1..n-2    block r-k-1: receive, add own, send      (recvReduceSend)
//   step n-1        block r:     receive, add own, finalize  (recvReduceFinalSend)
//                   into recvbuf and send it on
//   gather 1..n-2   block r-m:   receive into recvbuf, send  (recvCopySend)
//   gather n-1      block r+1:   receive into recvbuf
// Each step sends at most one chunk more than it received, so FIFOs of two or
// more slots keep every link busy without deadlock. r is the ring position
// (RingOrder: host-grouped when the hosts are known); every rank ends with
// every block, so which position owns which block does not show in results.
#include <algorithm>
#include <cstring>

#include "algorithms/primitives.h"
#include "algorithms/ring.h"
#include "algorithms/patterns/ring_order.h"
#include "common/ring_schedule.h"
#include "kernels/stream_copy.h"

namespace loom::algo {
Status ringAllReduce(const CollArgs& args, const AlgoContext& ctx) {
  if (ctx.nranks == 1) return reduceOnOneRank(args);
  const RingView ring(args, ctx);
  const RingOrder order(ctx.rank, ctx.nranks, ctx.hosts);
  const int n = ring.n, r = order.position(), next = order.next(), prev = order.prev();
  const size_t es = ring.elemSize, chunkElems = ring.chunkElems;
  const std::byte* in = ring.in;
  std::byte* out = ring.out;
  Steps steps(ctx, {args.dtype, args.op, n});
  // The all-gather half's copies into recvbuf are never read back here.
  steps.streamOutputs(args.count * es >= kernels::kStreamingOutputBytes);
  for (size_t base = 0; base < args.count; base += chunkElems * n) {
    const size_t blockElems = ring::sliceElems(args.count - base, n, 1, chunkElems);
    auto block = [&](int index) { return ring::slice(base, blockElems, args.count, index, n); };

    ring::Span b = block(ring::reduceScatterBlock(r, 0, n));
    LOOM_TRY(steps.send(next, in + b.offset * es, b.count));
    for (int k = 1; k <= n - 2; ++k) {
      b = block(ring::reduceScatterBlock(r, k, n));
      LOOM_TRY(steps.recvReduceSend(prev, next, in + b.offset * es, b.count));
    }
    b = block(ring::reduceScatterBlock(r, n - 1, n));  // block r: finished here, then gathered
    LOOM_TRY(steps.recvReduceFinalSend(prev, next, in + b.offset * es, out + b.offset * es, b.count));
    for (int m = 1; m <= n - 2; ++m) {
      b = block(ring::allGatherBlock(r, m, n));
      LOOM_TRY(steps.recvCopySend(prev, next, out + b.offset * es, b.count));
    }
    b = block(ring::allGatherBlock(r, n - 1, n));
    LOOM_TRY(steps.recv(prev, out + b.offset * es, b.count));
  }
  return Status::ok();
}

}  // namespace loom::algo
