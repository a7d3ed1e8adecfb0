// A synthetic machine from an hwloc XML file the test writes: 2 packages,
// each with one NUMA node (4 GB), an L3, 2 cores x 2 hardware threads with
// their own L2 and L1d; an Ethernet NIC (eth0) on package 0, an InfiniBand NIC
// (ib0 + mlx5_0 on one PCI function) and an NVIDIA 3D controller (cuda0) on
// package 1. The expectations below are written from that description.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "src/topology/topology.h"

namespace loom::topology {
namespace {

std::string pu(int os) {
  char mask[16];
  std::snprintf(mask, sizeof(mask), "0x%08x", 1u << os);
  return "<object type=\"PU\" os_index=\"" + std::to_string(os) + "\" cpuset=\"" + mask +
         "\" complete_cpuset=\"" + mask + "\"/>\n";
}

std::string hexMask(unsigned bits) {
  char mask[16];
  std::snprintf(mask, sizeof(mask), "0x%08x", bits);
  return mask;
}

// Core `core` (0..3) with PUs 2*core and 2*core+1 under its L2 and L1d.
std::string core(int core, int node) {
  std::string set = hexMask(3u << (2 * core));
  std::string nodes = hexMask(1u << node);
  std::string attrs = "cpuset=\"" + set + "\" complete_cpuset=\"" + set + "\" nodeset=\"" + nodes +
                      "\" complete_nodeset=\"" + nodes + "\"";
  return "<object type=\"L2Cache\" " + attrs +
         " cache_size=\"1048576\" depth=\"2\" cache_linesize=\"64\" cache_associativity=\"0\" cache_type=\"0\">\n"
         "<object type=\"L1Cache\" " + attrs +
         " cache_size=\"32768\" depth=\"1\" cache_linesize=\"64\" cache_associativity=\"0\" cache_type=\"1\">\n"
         "<object type=\"Core\" os_index=\"" + std::to_string(core) + "\" " + attrs + ">\n" + pu(2 * core) +
         pu(2 * core + 1) + "</object>\n</object>\n</object>\n";
}

std::string package(int p, const std::string& io) {
  std::string set = hexMask(0xfu << (4 * p));
  std::string nodes = hexMask(1u << p);
  std::string attrs = "cpuset=\"" + set + "\" complete_cpuset=\"" + set + "\" nodeset=\"" + nodes +
                      "\" complete_nodeset=\"" + nodes + "\"";
  return "<object type=\"Package\" os_index=\"" + std::to_string(p) + "\" " + attrs + ">\n" +
         "<object type=\"NUMANode\" os_index=\"" + std::to_string(p) + "\" " + attrs +
         " local_memory=\"4294967296\"/>\n" + "<object type=\"L3Cache\" " + attrs +
         " cache_size=\"16777216\" depth=\"3\" cache_linesize=\"64\" cache_associativity=\"0\" cache_type=\"0\">\n" +
         core(2 * p, p) + core(2 * p + 1, p) + "</object>\n" + io + "</object>\n";
}

std::string bridge(const std::string& bus, const std::string& children) {
  return "<object type=\"Bridge\" bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"0000:[" + bus + "-" + bus + "]\">\n" +
         children + "</object>\n";
}

std::string pciDev(const std::string& busId, const std::string& type, const std::string& osdevs) {
  return "<object type=\"PCIDev\" pci_busid=\"" + busId + "\" pci_type=\"" + type + "\">\n" + osdevs + "</object>\n";
}

std::string osDev(const std::string& name, int type) {
  return "<object type=\"OSDev\" name=\"" + name + "\" osdev_type=\"" + std::to_string(type) + "\"/>\n";
}

// osdev_type: 2 network, 3 OpenFabrics, 5 co-processor (hwloc_obj_osdev_type_e).
std::string syntheticXml() {
  std::string nic0 = bridge("01", pciDev("0000:01:00.0", "0200 [8086:1521] [0000:0000] 01", osDev("eth0", 2)));
  std::string nic1 = bridge("81", pciDev("0000:81:00.0", "0207 [15b3:101b] [0000:0000] 00",
                                         osDev("ib0", 2) + osDev("mlx5_0", 3)));
  std::string gpu = bridge("82", pciDev("0000:82:00.0", "0302 [10de:20b0] [0000:0000] a1", osDev("cuda0", 5)));
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
         "<topology version=\"2.0\">\n"
         "<object type=\"Machine\" os_index=\"0\" cpuset=\"0x000000ff\" complete_cpuset=\"0x000000ff\" "
         "allowed_cpuset=\"0x000000ff\" nodeset=\"0x00000003\" complete_nodeset=\"0x00000003\" "
         "allowed_nodeset=\"0x00000003\">\n" +
         package(0, nic0) + package(1, nic1 + gpu) + "</object>\n</topology>\n";
}

class XmlTopologyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = "/tmp/loom_topology_test_" + std::to_string(getpid()) + ".xml";
    std::ofstream(path_) << syntheticXml();
  }
  void TearDown() override { std::remove(path_.c_str()); }
  std::string path_;
};

TEST_F(XmlTopologyTest, CoresNumaNodesAndCaches) {
  Result<Topology> loaded = loadTopologyXml(path_);
  ASSERT_TRUE(loaded.isOk()) << loaded.status().message();
  const Topology& t = loaded.value();
  EXPECT_EQ(t.packages, 2);
  EXPECT_EQ(t.cpuCount(), 8);
  ASSERT_EQ(t.numaNodes.size(), 2u);
  for (int n = 0; n < 2; ++n) {
    EXPECT_EQ(t.numaNodes[n].osIndex, n);
    EXPECT_EQ(t.numaNodes[n].memoryBytes, 4294967296ull);
    EXPECT_EQ(t.numaNodes[n].cpus, (std::vector<int>{4 * n, 4 * n + 1, 4 * n + 2, 4 * n + 3}));
  }
  ASSERT_EQ(t.cores.size(), 4u);
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(t.cores[c].cpus, (std::vector<int>{2 * c, 2 * c + 1}));
    EXPECT_EQ(t.cores[c].numaNode, c / 2);
    EXPECT_EQ(t.cores[c].package, c / 2);
  }
  ASSERT_EQ(t.caches.size(), 3u);
  EXPECT_EQ(t.caches[0].depth, 1);
  EXPECT_EQ(t.caches[0].kind, "data");
  EXPECT_EQ(t.caches[0].sizeBytes, 32768u);
  EXPECT_EQ(t.caches[0].count, 4);
  EXPECT_EQ(t.caches[1].depth, 2);
  EXPECT_EQ(t.caches[1].sizeBytes, 1048576u);
  EXPECT_EQ(t.caches[1].count, 4);
  EXPECT_EQ(t.caches[2].depth, 3);
  EXPECT_EQ(t.caches[2].kind, "unified");
  EXPECT_EQ(t.caches[2].sizeBytes, 16777216u);
  EXPECT_EQ(t.caches[2].count, 2);
}

TEST_F(XmlTopologyTest, NicsAndGpuWithTheirNumaNode) {
  Result<Topology> loaded = loadTopologyXml(path_);
  ASSERT_TRUE(loaded.isOk()) << loaded.status().message();
  const Topology& t = loaded.value();
  ASSERT_EQ(t.nics.size(), 2u);
  const Device& eth = t.nics[0].name == "eth0" ? t.nics[0] : t.nics[1];
  const Device& ib = t.nics[0].name == "eth0" ? t.nics[1] : t.nics[0];
  EXPECT_EQ(eth.name, "eth0");
  EXPECT_EQ(eth.busId, "0000:01:00.0");
  EXPECT_EQ(eth.vendorId, 0x8086);
  EXPECT_EQ(eth.pciClass, 0x0200);
  EXPECT_EQ(eth.numaNode, 0);
  EXPECT_EQ(eth.localCpus, (std::vector<int>{0, 1, 2, 3}));
  // ib0 and mlx5_0 are one PCI function: one NIC.
  EXPECT_TRUE(ib.name == "ib0+mlx5_0" || ib.name == "mlx5_0+ib0") << ib.name;
  EXPECT_EQ(ib.busId, "0000:81:00.0");
  EXPECT_EQ(ib.vendorId, 0x15b3);
  EXPECT_EQ(ib.numaNode, 1);
  EXPECT_EQ(ib.localCpus, (std::vector<int>{4, 5, 6, 7}));

  ASSERT_EQ(t.gpus.size(), 1u);
  EXPECT_EQ(t.gpus[0].name, "cuda0");
  EXPECT_EQ(t.gpus[0].busId, "0000:82:00.0");
  EXPECT_EQ(t.gpus[0].vendorId, 0x10de);
  EXPECT_EQ(t.gpus[0].deviceId, 0x20b0);
  EXPECT_EQ(t.gpus[0].pciClass, 0x0302);
  EXPECT_EQ(t.gpus[0].numaNode, 1);
  EXPECT_EQ(t.gpus[0].localCpus, (std::vector<int>{4, 5, 6, 7}));
}

TEST_F(XmlTopologyTest, DescriptionNamesEveryPart) {
  Result<Topology> loaded = loadTopologyXml(path_);
  ASSERT_TRUE(loaded.isOk()) << loaded.status().message();
  std::string text;
  for (const std::string& line : describeTopology(loaded.value())) text += line + "\n";
  EXPECT_NE(text.find("2 package(s), 4 core(s), 8 cpu(s), 2 NUMA node(s)"), std::string::npos) << text;
  EXPECT_NE(text.find("numa 0: cpus 0-3, 4 GiB"), std::string::npos) << text;
  EXPECT_NE(text.find("numa 1: cpus 4-7, 4 GiB"), std::string::npos) << text;
  EXPECT_NE(text.find("L1d 4 x 32 KiB, L2 4 x 1 MiB, L3 2 x 16 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("eth0 (pci 0000:01:00.0 8086:1521) numa 0 cpus 0-3"), std::string::npos) << text;
  EXPECT_NE(text.find("cuda0 (pci 0000:82:00.0 10de:20b0) numa 1 cpus 4-7"), std::string::npos) << text;
}

TEST(XmlTopology, MissingFileIsAnErrorNamingIt) {
  Result<Topology> loaded = loadTopologyXml("/nonexistent/loom-topology.xml");
  ASSERT_FALSE(loaded.isOk());
  EXPECT_EQ(loaded.status().code(), Code::kInvalidArgument);
  EXPECT_NE(loaded.status().message().find("/nonexistent/loom-topology.xml"), std::string::npos)
      << loaded.status().message();
}

TEST(CpuList, RangesAndSingles) {
  EXPECT_EQ(formatCpuList({}), "");
  EXPECT_EQ(formatCpuList({3}), "3");
  EXPECT_EQ(formatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(formatCpuList({5, 4, 4}), "4-5");
}

}  // namespace
}  // namespace loom::topology
