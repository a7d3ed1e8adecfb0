// Where an unbound rank starts (startingCpus) on synthetic machines.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "src/topology/rank_placement.h"
#include "tests/unit/topology/synthetic_machine.h"

namespace loom::topology {
namespace {

std::vector<int> range(int first, int count) {
  std::vector<int> cpus;
  for (int i = 0; i < count; ++i) cpus.push_back(first + i);
  return cpus;
}

TEST(RankPlacement, EachRankGetsItsOwnCoreWhenTheyFit) {
  Topology t = machine(1, 2, 1);  // the 2-core development VM
  EXPECT_EQ(startingCpus(t, {0, 1}, 0, 2), (std::vector<int>{0}));
  EXPECT_EQ(startingCpus(t, {1, 0}, 1, 2), (std::vector<int>{1}));
  // 16 ranks on 16 single-thread cores: one each, none shared.
  Topology sixteen = machine(1, 16, 1);
  std::set<int> used;
  for (int i = 0; i < 16; ++i) {
    std::vector<int> cpus = startingCpus(sixteen, range(0, 16), i, 16);
    ASSERT_EQ(cpus.size(), 1u) << "rank " << i;
    EXPECT_TRUE(used.insert(cpus[0]).second) << "rank " << i << " shares CPU " << cpus[0];
  }
}

TEST(RankPlacement, HardwareThreadsOfOneCoreStayTogether) {
  Topology t = machine(2, 4, 2);  // node 0: cpus 0-7, node 1: cpus 8-15
  EXPECT_EQ(startingCpus(t, range(0, 16), 0, 2), (std::vector<int>{0, 1}));
  EXPECT_EQ(startingCpus(t, range(0, 16), 1, 2), (std::vector<int>{8, 9}));
}

TEST(RankPlacement, OnlyTheAllowedCpusCount) {
  Topology t = machine(1, 8, 2);  // cores of cpus {0,1}, {2,3}, ... {14,15}
  // A cpuset of four CPUs on three cores: ranks spread over those cores, and
  // a core's CPU outside the set is never given.
  const std::vector<int> allowed = {3, 4, 5, 9};
  EXPECT_EQ(startingCpus(t, allowed, 0, 3), (std::vector<int>{3}));
  EXPECT_EQ(startingCpus(t, allowed, 1, 3), (std::vector<int>{4, 5}));
  EXPECT_EQ(startingCpus(t, allowed, 2, 3), (std::vector<int>{9}));
}

TEST(RankPlacement, NothingWhenRanksMustShareCores) {
  Topology t = machine(1, 2, 2);
  EXPECT_TRUE(startingCpus(t, range(0, 4), 0, 3).empty()) << "3 ranks on 2 cores";
  // A rank bound to one core (loomrun --bind core) has one core to itself.
  EXPECT_TRUE(startingCpus(t, {2, 3}, 1, 2).empty());
}

TEST(RankPlacement, OutOfRangeArgumentsGiveNothing) {
  Topology t = machine(1, 4, 1);
  EXPECT_TRUE(startingCpus(t, range(0, 4), 2, 2).empty());
  EXPECT_TRUE(startingCpus(t, range(0, 4), -1, 2).empty());
  EXPECT_TRUE(startingCpus(t, range(0, 4), 0, 0).empty());
  EXPECT_TRUE(startingCpus(Topology{}, range(0, 4), 0, 2).empty()) << "no cores known";
}

}  // namespace
}  // namespace loom::topology
