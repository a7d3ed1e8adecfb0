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
//
// With a bulletin (LL on shared memory, every rank on one backend) a message
// that fits goes in one round instead: each rank posts its whole input once,
// then folds every peer's posted input in rank order, read straight from the
// peer's bulletin. Same fold, same bits; no per-peer sends, slots or releases.
#include "algorithms/one_shot.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "algorithms/primitives.h"
#include "algorithms/rank_order_fold.h"

namespace loom::algo {

namespace {

bool fitsBulletin(const CollArgs& args, const AlgoContext& ctx) {
  const size_t bytes = args.count * dataTypeSize(args.dtype);
  return ctx.bulletin && args.count > 0 && bytes <= std::min(kOneShotBulletinMaxBytes, ctx.bulletin->capacity());
}

Status foldBulletin(const CollArgs& args, const AlgoContext& ctx) {
  // Two peer messages are live at once during the fold; on the stack, since
  // this path is all about per-call cost.
  alignas(64) std::byte scratch[2 * kOneShotBulletinMaxBytes];
  RankOrderFold fold(ctx, Reduction{args.dtype, args.op, ctx.nranks}, scratch);
  return fold.fold(args.sendbuf, args.recvbuf, args.count);
}

Status bulletinRound(const CollArgs& args, const AlgoContext& ctx) {
  LOOM_TRY(ctx.bulletin->post(args.sendbuf, args.count * dataTypeSize(args.dtype)));
  return foldBulletin(args, ctx);
}

// The split run (algorithm.h's SplitRun): the input in one piece, sent to
// every peer (or posted) before anything is received.
bool splitApplies(const CollArgs& args, const AlgoContext& ctx) {
  if (ctx.nranks < 2 || args.count == 0 || !oneShotApplies(args, ctx)) return false;
  return fitsBulletin(args, ctx) || args.count * dataTypeSize(args.dtype) <= ctx.chunkBytes;
}

Status splitPost(const CollArgs& args, const AlgoContext& ctx, SplitPosted* posted) {
  *posted = SplitPosted::kNothing;
  const size_t bytes = args.count * dataTypeSize(args.dtype);
  if (fitsBulletin(args, ctx)) {
    LOOM_TRY(ctx.bulletin->post(args.sendbuf, bytes));
    *posted = SplitPosted::kOnBulletin;
    return Status::ok();
  }
  // Every peer's slot first: a link the last collective left full would make
  // a send wait, so then nothing is sent (an acquired slot stays the same
  // slot for the later acquire).
  const int n = ctx.nranks, r = ctx.rank;
  std::byte* slots[kMaxInlineRanks];
  if (n > kMaxInlineRanks) return Status::ok();
  for (int k = 1; k < n; ++k)
    if (!ctx.links->sendTo((r + k) % n).tryAcquire(&slots[k])) return Status::ok();
  for (int k = 1; k < n; ++k) {
    std::memcpy(slots[k], args.sendbuf, bytes);
    ctx.links->sendTo((r + k) % n).commit(bytes);
  }
  countProgress(ctx, static_cast<uint64_t>(n - 1));
  *posted = SplitPosted::kOnLinks;
  return Status::ok();
}

bool splitPeersPosted(const CollArgs& args, const AlgoContext& ctx) {
  if (fitsBulletin(args, ctx)) return ctx.bulletin->peersPosted();
  const int n = ctx.nranks, r = ctx.rank;
  const std::byte* data = nullptr;
  size_t bytes = 0;
  for (int k = 1; k < n; ++k)
    if (!ctx.links->recvFrom((r + k) % n).tryAcquire(&data, &bytes)) return false;
  return true;
}

Status splitFinish(const CollArgs& args, const AlgoContext& ctx) {
  if (fitsBulletin(args, ctx)) return foldBulletin(args, ctx);
  RankOrderFold fold(ctx, Reduction{args.dtype, args.op, ctx.nranks});
  return fold.fold(args.sendbuf, args.recvbuf, args.count);
}

}  // namespace

const SplitRun kOneShotSplit = {
    .applies = splitApplies, .post = splitPost, .peersPosted = splitPeersPosted, .finish = splitFinish};

Status oneShotAllReduce(const CollArgs& args, const AlgoContext& ctx) {
  if (ctx.nranks == 1) return reduceOnOneRank(args);
  if (fitsBulletin(args, ctx)) return bulletinRound(args, ctx);
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
