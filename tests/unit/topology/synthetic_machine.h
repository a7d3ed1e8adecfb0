// Synthetic machines for topology tests, built by hand.
#pragma once

#include "src/topology/topology.h"

namespace loom::topology {

// `nodes` NUMA nodes x `coresPerNode` cores x `threads` threads; CPU numbers
// are assigned node by node, core by core.
inline Topology machine(int nodes, int coresPerNode, int threads) {
  Topology t;
  t.packages = nodes;
  int cpu = 0;
  for (int n = 0; n < nodes; ++n) {
    NumaNode node{n, 1ull << 30, {}};
    for (int c = 0; c < coresPerNode; ++c) {
      Core core{n, n, {}};
      for (int h = 0; h < threads; ++h) core.cpus.push_back(cpu++);
      node.cpus.insert(node.cpus.end(), core.cpus.begin(), core.cpus.end());
      t.cores.push_back(core);
    }
    t.numaNodes.push_back(node);
  }
  return t;
}

}  // namespace loom::topology
