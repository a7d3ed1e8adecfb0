// loomCommGetLastAlgorithm through real communicators (ranks as threads),
// and that LOOM_ALGO / LOOM_PROTO / LOOM_DETERMINISTIC reach the choice.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "tests/unit/tuner/scoped_env.h"

namespace {

using loom::testing::ScopedEnv;

std::vector<loomComm_t> clique(int n) {
  std::vector<loomComm_t> comms(static_cast<size_t>(n), nullptr);
  EXPECT_EQ(loomCommInitAll(comms.data(), n, nullptr), loomSuccess) << loomGetLastError(nullptr);
  return comms;
}

// Sum all-reduce of `count` floats (rank r contributes r + 1 + i), checked.
void allReduce(std::vector<loomComm_t>& comms, size_t count) {
  const int n = static_cast<int>(comms.size());
  std::vector<std::vector<float>> bufs(comms.size());
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) bufs[static_cast<size_t>(r)].push_back(float(r + 1 + i % 7));
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(loomAllReduce(bufs[r].data(), bufs[r].data(), count, loomFloat, loomSum, comms[r], nullptr), loomSuccess);
  ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(bufs[r][i], float(n * (n + 1) / 2 + n * int(i % 7))) << "rank " << r << " index " << i;
}

std::string lastOf(loomComm_t comm) {
  char name[64] = "unset";
  EXPECT_EQ(loomCommGetLastAlgorithm(comm, name, sizeof(name)), loomSuccess) << loomGetLastError(comm);
  return name;
}

void destroy(std::vector<loomComm_t>& comms) {
  for (auto c : comms) EXPECT_EQ(loomCommDestroy(c), loomSuccess);
}

TEST(LastAlgorithm, EmptyBeforeTheFirstCollectiveThenAlgoSlashProto) {
  auto comms = clique(2);
  EXPECT_EQ(lastOf(comms[0]), "");
  allReduce(comms, 8);
  const std::string small = lastOf(comms[0]);
  const auto slash = small.find('/');
  ASSERT_NE(slash, std::string::npos) << small;
  const std::string proto = small.substr(slash + 1);
  EXPECT_TRUE(proto == "Simple" || proto == "LL") << small;
  EXPECT_EQ(lastOf(comms[1]), small);  // both ranks chose alike
  allReduce(comms, 1 << 20);
  EXPECT_EQ(lastOf(comms[1]), lastOf(comms[0]));
  destroy(comms);
}

TEST(LastAlgorithm, LoomAlgoAndLoomProtoForceTheChoice) {
  ScopedEnv algo("LOOM_ALGO", "Ring");
  ScopedEnv proto("LOOM_PROTO", "simple");
  auto comms = clique(3);
  allReduce(comms, 5);
  EXPECT_EQ(lastOf(comms[0]), "ring/Simple");
  EXPECT_EQ(lastOf(comms[2]), "ring/Simple");
  destroy(comms);
}

TEST(LastAlgorithm, LoomDeterministicWinsOverLoomAlgo) {
  ScopedEnv algo("LOOM_ALGO", "ring");
  ScopedEnv det("LOOM_DETERMINISTIC", "1");
  auto comms = clique(2);
  allReduce(comms, 1000);
  EXPECT_EQ(lastOf(comms[0]).substr(0, 14), "deterministic/");
  destroy(comms);
}

TEST(LastAlgorithm, BadArgumentsAreRejected) {
  auto comms = clique(2);
  allReduce(comms, 4);
  char tiny[2];
  EXPECT_EQ(loomCommGetLastAlgorithm(comms[0], tiny, sizeof(tiny)), loomInvalidArgument);
  EXPECT_NE(std::string(loomGetLastError(comms[0])).find("nameLen 2"), std::string::npos);
  EXPECT_EQ(loomCommGetLastAlgorithm(comms[0], nullptr, 10), loomInvalidArgument);
  EXPECT_EQ(loomCommGetLastAlgorithm(nullptr, tiny, sizeof(tiny)), loomInvalidArgument);
  destroy(comms);
}

}  // namespace
