// The cost model across hosts: where a communicator's ranks span two or more
// hosts, a step that crosses between hosts costs the network's alpha and its
// bytes the network's beta, which are much larger than shared memory's.
// Which steps and bytes cross is each algorithm's cost shape
// (algorithms/cost.h: CostLinks), e.g.
//
//   flat algorithms (ring, tree, hd, ...): one schedule over all ranks,
//     every step and every byte priced at the network's alpha and beta (a
//     pipelined schedule runs at the pace of its slowest link, and each of
//     them has links that cross hosts); reductions at the host's gamma.
//   hier (algorithms/hierarchical.h): its intra-host rings at shared
//     memory's parameters, its inter-host ring at the network's.
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
double predictAcrossHosts(const algo::AlgorithmInfo& algorithm, int nranks, const HostShape& hosts, double bytes,
                          double chunkBytes, const CostParams& shm, const CostParams& net);

}  // namespace loom::tuner
