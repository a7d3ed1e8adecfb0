#include "tools/loomrun/rank_binding.h"

#include <cstdio>
#include <cstdlib>
#include <strings.h>

#include "common/config.h"
#include "src/topology/binding_plan.h"
#include "src/topology/topology.h"

namespace loom::launcher {
namespace {

// LOOM_DEBUG at INFO or above asks for the binding too, as for the library's logs.
bool debugAsksForInfo() {
  const char* level = readKnob("LOOM_DEBUG");
  return level != nullptr && (strcasecmp(level, "INFO") == 0 || strcasecmp(level, "TRACE") == 0);
}

}  // namespace

Result<std::vector<std::vector<int>>> planRankCpus(const LaunchOptions& opts) {
  std::vector<std::vector<int>> cpus;
  if (opts.bind == topology::BindMode::kNone) return cpus;
  Result<topology::Topology> topo = topology::detectTopology();
  if (!topo.isOk()) return topo.status().withContext("--bind: ");
  std::vector<topology::RankBinding> plan = topology::planBinding(topo.value(), opts.bind, opts.localRanks);
  const bool verbose = opts.bindVerbose || debugAsksForInfo();
  for (size_t local = 0; local < plan.size(); ++local) {
    cpus.push_back(plan[local].cpus);
    if (!verbose) continue;
    std::fprintf(stderr, "loomrun: --bind %s: local rank %zu (rank %d) -> cpus %s (numa node %d)\n",
                 topology::bindModeName(opts.bind), local,
                 opts.nodeRank * opts.localRanks + static_cast<int>(local),
                 plan[local].cpus.empty() ? "unbound" : topology::formatCpuList(plan[local].cpus).c_str(),
                 plan[local].numaNode);
  }
  return cpus;
}

}  // namespace loom::launcher
