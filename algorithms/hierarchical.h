// Two-level ("hier") all-reduce for ranks spread over several hosts, where
// the links between hosts are much slower than shared memory within one.
//
// With H hosts of L ranks each (n = H x L), rank with local index j:
//   1. intra-host ring reduce-scatter: j ends with the host's sum of shard j
//      (shard = 1/L of the buffer);
//   2. inter-host ring all-reduce of shard j among the ranks with local index
//      j on every host (its "rail": L independent flows between hosts);
//   3. intra-host ring all-gather of the L shards.
// Per rank, only 2(H-1)/H x S/L bytes cross the network instead of the flat
// ring's 2(n-1)/n x S over its host-crossing links, and the network part
// takes 2(H-1) steps instead of 2(n-1). The count % L elements that do not
// fill a shard take an intra-host ring all-reduce, then the same inter-host
// all-reduce (small: fewer than L elements).
//
// Every op is reduced as in the flat ring; avg sums in all phases and divides
// by n once, when a shard's (or the remainder's) global sum is complete.
// Every element's final value is computed by one rank and copied to the
// others, so all ranks get the same bits.
//
// Applies only when the hosts are known (AlgoContext::hosts), there are at
// least two, and every host has the same number of ranks: with uneven hosts
// the shards of the hosts do not line up and some local indices have no
// partner on the smaller hosts (a leader-based scheme would be needed there;
// the flat, host-grouped ring serves those layouts).
#pragma once

#include "algorithms/algorithm.h"

namespace loom::algo {

Status hierarchicalAllReduce(const CollArgs& args, const AlgoContext& ctx);
bool hierarchicalApplies(const CollArgs& args, const AlgoContext& ctx);

}  // namespace loom::algo
