// Pipelined chains for broadcast and reduce.
//
// Broadcast: ranks ordered root, root+1, ..., root+n-1; the root streams
// pieces down the chain, every other rank stores each piece and forwards it.
// Reduce: ranks ordered root+1, ..., root+n-1, root; the first sends its
// pieces, each next one adds its own and forwards, the root finalizes into
// recvbuf. Pieces are at most chunkBytes, so the chain is a pipeline: latency
// (n-2) steps plus one step per piece. A broadcast or reduce of
// kStreamingOutputBytes or more writes recvbuf non-temporally (nobody reads
// it back).
#include <algorithm>
#include <cstring>

#include "algorithms/primitives.h"
#include "algorithms/ring.h"
#include "kernels/stream_copy.h"

namespace loom::algo {

Status chainBroadcast(const CollArgs& args, const AlgoContext& ctx) {
  const RingView ring(args, ctx);
  const int n = ring.n, r = ring.rank, next = ring.next, prev = ring.prev;
  const size_t es = ring.elemSize, chunkElems = ring.chunkElems;
  const std::byte* in = ring.in;
  std::byte* out = ring.out;
  const int position = (r - args.root + n) % n;
  if (n == 1) {
    if (in != out && args.count) std::memmove(out, in, args.count * es);
    return Status::ok();
  }
  Steps steps(ctx, {args.dtype, args.op, n});
  const bool streaming = args.count * es >= kernels::kStreamingOutputBytes;
  steps.streamOutputs(streaming);
  for (size_t base = 0; base < args.count; base += chunkElems) {
    const size_t len = std::min(chunkElems, args.count - base);
    std::byte* piece = out + base * es;
    if (position == 0) {
      // The root sends from sendbuf and copies each piece after sending it,
      // so the next rank starts before the copy.
      LOOM_TRY(steps.send(next, in + base * es, len));
      if (in != out && len) {
        if (streaming) kernels::copyStreaming(piece, in + base * es, len * es);
        else std::memmove(piece, in + base * es, len * es);
      }
    } else if (position == n - 1) {
      LOOM_TRY(steps.recv(prev, piece, len));
    } else {
      LOOM_TRY(steps.recvCopySend(prev, next, piece, len));
    }
  }
  return Status::ok();
}

Status chainReduce(const CollArgs& args, const AlgoContext& ctx) {
  if (ctx.nranks == 1) return reduceOnOneRank(args);
  const RingView ring(args, ctx);
  const int n = ring.n, r = ring.rank, next = ring.next, prev = ring.prev;
  const size_t es = ring.elemSize, chunkElems = ring.chunkElems;
  const std::byte* in = ring.in;
  std::byte* out = ring.out;
  const int position = (r - args.root - 1 + 2 * n) % n;  // 0 first .. n-1 root
  Steps steps(ctx, {args.dtype, args.op, n});
  steps.streamReducedOutputs(args.count * es >= kernels::kStreamingOutputBytes);
  for (size_t base = 0; base < args.count; base += chunkElems) {
    const size_t len = std::min(chunkElems, args.count - base);
    const std::byte* mine = in + base * es;
    if (position == 0) {
      LOOM_TRY(steps.send(next, mine, len));
    } else if (position == n - 1) {
      LOOM_TRY(steps.recvReduceFinal(prev, mine, out + base * es, len));
    } else {
      LOOM_TRY(steps.recvReduceSend(prev, next, mine, len));
    }
  }
  return Status::ok();
}

const char* collTypeName(CollType type) {
  switch (type) {
    case CollType::kAllReduce: return "AllReduce";
    case CollType::kBroadcast: return "Broadcast";
    case CollType::kReduce: return "Reduce";
    case CollType::kReduceScatter: return "ReduceScatter";
    case CollType::kAllGather: return "AllGather";
  }
  return "?";
}

}  // namespace loom::algo
