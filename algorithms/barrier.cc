#include "algorithms/barrier.h"

#include <vector>

#include "algorithms/p2p.h"
#include "common/format.h"

namespace loom::algo {

Status disseminationBarrier(const AlgoContext& ctx) {
  const int n = ctx.nranks;
  int round = 0;
  for (int distance = 1; distance < n; distance *= 2, ++round) {
    // Send and receive of a round are one fused operation: both directions
    // progress together, so no rank's send waits on its own receive.
    const std::vector<P2POp> ops = {P2POp::send((ctx.rank + distance) % n, nullptr, 0),
                                    P2POp::recv((ctx.rank - distance + n) % n, nullptr, 0)};
    LOOM_TRY(runP2P(ops, ctx).withContext(strprintf("barrier round %d (distance %d): ", round, distance)));
  }
  return Status::ok();
}

}  // namespace loom::algo
