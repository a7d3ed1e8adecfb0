// Recursive doubling with the usual fold for non-powers of two:
//
//   n = p + rem, p the largest power of two <= n.
//   fold:    among the first 2*rem ranks, each even rank sends its vector to
//            the odd rank above it and sits out; the odd rank adds it.
//   doubling: the p remaining ranks (virtual ranks 0..p-1) exchange with the
//            partner whose virtual rank differs in bit k, k = 0..log2(p)-1,
//            and add what they receive.
//   unfold:  each odd rank of the fold sends the result back to its even rank.
//   finalize (avg) is applied by every rank to its own result at the end.
// Steps: log2(p) + 2 if rem > 0; each moves the whole vector in one chunk.
#include <cstring>

#include "algorithms/primitives.h"
#include "algorithms/recursive_doubling.h"
#include "kernels/reduce.h"

namespace loom::algo {

Status recursiveDoublingAllReduce(const CollArgs& args, const AlgoContext& ctx) {
  const int n = ctx.nranks, r = ctx.rank;
  const size_t es = dataTypeSize(args.dtype);
  const size_t bytes = args.count * es;
  LOOM_ENFORCE(bytes <= ctx.chunkBytes, Code::kInternalError,
               "recursive doubling needs the vector (%zu bytes) to fit one chunk (%zu bytes)", bytes, ctx.chunkBytes);
  auto* out = static_cast<std::byte*>(args.recvbuf);
  if (args.sendbuf != args.recvbuf && bytes) std::memmove(out, args.sendbuf, bytes);
  if (n == 1) return Status::ok();

  Steps steps(ctx, {args.dtype, args.op, n});
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int rem = n - p;

  // Fold: even ranks below 2*rem hand their vector up and wait for the result.
  if (r < 2 * rem && r % 2 == 0) {
    LOOM_TRY(steps.send(r + 1, out, args.count));
    LOOM_TRY(steps.recv(r + 1, out, args.count));
    return Status::ok();  // the result arrives finalized
  }
  if (r < 2 * rem) LOOM_TRY(steps.recvReduceInPlace(r - 1, out, args.count, true));

  const int virtualRank = r < 2 * rem ? r / 2 : r - rem;
  auto realRank = [rem](int v) { return v < rem ? 2 * v + 1 : v + rem; };
  for (int mask = 1; mask < p; mask <<= 1) {
    const int partner = realRank(virtualRank ^ mask);
    LOOM_TRY(steps.send(partner, out, args.count));
    LOOM_TRY(steps.recvReduceInPlace(partner, out, args.count, partner < r));
  }
  // In place, so only avg's division has anything to do (a tiny call's cost counts here).
  if (args.op == RedOp::kAvg) kernels::finalize(args.dtype, args.op, n, out, out, args.count);

  if (r < 2 * rem) LOOM_TRY(steps.send(r - 1, out, args.count));
  return Status::ok();
}

namespace {

// The split run (algorithm.h's SplitRun) at two ranks, where recursive
// doubling is one exchange: post sends the input to the partner, finish
// folds the partner's vector in as the full run does (lower rank's first).
bool splitApplies(const CollArgs& args, const AlgoContext& ctx) {
  return ctx.nranks == 2 && args.count > 0 && args.count * dataTypeSize(args.dtype) <= ctx.chunkBytes;
}

Status splitPost(const CollArgs& args, const AlgoContext& ctx, SplitPosted* posted) {
  const size_t bytes = args.count * dataTypeSize(args.dtype);
  transport::SendConnection& link = ctx.links->sendTo(1 - ctx.rank);
  std::byte* slot = nullptr;
  *posted = SplitPosted::kNothing;
  if (!link.tryAcquire(&slot)) return Status::ok();  // a slot still held by the last collective: nothing is sent
  std::memcpy(slot, args.sendbuf, bytes);
  link.commit(bytes);
  countProgress(ctx, 1);
  *posted = SplitPosted::kOnLinks;
  return Status::ok();
}

bool splitPeersPosted(const CollArgs&, const AlgoContext& ctx) {
  const std::byte* data = nullptr;
  size_t bytes = 0;
  return ctx.links->recvFrom(1 - ctx.rank).tryAcquire(&data, &bytes);
}

Status splitFinish(const CollArgs& args, const AlgoContext& ctx) {
  const int partner = 1 - ctx.rank;
  auto* out = static_cast<std::byte*>(args.recvbuf);
  if (args.sendbuf != args.recvbuf) std::memmove(out, args.sendbuf, args.count * dataTypeSize(args.dtype));
  Steps steps(ctx, {args.dtype, args.op, 2});
  LOOM_TRY(steps.recvReduceInPlace(partner, out, args.count, partner < ctx.rank));
  if (args.op == RedOp::kAvg) kernels::finalize(args.dtype, args.op, 2, out, out, args.count);
  return Status::ok();
}

}  // namespace

const SplitRun kRecursiveDoublingSplit = {
    .applies = splitApplies, .post = splitPost, .peersPosted = splitPeersPosted, .finish = splitFinish};

}  // namespace loom::algo
