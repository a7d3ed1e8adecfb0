// Ring and chain algorithms for the five collectives.
//
// All are pipelined in pieces of at most AlgoContext::chunkBytes and written
// only against algo::Links. Costs (n ranks, S bytes, alpha per step, beta per
// byte; the tuner's exact formulas are in cost_formulas.cc):
//   all-reduce      2(n-1) steps, 2(n-1)/n * S bytes per rank
//   reduce-scatter  (n-1) steps,   (n-1)/n * S (S = n * recvcount bytes)
//   all-gather      (n-1) steps,   (n-1)/n * S (S = n * sendcount bytes)
//   broadcast/reduce  chain of n-1 hops, pipelined: (n-2 + S/chunk) steps, S bytes
#pragma once

#include "algorithms/algorithm.h"

namespace loom::algo {

Status ringAllReduce(const CollArgs& args, const AlgoContext& ctx);
Status ringReduceScatter(const CollArgs& args, const AlgoContext& ctx);
Status ringAllGather(const CollArgs& args, const AlgoContext& ctx);
Status chainBroadcast(const CollArgs& args, const AlgoContext& ctx);
Status chainReduce(const CollArgs& args, const AlgoContext& ctx);

}  // namespace loom::algo
