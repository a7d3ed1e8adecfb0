// Tree algorithms (NCCL's): latency grows with log2(ranks), not ranks.
//
// Costs (n ranks, S bytes, C = S / chunkBytes pieces, d = floor(log2 n),
// the depth of every tree; see tree_topology.h):
//   all-reduce  double binary tree, each half of the buffer over one tree:
//               reduce up, finalize at the root, broadcast down, pipelined.
//               2d + C/2 steps; every rank sends and receives about S bytes
//               (an interior rank moves 3 pieces per piece of its half).
//   broadcast   one tree rooted at args.root, pipelined down: d + C steps.
//   reduce      one tree rooted at args.root, pipelined up: d + C steps; only
//               the root writes recvbuf.
// Every step moves one piece of at most chunkBytes through a FIFO; the
// schedules need FIFOs of at least 2 slots (see tree_allreduce.cc).
#pragma once

#include "algorithms/algorithm.h"

namespace loom::algo {

Status treeAllReduce(const CollArgs& args, const AlgoContext& ctx);
Status treeBroadcast(const CollArgs& args, const AlgoContext& ctx);
Status treeReduce(const CollArgs& args, const AlgoContext& ctx);

}  // namespace loom::algo
