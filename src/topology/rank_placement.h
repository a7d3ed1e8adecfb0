// Where a rank that no launcher bound should start: a core of its own.
//
// Ranks started unbound run wherever the kernel last woke them, and ranks
// coming out of the same bootstrap exchange are often woken onto one core.
// Two ranks that hand data back and forth on one core pay a context switch
// per hand-off until the scheduler's balancing moves one of them away.
// Pure arithmetic on a Topology, so tests can plan for any machine.
#pragma once

#include <vector>

#include "src/topology/topology.h"

namespace loom::topology {

// The CPUs that local rank `localIndex` of `localRanks` should start on: the
// core that loomrun --bind core would give it, counting only the cores with a
// CPU in `allowed` (the rank's affinity mask), and only those of its CPUs.
// Empty when fewer such cores than ranks exist (the ranks must share cores
// anyway) or when the arguments are out of range.
std::vector<int> startingCpus(const Topology& topo, const std::vector<int>& allowed, int localIndex, int localRanks);

}  // namespace loom::topology
