#include "src/topology/rank_placement.h"

#include <algorithm>

#include "src/topology/binding_plan.h"

namespace loom::topology {

std::vector<int> startingCpus(const Topology& topo, const std::vector<int>& allowed, int localIndex, int localRanks) {
  if (localRanks <= 0 || localIndex < 0 || localIndex >= localRanks) return {};
  std::vector<int> sortedAllowed = allowed;
  std::sort(sortedAllowed.begin(), sortedAllowed.end());
  Topology usable = topo;
  usable.cores.clear();
  for (const Core& core : topo.cores) {
    Core kept = core;
    kept.cpus.clear();
    for (int cpu : core.cpus)
      if (std::binary_search(sortedAllowed.begin(), sortedAllowed.end(), cpu)) kept.cpus.push_back(cpu);
    if (!kept.cpus.empty()) usable.cores.push_back(std::move(kept));
  }
  if (static_cast<long>(usable.cores.size()) < localRanks) return {};
  return planBinding(usable, BindMode::kCore, localRanks)[static_cast<size_t>(localIndex)].cpus;
}

}  // namespace loom::topology
