// Reads an hwloc topology into topology::Topology (topology.h). The only file
// of Loom that includes hwloc.h.
#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>

#include "common/format.h"
#include "src/topology/topology.h"

namespace loom::topology {
namespace {

struct TopologyCloser {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyHandle = std::unique_ptr<hwloc_topology, TopologyCloser>;

std::vector<int> cpusOf(hwloc_const_bitmap_t set) {
  std::vector<int> cpus;
  if (set == nullptr) return cpus;
  unsigned id;
  hwloc_bitmap_foreach_begin(id, set) { cpus.push_back(static_cast<int>(id)); }
  hwloc_bitmap_foreach_end();
  return cpus;
}

void readNumaNodes(hwloc_topology_t t, Topology& topo) {
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, o)) != nullptr;) {
    NumaNode node;
    node.osIndex = static_cast<int>(o->os_index);
    node.memoryBytes = o->attr ? o->attr->numanode.local_memory : 0;
    node.cpus = cpusOf(o->cpuset);
    topo.numaNodes.push_back(std::move(node));
  }
  std::sort(topo.numaNodes.begin(), topo.numaNodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.osIndex < b.osIndex; });
}

int numaNodeOfCpu(const Topology& topo, int cpu) {
  for (const NumaNode& n : topo.numaNodes)
    if (std::binary_search(n.cpus.begin(), n.cpus.end(), cpu)) return n.osIndex;
  return topo.numaNodes.empty() ? -1 : topo.numaNodes.front().osIndex;
}

// Cores; a machine (or VM) that reports no Core objects gets one per PU.
void readCores(hwloc_topology_t t, Topology& topo) {
  hwloc_obj_type_t type = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(t, type, o)) != nullptr;) {
    Core core;
    core.cpus = cpusOf(o->cpuset);
    if (core.cpus.empty()) continue;
    hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, o);
    core.package = pkg ? static_cast<int>(pkg->logical_index) : 0;
    core.numaNode = numaNodeOfCpu(topo, core.cpus.front());
    topo.cores.push_back(std::move(core));
  }
  topo.packages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
}

void readCaches(hwloc_topology_t t, Topology& topo) {
  std::map<std::tuple<int, std::string, uint64_t>, int> counts;
  for (int depth = 0; depth < hwloc_topology_get_depth(t); ++depth) {
    for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_depth(t, depth, o)) != nullptr;) {
      if (!hwloc_obj_type_is_cache(o->type) || o->attr == nullptr) continue;
      const auto& c = o->attr->cache;
      const char* kind = c.type == HWLOC_OBJ_CACHE_DATA ? "data"
                         : c.type == HWLOC_OBJ_CACHE_INSTRUCTION ? "instruction" : "unified";
      ++counts[{static_cast<int>(c.depth), kind, c.size}];
    }
  }
  for (const auto& [key, count] : counts)
    topo.caches.push_back(CacheLevel{std::get<0>(key), std::get<1>(key), std::get<2>(key), count});
}

// Locality of an I/O object: the CPUs and NUMA node of its first non-I/O ancestor.
void setLocality(hwloc_topology_t t, hwloc_obj_t io, Device& dev) {
  hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(t, io);
  if (anchor == nullptr) return;
  dev.localCpus = cpusOf(anchor->cpuset);
  int node = anchor->nodeset ? hwloc_bitmap_first(anchor->nodeset) : -1;
  dev.numaNode = node;
}

hwloc_obj_t pciParent(hwloc_obj_t o) {
  for (hwloc_obj_t p = o->parent; p != nullptr; p = p->parent)
    if (p->type == HWLOC_OBJ_PCI_DEVICE) return p;
  return nullptr;
}

Device deviceFromPci(hwloc_topology_t t, hwloc_obj_t pci) {
  Device dev;
  const auto& a = pci->attr->pcidev;
  dev.busId = strprintf("%04x:%02x:%02x.%01x", a.domain, a.bus, a.dev, a.func);
  dev.vendorId = a.vendor_id;
  dev.deviceId = a.device_id;
  dev.pciClass = a.class_id;
  dev.name = "pci " + dev.busId;
  setLocality(t, pci, dev);
  return dev;
}

bool isNicClass(uint16_t cls) { return (cls >> 8) == 0x02; }
bool isGpuClass(uint16_t cls) { return (cls >> 8) == 0x03 || (cls >> 8) == 0x12; }

// Adds `osdev` to `list`: several OS devices of one PCI function (ib0 and
// mlx5_0, card0 and cuda0) become one entry whose name lists them all.
void addOsDevice(hwloc_topology_t t, hwloc_obj_t osdev, std::vector<Device>& list) {
  hwloc_obj_t pci = pciParent(osdev);
  Device dev;
  if (pci != nullptr) {
    dev = deviceFromPci(t, pci);
    for (Device& d : list) {
      if (d.busId == dev.busId) {
        d.name += std::string("+") + osdev->name;
        return;
      }
    }
  } else {
    setLocality(t, osdev, dev);
  }
  dev.name = osdev->name ? osdev->name : "?";
  list.push_back(std::move(dev));
}

void readDevices(hwloc_topology_t t, Topology& topo) {
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_osdev(t, o)) != nullptr;) {
    if (o->attr == nullptr) continue;
    switch (o->attr->osdev.type) {
      case HWLOC_OBJ_OSDEV_NETWORK:
      case HWLOC_OBJ_OSDEV_OPENFABRICS: addOsDevice(t, o, topo.nics); break;
      case HWLOC_OBJ_OSDEV_GPU:
      case HWLOC_OBJ_OSDEV_COPROC: addOsDevice(t, o, topo.gpus); break;
      default: break;
    }
  }
  // PCI functions of NIC or GPU class that no OS device named (no driver, or
  // hwloc built without the backend): still listed, by bus id.
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_pcidev(t, o)) != nullptr;) {
    uint16_t cls = o->attr->pcidev.class_id;
    std::vector<Device>* list = isNicClass(cls) ? &topo.nics : isGpuClass(cls) ? &topo.gpus : nullptr;
    if (list == nullptr) continue;
    Device dev = deviceFromPci(t, o);
    bool known = std::any_of(list->begin(), list->end(), [&](const Device& d) { return d.busId == dev.busId; });
    if (!known) list->push_back(std::move(dev));
  }
}

Result<Topology> readTopology(hwloc_topology_t t) {
  Topology topo;
  readNumaNodes(t, topo);
  readCores(t, topo);
  readCaches(t, topo);
  readDevices(t, topo);
  return topo;
}

// Creates a topology, lets `configure` choose its source, loads it.
template <typename Configure>
Result<TopologyHandle> loadHandle(Configure configure, const std::string& what) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return makeSystemError(errno, "hwloc_topology_init failed");
  TopologyHandle t(raw);
  // NICs and GPUs are I/O objects, which hwloc drops unless asked.
  hwloc_topology_set_io_types_filter(t.get(), HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (configure(t.get()) != 0)
    return makeError(Code::kInvalidArgument, "hwloc cannot use %s: %s", what.c_str(), strerror(errno));
  if (hwloc_topology_load(t.get()) != 0)
    return makeError(Code::kSystemError, "hwloc cannot load the topology of %s: %s", what.c_str(),
                     strerror(errno));
  return t;
}

}  // namespace

Result<Topology> detectTopology() {
  auto t = loadHandle([](hwloc_topology_t) { return 0; }, "this machine");
  LOOM_TRY(t.status());
  return readTopology(t.value().get());
}

Result<Topology> detectCpuTopology() {
  auto t = loadHandle([](hwloc_topology_t h) { return hwloc_topology_set_io_types_filter(h, HWLOC_TYPE_FILTER_KEEP_NONE); },
                      "this machine");
  LOOM_TRY(t.status());
  return readTopology(t.value().get());
}

Result<Topology> loadTopologyXml(const std::string& path) {
  auto t = loadHandle([&](hwloc_topology_t h) { return hwloc_topology_set_xml(h, path.c_str()); },
                      "XML file '" + path + "'");
  if (!t.isOk()) return makeError(Code::kInvalidArgument, "%s", t.status().message().c_str());
  return readTopology(t.value().get());
}

}  // namespace loom::topology
