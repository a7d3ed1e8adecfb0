// Text forms of a Topology (the LOOM_DEBUG=INFO topology log) and small queries.
#include <algorithm>
#include <set>

#include "common/format.h"
#include "src/topology/topology.h"

namespace loom::topology {
namespace {

std::string formatBytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  double value = static_cast<double>(bytes);
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return value == static_cast<double>(static_cast<uint64_t>(value)) ? strprintf("%.0f %s", value, kUnits[unit])
                                                                    : strprintf("%.1f %s", value, kUnits[unit]);
}

std::string describeDevice(const Device& d) {
  std::string text = d.name;
  if (!d.busId.empty() && d.name.find(d.busId) == std::string::npos)
    text += strprintf(" (pci %s %04x:%04x)", d.busId.c_str(), d.vendorId, d.deviceId);
  else if (!d.busId.empty())
    text += strprintf(" (%04x:%04x)", d.vendorId, d.deviceId);
  text += d.numaNode >= 0 ? strprintf(" numa %d", d.numaNode) : std::string(" numa ?");
  if (!d.localCpus.empty()) text += " cpus " + formatCpuList(d.localCpus);
  return text;
}

std::string describeDevices(const char* what, const std::vector<Device>& list) {
  std::string line = strprintf("%s: %zu", what, list.size());
  for (size_t i = 0; i < list.size(); ++i) line += (i == 0 ? ": " : "; ") + describeDevice(list[i]);
  return line;
}

}  // namespace

int Topology::cpuCount() const {
  std::set<int> all;
  for (const Core& c : cores) all.insert(c.cpus.begin(), c.cpus.end());
  return static_cast<int>(all.size());
}

const NumaNode* Topology::numaNode(int osIndex) const {
  for (const NumaNode& n : numaNodes)
    if (n.osIndex == osIndex) return &n;
  return nullptr;
}

std::string formatCpuList(const std::vector<int>& cpus) {
  std::vector<int> sorted = cpus;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::string text;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!text.empty()) text += ",";
    text += j == i ? strprintf("%d", sorted[i]) : strprintf("%d-%d", sorted[i], sorted[j]);
    i = j + 1;
  }
  return text;
}

std::vector<std::string> describeTopology(const Topology& topo) {
  std::vector<std::string> lines;
  lines.push_back(strprintf("topology: %d package(s), %zu core(s), %d cpu(s), %zu NUMA node(s)", topo.packages,
                            topo.cores.size(), topo.cpuCount(), topo.numaNodes.size()));
  for (const NumaNode& n : topo.numaNodes)
    lines.push_back(strprintf("  numa %d: cpus %s, %s", n.osIndex, formatCpuList(n.cpus).c_str(),
                              formatBytes(n.memoryBytes).c_str()));
  std::string caches = "  caches:";
  for (const CacheLevel& c : topo.caches) {
    const char* suffix = c.kind == "data" ? "d" : c.kind == "instruction" ? "i" : "";
    caches += strprintf(" L%d%s %d x %s,", c.depth, suffix, c.count, formatBytes(c.sizeBytes).c_str());
  }
  if (topo.caches.empty()) caches += " none reported";
  else caches.pop_back();
  lines.push_back(caches);
  lines.push_back("  " + describeDevices("nics", topo.nics));
  lines.push_back("  " + describeDevices("gpus", topo.gpus));
  return lines;
}

}  // namespace loom::topology
