// End to end through the public API: this process is one rank of a loomrun
// job whose ranks pretend to live on several hosts. --hosts=ABAB gives rank r
// the host letter hosts[r] (LOOM_HOST_ID=loom-test-host-<letter>, set before
// the communicator is created), so same-letter ranks talk over shared
// memory and the others over TCP (LOOM_TRANSPORT unset; LOOM_SOCKET_IFNAME=lo).
//
// Every all-reduce, reduce-scatter and all-gather of the integration matrix
// (every dtype x op x in/out of place x counts 0, 1, 7, 1023, chunk-1,
// chunk+1) is checked against the matrix's own reference
// (tests/integration/collective_case.h), and every call reports the
// algorithm that ran it: with LOOM_ALGO=hier the all-reduces across equal
// hosts must have run hier, with LOOM_ALGO=ring ring; with the default tuner
// a 16 MiB all-reduce must pick hier exactly when the hosts are equal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <loom/loom.h>

#include "tests/integration/case_matrix.h"
#include "tests/integration/collective_case.h"

namespace loom::integration {
namespace {

std::string gHosts;         // --hosts
loomComm_t gComm = nullptr;
int gRank = -1, gNranks = 0;

bool equalHosts() {  // two or more hosts with the same number of ranks each
  std::string letters;
  for (char c : gHosts)
    if (letters.find(c) == std::string::npos) letters += c;
  if (letters.size() < 2) return false;
  for (char c : letters)
    if (std::count(gHosts.begin(), gHosts.end(), c) != std::count(gHosts.begin(), gHosts.end(), letters[0]))
      return false;
  return true;
}

std::string forcedAlgo() {
  const char* a = std::getenv("LOOM_ALGO");
  return a ? a : "";
}

std::string lastAlgorithm() {
  char name[64] = {};
  EXPECT_EQ(loomCommGetLastAlgorithm(gComm, name, sizeof name), loomSuccess) << loomGetLastError(gComm);
  return name;
}

bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// What must have run `coll` under the forced LOOM_ALGO (empty: anything).
std::string expectedAlgorithm(Coll coll) {
  const std::string forced = forcedAlgo();
  if (forced == "hier" && coll == Coll::kAllReduce && equalHosts()) return "hier/";
  if (forced == "ring") return "ring/";
  if (coll != Coll::kAllReduce) return "ring/";  // reduce-scatter and all-gather have only the ring
  return "";
}

void runMatrix(Coll coll) {
  ASSERT_NE(gComm, nullptr);
  MatrixOptions options;
  if (const char* chunk = std::getenv("LOOM_CHUNK_SIZE")) options.chunkBytes = std::strtoull(chunk, nullptr, 10);
  options.largeCount = false;
  const auto cases = buildCases(coll, gNranks, Mode::kProcesses, options);
  const std::string expected = expectedAlgorithm(coll);
  for (const CaseSpec& spec : cases) {
    CaseRun run(spec, gRank, gNranks);
    SCOPED_TRACE(run.trace() + " hosts " + gHosts);
    run.prepare();
    const loomResult_t rc = run.launch(gComm, nullptr);
    ASSERT_EQ(rc, loomSuccess) << loomGetLastError(gComm);
    run.verify();
    if (!expected.empty()) {
      const std::string ran = lastAlgorithm();
      EXPECT_TRUE(startsWith(ran, expected.c_str())) << "expected " << expected << " to run it, but " << ran << " did";
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
  if (gRank == 0) std::printf("  %s: %zu calls, hosts %s\n", collName(coll), cases.size(), gHosts.c_str());
}

TEST(Hier, AllReduce) { runMatrix(Coll::kAllReduce); }
TEST(Hier, ReduceScatter) { runMatrix(Coll::kReduceScatter); }
TEST(Hier, AllGather) { runMatrix(Coll::kAllGather); }

// The default tuner: a bandwidth-bound all-reduce goes to hier across equal
// hosts (never otherwise). Values rank+1+i%5: the sum is checked exactly.
TEST(Hier, DefaultTunerPicksHierForLargeAllReduce) {
  if (!forcedAlgo().empty()) GTEST_SKIP() << "LOOM_ALGO is set; this checks the default tuner";
  ASSERT_NE(gComm, nullptr);
  const size_t count = (size_t{16} << 20) / sizeof(float) + 3;
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(gRank + 1 + static_cast<int>(i % 5));
  ASSERT_EQ(loomAllReduce(data.data(), data.data(), count, loomFloat32, loomSum, gComm, nullptr), loomSuccess)
      << loomGetLastError(gComm);
  const std::string ran = lastAlgorithm();
  EXPECT_EQ(startsWith(ran, "hier/"), equalHosts()) << "ran " << ran << " on hosts " << gHosts;
  const float base = static_cast<float>(gNranks * (gNranks + 1) / 2);
  for (size_t i = 0; i < count; ++i)
    if (data[i] != base + static_cast<float>(gNranks * static_cast<int>(i % 5))) {
      ADD_FAILURE() << "element " << i << " is " << data[i];
      break;
    }
}

}  // namespace
}  // namespace loom::integration

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  using namespace loom::integration;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--hosts=", 8) == 0) gHosts = argv[i] + 8;
  loomUniqueId id;
  if (!std::getenv("RANK") || gHosts.empty()) {
    std::fprintf(stderr, "usage: loomrun -n N hier_process_test --hosts=<one host letter per rank>\n");
    return 2;
  }
  if (loomGetUniqueIdFromEnv(&id, &gRank, &gNranks) != loomSuccess) {
    std::fprintf(stderr, "loomGetUniqueIdFromEnv: %s\n", loomGetLastError(nullptr));
    return 1;
  }
  if (static_cast<int>(gHosts.size()) != gNranks) {
    std::fprintf(stderr, "--hosts=%s names %zu hosts for %d ranks\n", gHosts.c_str(), gHosts.size(), gNranks);
    return 2;
  }
  const std::string hostId = std::string("loom-test-host-") + gHosts[static_cast<size_t>(gRank)];
  setenv("LOOM_HOST_ID", hostId.c_str(), 1);
  if (loomCommInitRank(&gComm, gNranks, id, gRank) != loomSuccess) {
    std::fprintf(stderr, "rank %d: loomCommInitRank: %s\n", gRank, loomGetLastError(nullptr));
    return 1;
  }
  const int failed = RUN_ALL_TESTS();
  const loomResult_t rc = failed ? loomCommAbort(gComm) : loomCommDestroy(gComm);
  if (rc != loomSuccess) std::fprintf(stderr, "rank %d: destroy: %s\n", gRank, loomGetLastError(nullptr));
  return failed || rc != loomSuccess ? 1 : 0;
}
