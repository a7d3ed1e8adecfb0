// Which data path a call takes (src/device/path_selection.h).
#include <gtest/gtest.h>

#include "src/device/path_selection.h"

namespace loom::cuda {
namespace {

DirectFacts eligibleFacts() {
  DirectFacts f;
  f.enabled = true;
  f.kernelsBuilt = true;
  f.devicesUsable = true;
  f.singleHost = true;
  f.nranks = 4;
  f.type = algo::CollType::kAllReduce;
  f.bytes = 1024;
  return f;
}

TEST(CudaHostPathSelection, DirectNeedsEveryCommunicatorFact) {
  EXPECT_TRUE(directEligible(eligibleFacts()));
  auto without = [](auto change) {
    DirectFacts f = eligibleFacts();
    change(f);
    return directEligible(f);
  };
  EXPECT_FALSE(without([](DirectFacts& f) { f.enabled = false; }));       // LOOM_CUDA_P2P unset
  EXPECT_FALSE(without([](DirectFacts& f) { f.kernelsBuilt = false; }));  // host-only build
  EXPECT_FALSE(without([](DirectFacts& f) { f.devicesUsable = false; })); // no driver / GPU
  EXPECT_FALSE(without([](DirectFacts& f) { f.singleHost = false; }));    // ranks on other hosts
  EXPECT_FALSE(without([](DirectFacts& f) { f.nranks = 1; }));
  EXPECT_FALSE(without([](DirectFacts& f) { f.nranks = 9; }));            // beyond the kernel's 8 sources
  EXPECT_FALSE(without([](DirectFacts& f) { f.bytes = 0; }));
  for (auto t : {algo::CollType::kBroadcast, algo::CollType::kReduce, algo::CollType::kReduceScatter,
                 algo::CollType::kAllGather})
    EXPECT_FALSE(without([t](DirectFacts& f) { f.type = t; })) << algo::collTypeName(t);
  EXPECT_TRUE(without([](DirectFacts& f) { f.nranks = 8; }));
  EXPECT_TRUE(without([](DirectFacts& f) { f.nranks = 2; }));
}

TEST(CudaHostPathSelection, EveryRankChoosesFromTheSameExchange) {
  // Eligible and every rank ready: direct, whatever this rank's own kinds.
  EXPECT_EQ(choosePath(true, true, true), DataPath::kDirectP2P);
  // Eligible but some rank not ready (host buffers, no peer access): each
  // rank falls back on its own: staged if its buffers are on a device, else host.
  EXPECT_EQ(choosePath(true, false, true), DataPath::kStaged);
  EXPECT_EQ(choosePath(true, false, false), DataPath::kHost);
  // Not eligible: no exchange happened.
  EXPECT_EQ(choosePath(false, false, true), DataPath::kStaged);
  EXPECT_EQ(choosePath(false, false, false), DataPath::kHost);
  EXPECT_STREQ(dataPathName(DataPath::kDirectP2P), "direct-p2p");
}

}  // namespace
}  // namespace loom::cuda
