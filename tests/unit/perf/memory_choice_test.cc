// The perf tools' device-buffer options (-g, -G, --host-mem,
// --memcpy-baseline), where each rank runs (rank and device numbering as in
// nccl-tests) and which memory a run chooses. Pure: no CUDA call, except the
// device inventory check at the end.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "perf/harness/device_buffers.h"
#include "perf/harness/perf_options.h"
#include "perf/harness/rank_layout.h"

namespace loom::perf {
namespace {

ParseOutcome parse(std::vector<std::string> args, PerfOptions* o) {
  args.insert(args.begin(), "tool");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return parseOptions(static_cast<int>(args.size()), argv.data(), o, /*quiet=*/true);
}

TEST(DeviceOptionsTest, DefaultsAreOneGpuNoGraphAndNoChoiceForced) {
  PerfOptions o;
  ASSERT_EQ(parse({}, &o), ParseOutcome::kRun);
  EXPECT_EQ(o.gpus, 1);
  EXPECT_EQ(o.graphLaunches, 0);
  EXPECT_FALSE(o.hostMemory);
  EXPECT_FALSE(o.memcpyBaseline);
}

TEST(DeviceOptionsTest, ParsesShortAndLongSpellings) {
  PerfOptions o;
  ASSERT_EQ(parse({"-g", "4", "-G", "10", "--memcpy-baseline"}, &o), ParseOutcome::kRun);
  EXPECT_EQ(o.gpus, 4);
  EXPECT_EQ(o.graphLaunches, 10);
  EXPECT_TRUE(o.memcpyBaseline);
  PerfOptions l;
  ASSERT_EQ(parse({"--ngpus", "2", "--cudagraph", "3"}, &l), ParseOutcome::kRun);
  EXPECT_EQ(l.gpus, 2);
  EXPECT_EQ(l.graphLaunches, 3);
  PerfOptions h;
  ASSERT_EQ(parse({"--host-mem", "-t", "2"}, &h), ParseOutcome::kRun);
  EXPECT_TRUE(h.hostMemory);
  EXPECT_EQ(h.threads, 2);
}

TEST(DeviceOptionsTest, RejectsBadValuesAndDeviceFlagsWithHostMemory) {
  const std::vector<std::vector<std::string>> bad = {
      {"-g", "0"},  {"-g", "x"},    {"-g", "1025"},  {"-G", "-1"}, {"-G", "two"}, {"-G"},
      {"--host-mem=1"},
      {"--host-mem", "-g", "2"}, {"--host-mem", "-G", "1"}, {"--host-mem", "--memcpy-baseline"},
      {"--algos", "ring,auto", "-g", "2"}, {"--algos", "ring", "-G", "5"}, {"--algos", "auto", "--memcpy-baseline"}};
  for (const auto& args : bad) {
    PerfOptions o;
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(parse(args, &o), ParseOutcome::kError) << joined;
  }
  PerfOptions zero;
  EXPECT_EQ(parse({"-G", "0", "--host-mem"}, &zero), ParseOutcome::kRun);  // 0 launches: no graph
}

// Ranks run process-major, then thread, then the thread's GPU: every rank
// number in 0 .. processes x threads x gpus - 1 exactly once.
TEST(RankLayoutTest, GlobalRanksCoverTheJobOnce) {
  PerfOptions o;
  o.threads = 3;
  o.gpus = 2;
  const int processes = 4;
  std::set<int> seen;
  for (int p = 0; p < processes; ++p)
    for (int t = 0; t < o.threads; ++t)
      for (int g = 0; g < o.gpus; ++g) {
        const int rank = globalRank(p, t, g, o);
        EXPECT_EQ(rank / (o.threads * o.gpus), p);
        EXPECT_TRUE(seen.insert(rank).second) << rank;
      }
  EXPECT_EQ(seen.size(), static_cast<size_t>(processes * o.threads * o.gpus));
  EXPECT_EQ(*seen.rbegin(), processes * o.threads * o.gpus - 1);
}

// nccl-tests' rule: device = (localRank x threads x gpus + thread x gpus + i)
// mod devices, checked against a count kept here.
TEST(RankLayoutTest, DevicesAreRoundRobinAndSharedWhenRanksOutnumberThem) {
  PerfOptions o;
  o.threads = 2;
  o.gpus = 3;
  for (int devices : {1, 2, 4, 8}) {
    std::vector<int> perDevice(devices, 0);
    int slot = 0;
    for (int local = 0; local < 2; ++local)
      for (int t = 0; t < o.threads; ++t)
        for (int g = 0; g < o.gpus; ++g, ++slot) {
          const int d = deviceOf(local, t, g, o, devices);
          EXPECT_EQ(d, slot % devices) << "local " << local << " thread " << t << " gpu " << g;
          ++perDevice[d];
        }
    // 12 ranks over the devices: as even as round-robin gets.
    for (int d = 0; d < devices; ++d) EXPECT_NEAR(perDevice[d], 12.0 / devices, 1.0) << devices;
  }
  EXPECT_EQ(deviceOf(0, 0, 0, o, 0), -1);  // no device: no number
}

TEST(MemoryChoiceTest, DeviceBuffersWhenADeviceIsVisible) {
  PerfOptions o;
  const MemoryChoice c = chooseMemory(o, 1, "");
  EXPECT_TRUE(c.device);
  EXPECT_TRUE(c.error.empty());
  EXPECT_EQ(c.note.rfind("# device buffers", 0), 0u) << c.note;
}

TEST(MemoryChoiceTest, HostBuffersWithoutADeviceSayWhy) {
  PerfOptions o;
  const MemoryChoice c = chooseMemory(o, 0, "cudaGetDeviceCount: no device");
  EXPECT_FALSE(c.device);
  EXPECT_TRUE(c.error.empty());
  EXPECT_EQ(c.note, "# no CUDA device: host buffers (cudaGetDeviceCount: no device)");
}

TEST(MemoryChoiceTest, HostMemoryFlagAndAlgosWinOverADevice) {
  PerfOptions host;
  host.hostMemory = true;
  const MemoryChoice h = chooseMemory(host, 8, "");
  EXPECT_FALSE(h.device);
  EXPECT_EQ(h.note, "# --host-mem: host buffers");
  PerfOptions algos;
  algos.algos = {"ring", "auto"};
  EXPECT_FALSE(chooseMemory(algos, 8, "").device);
}

// A flag only device buffers can honour fails the run (exit 2) when there is
// no device, naming the flag and why there is none, rather than quietly
// measuring something else.
TEST(MemoryChoiceTest, DeviceOnlyFlagsWithoutADeviceAreErrors) {
  PerfOptions g, graph, copy;
  g.gpus = 2;
  graph.graphLaunches = 5;
  copy.memcpyBaseline = true;
  const std::vector<std::pair<PerfOptions, std::string>> cases = {{g, "-g 2"}, {graph, "-G 5"}, {copy, "--memcpy-baseline"}};
  for (const auto& [options, flag] : cases) {
    const MemoryChoice c = chooseMemory(options, 0, "built without CUDA");
    EXPECT_FALSE(c.device);
    EXPECT_NE(c.error.find(flag), std::string::npos) << c.error;
    EXPECT_NE(c.error.find("built without CUDA"), std::string::npos) << c.error;
    EXPECT_TRUE(chooseMemory(options, 1, "").error.empty()) << flag;
  }
}

// What the CUDA runtime says here: a device count, or none and a reason
// (always a reason in a build without CUDA).
TEST(DeviceInventoryTest, NoDeviceComesWithAReason) {
  const DeviceInventory inventory = findDevices();
  EXPECT_GE(inventory.count, 0);
#if !LOOM_HAVE_CUDA
  EXPECT_EQ(inventory.count, 0);
#endif
  if (inventory.count == 0) {
    EXPECT_FALSE(inventory.whyNone.empty());
    std::printf("no CUDA device here: %s\n", inventory.whyNone.c_str());
  } else {
    EXPECT_TRUE(inventory.whyNone.empty());
  }
}

}  // namespace
}  // namespace loom::perf
