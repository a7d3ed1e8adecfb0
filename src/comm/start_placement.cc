#include "src/comm/start_placement.h"

#include <sched.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/format.h"
#include "src/topology/rank_placement.h"
#include "src/topology/topology.h"

namespace loom {

std::string startOnOwnCore(int localIndex, int localRanks) {
  // Only the process's first communicator of several local ranks: a later
  // one (a split, a subgroup) numbers its local ranks among fewer ranks, and
  // its plan would put ranks of different groups on the same cores.
  static std::atomic<bool> done{false};
  if (localRanks < 2 || done.exchange(true)) return "";
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return "";
  std::vector<int> allowed;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &mask)) allowed.push_back(cpu);
  if (static_cast<int>(allowed.size()) < localRanks) return "";
  Result<topology::Topology> topo = topology::detectCpuTopology();
  if (!topo.isOk()) return "";
  const std::vector<int> target = topology::startingCpus(topo.value(), allowed, localIndex, localRanks);
  if (target.empty()) return "";
  const int was = sched_getcpu();
  for (int cpu : target)
    if (cpu == was) return strprintf("started on CPU %d, on its own core", was);
  cpu_set_t own;
  CPU_ZERO(&own);
  for (int cpu : target) CPU_SET(cpu, &own);
  // The kernel moves a thread off a CPU its new mask excludes before the
  // call returns; restoring the mask then leaves it where it was moved.
  if (sched_setaffinity(0, sizeof(own), &own) != 0)
    return strprintf("stays on CPU %d: moving to CPUs %s failed (%s)", was, topology::formatCpuList(target).c_str(),
                     std::strerror(errno));
  const int moved = sched_getcpu();
  if (sched_setaffinity(0, sizeof(mask), &mask) != 0)
    return strprintf("moved from CPU %d to CPU %d, but restoring its %zu-CPU mask failed (%s): it stays bound to %s",
                     was, moved, allowed.size(), std::strerror(errno), topology::formatCpuList(target).c_str());
  return strprintf("moved from CPU %d to CPU %d, its own core, keeping its %zu-CPU mask", was, moved, allowed.size());
}

}  // namespace loom
