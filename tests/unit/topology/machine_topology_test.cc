// The topology hwloc detects for this machine against what Linux says in
// /proc/cpuinfo and /sys (read here independently of hwloc).
#include <dirent.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "src/topology/topology.h"

namespace loom::topology {
namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// "0-3,8" -> {0,1,2,3,8}
std::set<int> parseCpuList(const std::string& text) {
  std::set<int> cpus;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (part.empty() || part == "\n") continue;
    size_t dash = part.find('-');
    int lo = std::stoi(part.substr(0, dash));
    int hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
    for (int c = lo; c <= hi; ++c) cpus.insert(c);
  }
  return cpus;
}

std::vector<std::string> listDir(const std::string& path, const std::string& prefix) {
  std::vector<std::string> names;
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) names.push_back(e->d_name);
    closedir(d);
  }
  return names;
}

struct CpuInfoEntry {
  int package = -1;
  int core = -1;
};

// processor -> (physical id, core id); ids stay -1 when the kernel omits them.
std::map<int, CpuInfoEntry> readCpuInfo() {
  std::map<int, CpuInfoEntry> cpus;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  int current = -1;
  while (std::getline(in, line)) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    std::string value = line.substr(colon + 1);
    if (key == "processor") current = std::stoi(value), cpus[current] = {};
    else if (key == "physical id" && current >= 0) cpus[current].package = std::stoi(value);
    else if (key == "core id" && current >= 0) cpus[current].core = std::stoi(value);
  }
  return cpus;
}

// CPUs this process's cgroup lets it use (hwloc reports only those), or all.
std::set<int> cgroupCpus(const std::map<int, CpuInfoEntry>& all) {
  std::set<int> cpus = parseCpuList(readFile("/sys/fs/cgroup/cpuset.cpus.effective"));
  if (cpus.empty())
    for (const auto& [cpu, entry] : all) cpus.insert(cpu);
  return cpus;
}

class MachineTopologyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<Topology> detected = detectTopology();
    ASSERT_TRUE(detected.isOk()) << detected.status().message();
    topo_ = detected.value();
    cpuinfo_ = readCpuInfo();
    allowed_ = cgroupCpus(cpuinfo_);
  }
  Topology topo_;
  std::map<int, CpuInfoEntry> cpuinfo_;
  std::set<int> allowed_;
};

TEST_F(MachineTopologyTest, CpusCoresAndPackagesMatchProcCpuinfo) {
  std::set<int> hwlocCpus;
  for (const Core& c : topo_.cores) hwlocCpus.insert(c.cpus.begin(), c.cpus.end());
  std::set<int> expected;
  for (const auto& [cpu, entry] : cpuinfo_)
    if (allowed_.count(cpu)) expected.insert(cpu);
  EXPECT_EQ(hwlocCpus, expected);

  if (cpuinfo_.begin()->second.package < 0 || cpuinfo_.begin()->second.core < 0)
    GTEST_SKIP() << "/proc/cpuinfo has no 'physical id'/'core id' here; core grouping not checkable";
  std::set<std::pair<int, int>> cores;
  std::set<int> packages;
  for (int cpu : expected) {
    cores.insert({cpuinfo_[cpu].package, cpuinfo_[cpu].core});
    packages.insert(cpuinfo_[cpu].package);
  }
  EXPECT_EQ(topo_.cores.size(), cores.size());
  EXPECT_EQ(topo_.packages, static_cast<int>(packages.size()));
  for (const Core& c : topo_.cores) {  // every thread of a core has the same ids
    for (int cpu : c.cpus) {
      EXPECT_EQ(cpuinfo_[cpu].package, cpuinfo_[c.cpus[0]].package) << "cpu " << cpu;
      EXPECT_EQ(cpuinfo_[cpu].core, cpuinfo_[c.cpus[0]].core) << "cpu " << cpu;
    }
  }
}

TEST_F(MachineTopologyTest, NumaNodesMatchSysDevicesSystemNode) {
  std::vector<std::string> dirs = listDir("/sys/devices/system/node", "node");
  if (dirs.empty()) GTEST_SKIP() << "no /sys/devices/system/node/node*: kernel without NUMA support";
  std::map<int, std::set<int>> sysNodes;
  for (const std::string& d : dirs) {
    std::set<int> cpus = parseCpuList(readFile("/sys/devices/system/node/" + d + "/cpulist"));
    std::set<int> usable;
    for (int c : cpus)
      if (allowed_.count(c)) usable.insert(c);
    sysNodes[std::stoi(d.substr(4))] = usable;
  }
  ASSERT_EQ(topo_.numaNodes.size(), sysNodes.size());
  for (const NumaNode& n : topo_.numaNodes) {
    ASSERT_TRUE(sysNodes.count(n.osIndex)) << "numa node " << n.osIndex;
    EXPECT_EQ(std::set<int>(n.cpus.begin(), n.cpus.end()), sysNodes[n.osIndex]) << "numa node " << n.osIndex;
    // "Node 0 MemTotal:  10053844 kB"
    std::string meminfo = readFile("/sys/devices/system/node/node" + std::to_string(n.osIndex) + "/meminfo");
    size_t at = meminfo.find("MemTotal:");
    ASSERT_NE(at, std::string::npos);
    uint64_t kib = std::stoull(meminfo.substr(at + 9));
    EXPECT_EQ(n.memoryBytes, kib * 1024) << "numa node " << n.osIndex;
  }
}

TEST_F(MachineTopologyTest, CachesMatchSysCpuCache) {
  // (level, kind, size) -> the distinct sets of CPUs sharing one instance.
  std::map<std::tuple<int, std::string, uint64_t>, std::set<std::string>> sysCaches;
  for (int cpu : allowed_) {
    std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cache/";
    for (const std::string& index : listDir(base, "index")) {
      std::string dir = base + index + "/";
      std::string type = readFile(dir + "type");
      std::string size = readFile(dir + "size");  // "48K"
      if (type.empty() || size.empty()) continue;
      uint64_t bytes = std::stoull(size) * (size.find('M') != std::string::npos ? 1 << 20 : 1 << 10);
      std::string kind = type.rfind("Data", 0) == 0 ? "data" : type.rfind("Instruction", 0) == 0 ? "instruction" : "unified";
      sysCaches[{std::stoi(readFile(dir + "level")), kind, bytes}].insert(readFile(dir + "shared_cpu_list"));
    }
  }
  if (sysCaches.empty()) GTEST_SKIP() << "no /sys/devices/system/cpu/cpu*/cache here";
  std::map<std::tuple<int, std::string, uint64_t>, int> expected, detected;
  for (const auto& [key, sharers] : sysCaches) expected[key] = static_cast<int>(sharers.size());
  for (const CacheLevel& c : topo_.caches) detected[{c.depth, c.kind, c.sizeBytes}] = c.count;
  // hwloc leaves out instruction caches unless asked; compare data/unified ones.
  for (auto it = expected.begin(); it != expected.end();)
    it = std::get<1>(it->first) == "instruction" ? expected.erase(it) : std::next(it);
  for (auto it = detected.begin(); it != detected.end();)
    it = std::get<1>(it->first) == "instruction" ? detected.erase(it) : std::next(it);
  EXPECT_EQ(detected, expected);
}

TEST_F(MachineTopologyTest, PciNicsAndGpusMatchSysBusPci) {
  // Every PCI function of network (0x02) or display (0x03) class is listed,
  // with its bus id, and nothing else is.
  std::set<std::string> sysNics, sysGpus;
  for (const std::string& busId : listDir("/sys/bus/pci/devices", "")) {
    if (busId[0] == '.') continue;
    unsigned long cls = std::stoul(readFile("/sys/bus/pci/devices/" + busId + "/class"), nullptr, 16) >> 16;
    if (cls == 0x02) sysNics.insert(busId);
    if (cls == 0x03 || cls == 0x12) sysGpus.insert(busId);
  }
  std::set<std::string> nics, gpus;
  for (const Device& d : topo_.nics)
    if (!d.busId.empty()) nics.insert(d.busId);
  for (const Device& d : topo_.gpus)
    if (!d.busId.empty()) gpus.insert(d.busId);
  EXPECT_EQ(nics, sysNics);
  EXPECT_EQ(gpus, sysGpus);
  for (const Device& d : topo_.nics) {
    EXPECT_TRUE(topo_.numaNode(d.numaNode) != nullptr) << d.name << " numa " << d.numaNode;
    EXPECT_FALSE(d.localCpus.empty()) << d.name;
  }
}

TEST_F(MachineTopologyTest, DescriptionStartsWithTheCounts) {
  std::vector<std::string> lines = describeTopology(topo_);
  ASSERT_GE(lines.size(), 4u);
  EXPECT_NE(lines[0].find(std::to_string(topo_.cores.size()) + " core(s)"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(std::to_string(topo_.numaNodes.size()) + " NUMA node(s)"), std::string::npos) << lines[0];
}

// The CPU-only read sees the same cores, packages and NUMA nodes, and no I/O
// device (startup placement reads it in every rank's init).
TEST_F(MachineTopologyTest, CpuOnlyReadHasTheSameCoresAndNoDevices) {
  Result<Topology> cpuOnly = detectCpuTopology();
  ASSERT_TRUE(cpuOnly.isOk()) << cpuOnly.status().message();
  const Topology& t = cpuOnly.value();
  EXPECT_EQ(t.packages, topo_.packages);
  ASSERT_EQ(t.cores.size(), topo_.cores.size());
  for (size_t i = 0; i < t.cores.size(); ++i) {
    EXPECT_EQ(t.cores[i].cpus, topo_.cores[i].cpus) << "core " << i;
    EXPECT_EQ(t.cores[i].numaNode, topo_.cores[i].numaNode) << "core " << i;
  }
  ASSERT_EQ(t.numaNodes.size(), topo_.numaNodes.size());
  for (size_t i = 0; i < t.numaNodes.size(); ++i) EXPECT_EQ(t.numaNodes[i].cpus, topo_.numaNodes[i].cpus);
  EXPECT_TRUE(t.nics.empty()) << t.nics.size() << " NIC(s)";
  EXPECT_TRUE(t.gpus.empty()) << t.gpus.size() << " GPU(s)";
}

}  // namespace
}  // namespace loom::topology
