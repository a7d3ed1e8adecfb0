// The one reduction order that does not depend on the schedule: a left fold
// over ranks, acc = x_0; acc = acc (op) x_1; ...; acc = acc (op) x_{n-1};
// then finalize (avg). Used by the one-shot and deterministic algorithms,
// where one rank sees all n contributions of a piece at once, so the result
// is the same bits whatever the chunk size, protocol or transport.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/primitives.h"

namespace loom::algo {

// The same fold over pieces that are all at hand: dst <- finalize(((x[0]
// (op) x[1]) (op) x[2]) ... (op) x[n-1]), n = red.nranks, `count` (>= 1)
// elements each. dst may be x[0] or x[1] exactly, and must not overlap any
// later piece.
void foldInRankOrder(const Reduction& red, const std::byte* const* x, void* dst, size_t count);

class RankOrderFold {
 public:
  RankOrderFold(const AlgoContext& ctx, Reduction red) : ctx_(ctx), red_(red) {}
  // Peers' pieces come from ctx.bulletin's current round instead of the
  // links, each read into `scratch` (room for two pieces).
  RankOrderFold(const AlgoContext& ctx, Reduction red, std::byte* scratch)
      : ctx_(ctx), red_(red), bulletin_(ctx.bulletin), scratch_(scratch) {}

  // dst <- finalize(((x_0 (op) x_1) (op) x_2) ... (op) x_{n-1}) for `count`
  // (>= 1) elements, where x_rank is `own` and x_q (q != rank) is the next
  // chunk received from q, which must hold exactly `count` elements. The
  // kernels compute reduce(dst, a, b) = a (op) b, so the accumulator is
  // always the left operand. dst may be `own` (in place) or a send slot; `own`
  // is set aside first when writing dst would overwrite it before its turn.
  // Peers' chunks (or messages) are taken and released in rank order.
  Status fold(const void* own, void* dst, size_t count);

 private:
  // The next chunk from `peer`, checked to be `bytes` long; release it after use.
  Status take(int peer, size_t bytes, const std::byte** data);
  void release(int peer);

  const AlgoContext& ctx_;
  Reduction red_;
  transport::Bulletin* bulletin_ = nullptr;
  std::byte* scratch_ = nullptr;
  int takes_ = 0;  // which half of scratch_ the next read fills
  std::vector<std::byte> ownCopy_;  // own piece, set aside for the in-place case
};

}  // namespace loom::algo
