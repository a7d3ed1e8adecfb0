// Binding plans for k ranks on synthetic machines built here by hand.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "src/topology/binding_plan.h"
#include "tests/unit/topology/synthetic_machine.h"

namespace loom::topology {
namespace {

std::vector<std::vector<int>> cpusOf(const std::vector<RankBinding>& plan) {
  std::vector<std::vector<int>> out;
  for (const RankBinding& b : plan) out.push_back(b.cpus);
  return out;
}

TEST(BindingPlan, ParseModes) {
  EXPECT_EQ(parseBindMode("none"), BindMode::kNone);
  EXPECT_EQ(parseBindMode("CORE"), BindMode::kCore);
  EXPECT_EQ(parseBindMode("numa"), BindMode::kNuma);
  EXPECT_FALSE(parseBindMode("socket").has_value());
  EXPECT_FALSE(parseBindMode("").has_value());
}

TEST(BindingPlan, NoneLeavesEveryRankUnbound) {
  auto plan = planBinding(machine(2, 4, 2), BindMode::kNone, 5);
  ASSERT_EQ(plan.size(), 5u);
  for (const RankBinding& b : plan) EXPECT_TRUE(b.cpus.empty());
}

TEST(BindingPlan, CoreSpreadsOverNumaNodesThenCores) {
  Topology t = machine(2, 4, 2);  // cores 0-3 on node 0 (cpus 0-7), 4-7 on node 1 (cpus 8-15)
  EXPECT_EQ(cpusOf(planBinding(t, BindMode::kCore, 1)), (std::vector<std::vector<int>>{{0, 1}}));
  EXPECT_EQ(cpusOf(planBinding(t, BindMode::kCore, 2)), (std::vector<std::vector<int>>{{0, 1}, {8, 9}}));
  EXPECT_EQ(cpusOf(planBinding(t, BindMode::kCore, 4)),
            (std::vector<std::vector<int>>{{0, 1}, {4, 5}, {8, 9}, {12, 13}}));
  auto three = planBinding(t, BindMode::kCore, 3);  // cores 0, 2, 5
  EXPECT_EQ(cpusOf(three), (std::vector<std::vector<int>>{{0, 1}, {4, 5}, {10, 11}}));
  EXPECT_EQ(three[2].numaNode, 1);
}

TEST(BindingPlan, CoreWithUpToOneRankPerCoreUsesDistinctCoresBalancedOverNodes) {
  Topology t = machine(2, 4, 2);
  for (int k = 1; k <= 8; ++k) {
    auto plan = planBinding(t, BindMode::kCore, k);
    std::set<std::vector<int>> distinct;
    std::map<int, int> perNode;
    for (const RankBinding& b : plan) {
      distinct.insert(b.cpus);
      ++perNode[b.numaNode];
      EXPECT_EQ(b.cpus.size(), 2u);
      EXPECT_EQ(b.numaNode, b.cpus[0] / 8);  // the node really holds those CPUs
    }
    EXPECT_EQ(distinct.size(), static_cast<size_t>(k)) << "k=" << k;
    EXPECT_LE(std::abs(perNode[0] - perNode[1]), 1) << "k=" << k;
  }
}

TEST(BindingPlan, MoreRanksThanCoresShareCoresRoundRobin) {
  Topology t = machine(1, 2, 1);  // this kind of machine: 2 cores, 1 thread each
  EXPECT_EQ(cpusOf(planBinding(t, BindMode::kCore, 5)),
            (std::vector<std::vector<int>>{{0}, {1}, {0}, {1}, {0}}));
  Topology big = machine(2, 4, 2);
  auto plan = planBinding(big, BindMode::kCore, 20);
  std::map<std::vector<int>, int> uses;
  for (int i = 0; i < 20; ++i) {
    ++uses[plan[i].cpus];
    if (i >= 8) {
      EXPECT_EQ(plan[i].cpus, plan[i - 8].cpus) << "rank " << i;
    }
  }
  EXPECT_EQ(uses.size(), 8u);
  for (const auto& [cpus, n] : uses) EXPECT_TRUE(n == 2 || n == 3);
}

TEST(BindingPlan, NumaGivesContiguousBlocksOfRanksPerNode) {
  Topology t = machine(2, 4, 2);
  std::vector<int> node0{0, 1, 2, 3, 4, 5, 6, 7}, node1{8, 9, 10, 11, 12, 13, 14, 15};
  EXPECT_EQ(cpusOf(planBinding(t, BindMode::kNuma, 2)), (std::vector<std::vector<int>>{node0, node1}));
  EXPECT_EQ(cpusOf(planBinding(t, BindMode::kNuma, 5)),
            (std::vector<std::vector<int>>{node0, node0, node0, node1, node1}));
  EXPECT_EQ(cpusOf(planBinding(t, BindMode::kNuma, 1)), (std::vector<std::vector<int>>{node0}));
}

TEST(BindingPlan, NumaSkipsNodesWithoutCpus) {
  Topology t = machine(2, 2, 1);
  t.numaNodes.insert(t.numaNodes.begin() + 1, NumaNode{7, 1ull << 34, {}});  // memory only (e.g. CXL/HBM)
  auto plan = planBinding(t, BindMode::kNuma, 2);
  EXPECT_EQ(plan[0].numaNode, 0);
  EXPECT_EQ(plan[1].numaNode, 1);
}

TEST(BindingPlan, EmptyTopologyLeavesRanksUnbound) {
  auto plan = planBinding(Topology{}, BindMode::kCore, 3);
  ASSERT_EQ(plan.size(), 3u);
  for (const RankBinding& b : plan) EXPECT_TRUE(b.cpus.empty());
}

}  // namespace
}  // namespace loom::topology
