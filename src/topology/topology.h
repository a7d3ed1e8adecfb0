// The machine as Loom sees it: packages, NUMA nodes, cores, caches, and the
// NICs and GPUs with the NUMA node / CPUs they hang off (their PCI locality).
//
// Read with hwloc (detectTopology for this machine, loadTopologyXml for an
// hwloc XML export, e.g. another machine's `lstopo out.xml` or a test's), then
// copied into plain values so no other layer includes hwloc.h. CPU numbers
// are OS indices (the numbers of sched_setaffinity, /proc/cpuinfo and
// /sys/devices/system/cpu), NUMA node numbers are OS node numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace loom::topology {

struct NumaNode {
  int osIndex = 0;
  uint64_t memoryBytes = 0;  // local memory
  std::vector<int> cpus;     // sorted PU OS indices
};

struct Core {
  int package = 0;   // logical index of its package
  int numaNode = 0;  // OS index of the NUMA node holding its CPUs (the first when several)
  std::vector<int> cpus;  // its hardware threads (PUs), sorted
};

// All caches of one level and kind, e.g. "L2 unified: 2 x 1 MiB".
struct CacheLevel {
  int depth = 0;          // 1, 2, 3...
  std::string kind;       // "data", "instruction" or "unified"
  uint64_t sizeBytes = 0; // of one instance
  int count = 0;          // instances
};

// A PCI device (or an OS device on one), with where it attaches.
struct Device {
  std::string name;    // OS name (eth0, mlx5_0, cuda0), else "pci <busid>"
  std::string busId;   // domain:bus:dev.fn, empty when not on PCI
  uint16_t vendorId = 0;
  uint16_t deviceId = 0;
  uint16_t pciClass = 0;    // class id, e.g. 0x0200 ethernet, 0x0300 VGA
  int numaNode = -1;        // nearest NUMA node (OS index); -1 unknown
  std::vector<int> localCpus;  // CPUs of the object it hangs off
};

struct Topology {
  int packages = 0;
  std::vector<NumaNode> numaNodes;  // sorted by osIndex
  std::vector<Core> cores;          // by package, then CPU order
  std::vector<CacheLevel> caches;   // by depth
  std::vector<Device> nics;         // network / OpenFabrics OS devices, or PCI class 0x02
  std::vector<Device> gpus;         // CUDA/OpenCL... OS devices, or PCI class 0x03

  int cpuCount() const;
  const NumaNode* numaNode(int osIndex) const;  // nullptr when absent
};

// The topology of this machine (what this process may use, as hwloc sees it:
// cgroup limits apply, the process's own affinity does not), with I/O devices.
// Errors: kSystemError when hwloc cannot read the machine.
Result<Topology> detectTopology();
// The same without I/O devices (nics and gpus stay empty): no PCI scan and no
// GPU library loaded, for callers that need only cores and NUMA nodes.
Result<Topology> detectCpuTopology();

// The topology described by an hwloc XML file. Errors: kInvalidArgument
// naming the file when hwloc cannot load it.
Result<Topology> loadTopologyXml(const std::string& path);

// "0-3,8" for {0,1,2,3,8}; "" for none.
std::string formatCpuList(const std::vector<int>& cpus);

// Compact multi-line description (packages, NUMA nodes with CPUs and memory,
// caches, NICs and GPUs with their NUMA node), lines without trailing '\n'.
std::vector<std::string> describeTopology(const Topology& topo);

}  // namespace loom::topology
