#include "src/topology/topology_log.h"

#include <mutex>

#include "src/topology/topology.h"

namespace loom::topology {

void logTopologyOnce(const Logger& log) {
  if (!log.enabled(LogLevel::kInfo, kSubsysInit)) return;
  static std::once_flag once;
  std::call_once(once, [&] {
    Result<Topology> topo = detectTopology();
    if (!topo.isOk()) {
      LOOM_INFO(log, kSubsysInit, "topology unknown: %s", topo.status().message().c_str());
      return;
    }
    for (const std::string& line : describeTopology(topo.value())) LOOM_INFO(log, kSubsysInit, "%s", line.c_str());
  });
}

}  // namespace loom::topology
