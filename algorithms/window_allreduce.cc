#include "algorithms/window_allreduce.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms/patterns/slices.h"
#include "algorithms/primitives.h"
#include "algorithms/rank_order_fold.h"

namespace loom::algo {
Status windowAllReduce(const CollArgs& args, const AlgoContext& ctx) {
  if (ctx.nranks == 1) return reduceOnOneRank(args);
  LOOM_ENFORCE(ctx.windows != nullptr, Code::kInternalError,
               "windowed all-reduce on rank %d without shared windows", ctx.rank);
  transport::SharedWindows& windows = *ctx.windows;
  const int n = ctx.nranks, r = ctx.rank;
  const size_t es = dataTypeSize(args.dtype);
  // Rounds alternate the halves of each window: a rank starts copying its
  // next round's input while peers may still read its last round's slice.
  // Every round ends two phases, so the phase count says whose turn it is.
  const size_t half = windows.bytes() / 2 / 64 * 64;
  const size_t roundElems = half / es;
  LOOM_ENFORCE(roundElems >= 1, Code::kInternalError, "windowed all-reduce on rank %d: windows of %zu bytes", r,
               windows.bytes());
  const Reduction red{args.dtype, args.op, n};
  const auto* in = static_cast<const std::byte*>(args.sendbuf);
  auto* out = static_cast<std::byte*>(args.recvbuf);
  // The fold's inputs, one per rank: on the stack for the usual rank counts
  // (this runs per call down to a few KiB), on the heap beyond.
  constexpr int kStackRanks = 64;
  const std::byte* stackPieces[kStackRanks];
  std::vector<const std::byte*> heapPieces(n > kStackRanks ? static_cast<size_t>(n) : 0);
  const std::byte** pieces = n > kStackRanks ? heapPieces.data() : stackPieces;
  for (size_t at = 0; at < args.count; at += roundElems) {
    const size_t len = std::min(roundElems, args.count - at);
    const size_t offset = windows.phasesEnded() / 2 % 2 * half;
    std::byte* mine = windows.own() + offset;
    const std::byte* src = in + at * es;
    std::byte* dst = out + at * es;
    const size_t myBegin = sliceBegin(len, r, n, es), myEnd = sliceBegin(len, r + 1, n, es);
    // 1. The input that peers fold; this rank's own slice it reads in place.
    std::memcpy(mine, src, myBegin * es);
    std::memcpy(mine + myEnd * es, src + myEnd * es, (len - myEnd) * es);
    LOOM_TRY(windows.arrive(len * es, ctx.wait));
    // 2. This rank's slice of every input, folded where its input slice would be.
    if (myEnd > myBegin) {
      for (int q = 0; q < n; ++q) pieces[q] = (q == r ? src : windows.of(q) + offset) + myBegin * es;
      foldInRankOrder(red, pieces, mine + myBegin * es, myEnd - myBegin);
      // Written before the phase ends: the slice is still in this core's cache.
      std::memcpy(dst + myBegin * es, mine + myBegin * es, (myEnd - myBegin) * es);
    }
    LOOM_TRY(windows.arrive(len * es, ctx.wait));
    // 3. Every other rank's slice, from the next rank on (ranks read
    // different windows at any one time).
    for (int k = 1; k < n; ++k) {
      const int q = (r + k) % n;
      const size_t begin = sliceBegin(len, q, n, es), end = sliceBegin(len, q + 1, n, es);
      std::memcpy(dst + begin * es, windows.of(q) + offset + begin * es, (end - begin) * es);
    }
  }
  return Status::ok();
}

bool windowAllReduceApplies(const CollArgs&, const AlgoContext& ctx) { return ctx.windows != nullptr; }

}  // namespace loom::algo
