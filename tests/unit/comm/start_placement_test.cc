// The one move of a rank's creating thread to a core of its own
// (src/comm/start_placement.h), on this machine's real affinity calls.
// One test per process: the move happens at most once per process.
#include <gtest/gtest.h>
#include <sched.h>

#include <string>
#include <vector>

#include "src/comm/start_placement.h"
#include "src/topology/rank_placement.h"
#include "src/topology/topology.h"

namespace loom {
namespace {

int cpusIn(const cpu_set_t& mask) { return CPU_COUNT(&mask); }

TEST(StartPlacement, MovesOnceToItsOwnCoreAndKeepsTheWholeMask) {
  cpu_set_t before;
  CPU_ZERO(&before);
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  std::vector<int> allowed;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &before)) allowed.push_back(cpu);
  Result<topology::Topology> topo = topology::detectCpuTopology();
  ASSERT_TRUE(topo.isOk()) << topo.status().message();
  if (topology::startingCpus(topo.value(), allowed, 1, 2).empty())
    GTEST_SKIP() << "needs two cores in the affinity mask; its " << allowed.size() << " CPU(s) are on fewer";

  // A rank alone has nobody to share a core with, and does not count as the
  // process's first communicator of several ranks.
  EXPECT_EQ(startOnOwnCore(0, 1), "");

  // The last local rank of two goes to the last core of the plan, which is
  // never the first CPU of the mask.
  const std::string what = startOnOwnCore(1, 2);
  EXPECT_TRUE(what.find("its own core") != std::string::npos) << what;
  // The CPU it reports was read while its mask held only the planned core.
  int first = -1;
  for (int cpu = 0; cpu < CPU_SETSIZE && first < 0; ++cpu)
    if (CPU_ISSET(cpu, &before)) first = cpu;
  size_t at = what.find("to CPU ");
  at = at != std::string::npos ? at + 7 : what.find("started on CPU ");
  if (at != std::string::npos && what.compare(at, 15, "started on CPU ") == 0) at += 15;
  ASSERT_NE(at, std::string::npos) << what;
  EXPECT_NE(std::stoi(what.substr(at)), first) << what;

  cpu_set_t after;
  CPU_ZERO(&after);
  ASSERT_EQ(sched_getaffinity(0, sizeof(after), &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&before, &after)) << "the mask was not restored: " << cpusIn(after) << " CPUs of "
                                          << cpusIn(before);

  EXPECT_EQ(startOnOwnCore(0, 2), "") << "a second move in one process";
}

// Ranks that must share cores (3 on a mask of 2 CPUs) move nowhere, and that
// first communicator leaves none for later ones. A test of its own, since
// each test binary's first move is the one that counts: run alone it starts
// a fresh process (ctest), run after the test above it finds the move spent.
TEST(StartPlacement, RanksThatMustShareCoresStayAndSpendTheMove) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  ASSERT_EQ(sched_getaffinity(0, sizeof(mask), &mask), 0);
  if (cpusIn(mask) != 2) GTEST_SKIP() << "plans 3 ranks on a mask of exactly 2 CPUs; this one has " << cpusIn(mask);
  EXPECT_EQ(startOnOwnCore(0, 3), "");
  EXPECT_EQ(startOnOwnCore(1, 2), "") << "a later communicator moved the thread";
}

}  // namespace
}  // namespace loom
