// Ring all-gather: every rank's `count` elements end at block `rank` of every
// recvbuf. Per piece, rank r copies its own piece into block r (unless in
// place) and sends it; for m = 1..n-2 receives block r-m into recvbuf and
// forwards it; finally receives block r+1. r is the ring position
// (RingOrder); the block at position p is that of rank rankAt(p).
// A recvbuf of kStreamingOutputBytes or more is written non-temporally: the
// rank never reads its blocks back (its own piece is sent from sendbuf).
#include <algorithm>
#include <cstring>

#include "algorithms/primitives.h"
#include "algorithms/ring.h"
#include "algorithms/patterns/ring_order.h"
#include "common/ring_schedule.h"
#include "kernels/stream_copy.h"

namespace loom::algo {

Status ringAllGather(const CollArgs& args, const AlgoContext& ctx) {
  const RingView ring(args, ctx);
  const RingOrder order(ctx.rank, ctx.nranks, ctx.hosts);
  const int n = ring.n, r = order.position(), next = order.next(), prev = order.prev();
  const size_t es = ring.elemSize, chunkElems = ring.chunkElems;
  const std::byte* in = ring.in;
  std::byte* out = ring.out;
  auto block = [&](int position, size_t base) {
    const int j = order.rankAt(position);
    return out + (static_cast<size_t>(j) * args.count + base) * es;
  };
  const bool inPlace = in == block(r, 0);
  if (n == 1) {
    if (!inPlace && args.count) std::memmove(out, in, args.count * es);
    return Status::ok();
  }
  Steps steps(ctx, {args.dtype, args.op, n});
  const bool streaming = static_cast<size_t>(n) * args.count * es >= kernels::kStreamingOutputBytes;
  steps.streamOutputs(streaming);
  for (size_t base = 0; base < args.count; base += chunkElems) {
    const size_t len = std::min(chunkElems, args.count - base);
    if (inPlace) {
      LOOM_TRY(steps.send(next, block(r, base), len));
    } else if (streaming) {
      LOOM_TRY(steps.send(next, in + base * es, len));
      kernels::copyStreaming(block(r, base), in + base * es, len * es);
    } else {
      std::memcpy(block(r, base), in + base * es, len * es);
      LOOM_TRY(steps.send(next, block(r, base), len));  // from the copy: hot in cache
    }
    for (int m = 1; m <= n - 2; ++m)
      LOOM_TRY(steps.recvCopySend(prev, next, block(ring::allGatherBlock(r, m, n), base), len));
    LOOM_TRY(steps.recv(prev, block(ring::allGatherBlock(r, n - 1, n), base), len));
  }
  return Status::ok();
}

}  // namespace loom::algo
