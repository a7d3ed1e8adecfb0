// The cost model across hosts: where a communicator's ranks span two or more
// hosts, a step that crosses between hosts costs the network's alpha and its
// bytes the network's beta, which are much larger than shared memory's.
//
//   flat algorithms (ring, tree, hd, ...): their shapeOf() formulas, every
//     step and every byte priced at the network's alpha and beta (a
//     pipelined schedule runs at the pace of its slowest link, and each of
//     them has links that cross hosts); reductions at the host's gamma.
//   hier (algorithms/hierarchical.h), H hosts of L ranks, S bytes:
//     intra-host ring reduce-scatter and all-gather over L ranks, priced at
//     shared memory's parameters, plus a ring all-reduce of S/L bytes over
//     the H hosts priced at the network's: the network carries only
//     2(H-1)/H x S/L per rank in 2(H-1) steps per round.
//
// The network's parameters come from the tuning table under the pseudo
// algorithm name "network" (`* network simple * <alpha_us> <GBps>`), so a
// LOOM_TUNING_FILE can set them like any other entry.
#pragma once

#include "src/tuner/cost_model.h"

namespace loom::tuner {

// The tuning table's algorithm name for the links between hosts.
constexpr const char* kNetworkAlgoName = "network";

struct HostShape {
  int nHosts = 1;
  int ranksPerHost = 1;  // the most ranks on one host
};

// `shm` are the algorithm's own parameters (one host), `net` the network's.
double predictAcrossHosts(algo::CollType type, const char* algorithm, int nranks, const HostShape& hosts,
                          double bytes, double chunkBytes, const CostParams& shm, const CostParams& net);

}  // namespace loom::tuner
