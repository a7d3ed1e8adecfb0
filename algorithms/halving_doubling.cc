// Halving-doubling all-reduce with the usual fold for non-powers of two.
//
//   n = p + rem, p the largest power of two <= n.
//   fold:     among the first 2*rem ranks, each even rank sends its vector to
//             the odd rank above it and sits out; the odd rank adds it. The p
//             remaining ranks get virtual ranks 0..p-1.
//   halving:  the vector is split into p blocks (block b = virtual rank b's).
//             For mask = p/2 .. 1, virtual rank v and v^mask share the aligned
//             group of 2*mask blocks around v; each keeps the half holding its
//             own block, sends the other half and adds the partner's copy of
//             the kept half. Afterwards v holds the full sum of block v, and
//             finalizes it (avg), the only finalize of those elements.
//   doubling: for mask = 1 .. p/2, v and v^mask swap the aligned groups of
//             `mask` blocks they hold, so every rank ends with every block.
//   unfold:   each odd rank of the fold sends the result to its even rank.
//
// Every exchange is chunked: chunk i of the outgoing half is sent, then chunk
// i of the incoming half received, for i = 0, 1, ... Partners run the same
// loop, so a send of chunk i waits at most for the partner to release chunk
// i-2 of ours, which it does in its iteration i-2 having only needed our
// chunk i-2 (already sent): no cycle, even with the minimum of 2 slots.
#include "algorithms/halving_doubling.h"

#include <algorithm>
#include <cstring>

#include "algorithms/primitives.h"
#include "kernels/reduce.h"

namespace loom::algo {
namespace {

struct Span {
  size_t offset;  // elements
  size_t count;
};

// Blocks of a p-way split of `count`: the first count % p blocks get one extra
// element, so blocks [lo, lo + k) are contiguous and every rank agrees.
struct BlockLayout {
  size_t count;
  int p;
  size_t start(int b) const {
    const size_t base = count / static_cast<size_t>(p), extra = count % static_cast<size_t>(p);
    return static_cast<size_t>(b) * base + std::min(static_cast<size_t>(b), extra);
  }
  Span blocks(int lo, int k) const { return {start(lo), start(lo + k) - start(lo)}; }
};

// Sends `give` of `buf` to `partner` and receives its `take`, chunk by chunk
// (see the header comment); `receive(offset, count)` consumes one chunk.
template <class Receive>
Status exchange(Steps& steps, int partner, const std::byte* buf, Span give, Span take, size_t chunkElems,
                Receive receive) {
  const size_t es = steps.elemSize();
  const size_t chunks = std::max(divUp(give.count, chunkElems), divUp(take.count, chunkElems));
  for (size_t i = 0; i < chunks; ++i) {
    const size_t at = i * chunkElems;
    if (at < give.count)
      LOOM_TRY(steps.send(partner, buf + (give.offset + at) * es, std::min(chunkElems, give.count - at)));
    if (at < take.count) LOOM_TRY(receive(take.offset + at, std::min(chunkElems, take.count - at)));
  }
  return Status::ok();
}

// The whole of `buf` to `peer`, or from it, in chunks.
Status sendAll(Steps& steps, int peer, const std::byte* buf, size_t count, size_t chunkElems) {
  for (size_t at = 0; at < count; at += chunkElems)
    LOOM_TRY(steps.send(peer, buf + at * steps.elemSize(), std::min(chunkElems, count - at)));
  return Status::ok();
}

}  // namespace

Status halvingDoublingAllReduce(const CollArgs& args, const AlgoContext& ctx) {
  if (ctx.nranks == 1) return reduceOnOneRank(args);
  const int n = ctx.nranks, r = ctx.rank;
  const size_t es = dataTypeSize(args.dtype);
  size_t chunkElems = 0;
  LOOM_TRY(chunkElemsFor(args, ctx, "hd all-reduce", &chunkElems));
  const auto* in = static_cast<const std::byte*>(args.sendbuf);
  auto* out = static_cast<std::byte*>(args.recvbuf);
  Steps steps(ctx, {args.dtype, args.op, n});

  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;

  // Fold: even ranks below 2*rem hand their vector up and wait for the result.
  if (r < 2 * rem && r % 2 == 0) {
    LOOM_TRY(sendAll(steps, r + 1, in, args.count, chunkElems));
    for (size_t at = 0; at < args.count; at += chunkElems)
      LOOM_TRY(steps.recv(r + 1, out + at * es, std::min(chunkElems, args.count - at)));
    return Status::ok();  // the result arrives finalized
  }
  if (in != out && args.count) std::memmove(out, in, args.count * es);
  if (r < 2 * rem) {
    for (size_t at = 0; at < args.count; at += chunkElems)  // lower rank's data first, as partners below do
      LOOM_TRY(steps.recvReduceInPlace(r - 1, out + at * es, std::min(chunkElems, args.count - at), true));
  }

  const int v = r < 2 * rem ? r / 2 : r - rem;
  auto realRank = [rem](int virt) { return virt < rem ? 2 * virt + 1 : virt + rem; };
  const BlockLayout layout{args.count, p};

  for (int mask = p / 2; mask >= 1; mask /= 2) {
    const int partner = realRank(v ^ mask);
    const int lo = v & ~(2 * mask - 1);
    const Span lower = layout.blocks(lo, mask), upper = layout.blocks(lo + mask, mask);
    const bool keepUpper = (v & mask) != 0;
    LOOM_TRY(exchange(steps, partner, out, keepUpper ? lower : upper, keepUpper ? upper : lower, chunkElems,
                      [&](size_t offset, size_t count) {
                        return steps.recvReduceInPlace(partner, out + offset * es, count, partner < r);
                      }));
  }
  const Span mine = layout.blocks(v, 1);
  kernels::finalize(args.dtype, args.op, n, out + mine.offset * es, out + mine.offset * es, mine.count);

  for (int mask = 1; mask < p; mask *= 2) {
    const int partner = realRank(v ^ mask);
    const Span held = layout.blocks(v & ~(mask - 1), mask);
    const Span theirs = layout.blocks((v ^ mask) & ~(mask - 1), mask);
    LOOM_TRY(exchange(steps, partner, out, held, theirs, chunkElems, [&](size_t offset, size_t count) {
      return steps.recv(partner, out + offset * es, count);
    }));
  }

  if (r < 2 * rem) LOOM_TRY(sendAll(steps, r - 1, out, args.count, chunkElems));
  return Status::ok();
}

}  // namespace loom::algo
