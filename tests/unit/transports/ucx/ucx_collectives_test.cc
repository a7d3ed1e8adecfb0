// Collectives through the public API with every peer over UCX
// (LOOM_TRANSPORT=ucx; UCX_TLS chooses TCP or shared memory, see
// CMakeLists.txt), checked against results computed here independently.
//
//   Collectives.*  run under loomrun: each process is one rank. The first
//                  test also checks, from Loom's INFO log, that UCX (and not
//                  shared memory) connected this rank with every other.
//   PeerKilled.*   run alone: forks three ranks (tests/faults/peer_failure's
//                  harness), SIGKILLs one mid-all-reduce; the survivors must
//                  fail with loomRemoteError naming it well before the deadline.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "tests/faults/peer_failure/forked_rank_faults.h"

namespace {

loomComm_t gComm = nullptr;
int gRank = 0;
int gRanks = 1;
std::string gLogPath;

#define LOOM_OK(call) ASSERT_EQ((call), loomSuccess) << #call << ": " << loomGetLastError(gComm)

// Element i of rank r's input: small integers, so float sums are exact.
float inputOf(int r, size_t i) { return static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(r) * 13) % 101) - 50); }
int32_t intInputOf(int r, size_t i) { return static_cast<int32_t>(i * 2654435761u + static_cast<size_t>(r) * 40503u); }

TEST(Collectives, EveryPeerIsServedByUcx) {
  ASSERT_NE(gComm, nullptr);
  std::ifstream log(gLogPath);
  std::stringstream text;
  text << log.rdbuf();
  const std::string want = "ucx: rank " + std::to_string(gRank) + " connected to " + std::to_string(gRanks - 1) +
                           " peer(s)";
  EXPECT_NE(text.str().find(want), std::string::npos) << "no '" << want << "' in the log:\n" << text.str();
}

TEST(Collectives, AllReduceFloatAndIntAtManySizes) {
  // 0, tiny, one chunk +- 1 (256 KiB = 65536 floats), several chunks, and an odd large count.
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{65535}, size_t{65537}, size_t{300001}, size_t{1} << 20}) {
    std::vector<float> in(count), out(count, -1.f);
    for (size_t i = 0; i < count; ++i) in[i] = inputOf(gRank, i);
    LOOM_OK(loomAllReduce(in.data(), out.data(), count, loomFloat32, loomSum, gComm, nullptr));
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < gRanks; ++r) want += inputOf(r, i);
      ASSERT_EQ(out[i], want) << "float sum, count " << count << ", element " << i;
    }
    std::vector<int32_t> iin(count), iout(count, 0);
    for (size_t i = 0; i < count; ++i) iin[i] = intInputOf(gRank, i);
    LOOM_OK(loomAllReduce(iin.data(), iout.data(), count, loomInt32, loomMax, gComm, nullptr));
    for (size_t i = 0; i < count; ++i) {
      int32_t want = intInputOf(0, i);
      for (int r = 1; r < gRanks; ++r) want = std::max(want, intInputOf(r, i));
      ASSERT_EQ(iout[i], want) << "int32 max, count " << count << ", element " << i;
    }
  }
}

TEST(Collectives, AllReduceInPlace) {
  const size_t count = 200003;
  std::vector<float> buf(count);
  for (size_t i = 0; i < count; ++i) buf[i] = inputOf(gRank, i);
  LOOM_OK(loomAllReduce(buf.data(), buf.data(), count, loomFloat32, loomSum, gComm, nullptr));
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < gRanks; ++r) want += inputOf(r, i);
    ASSERT_EQ(buf[i], want) << "element " << i;
  }
}

TEST(Collectives, BroadcastFromEveryRoot) {
  for (size_t count : {size_t{0}, size_t{5}, size_t{400000}}) {
    for (int root = 0; root < gRanks; ++root) {
      std::vector<float> in(count), out(count, -7.f);
      for (size_t i = 0; i < count; ++i) in[i] = inputOf(gRank, i);
      LOOM_OK(loomBroadcast(in.data(), out.data(), count, loomFloat32, root, gComm, nullptr));
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[i], inputOf(root, i)) << "root " << root << ", element " << i;
    }
  }
}

TEST(Collectives, ReduceScatter) {
  for (size_t recvCount : {size_t{1}, size_t{1000}, size_t{150001}}) {
    std::vector<float> in(recvCount * static_cast<size_t>(gRanks)), out(recvCount, -1.f);
    for (size_t i = 0; i < in.size(); ++i) in[i] = inputOf(gRank, i);
    LOOM_OK(loomReduceScatter(in.data(), out.data(), recvCount, loomFloat32, loomSum, gComm, nullptr));
    for (size_t i = 0; i < recvCount; ++i) {
      const size_t global = static_cast<size_t>(gRank) * recvCount + i;
      float want = 0;
      for (int r = 0; r < gRanks; ++r) want += inputOf(r, global);
      ASSERT_EQ(out[i], want) << "recvcount " << recvCount << ", element " << i;
    }
  }
}

TEST(Collectives, AllGather) {
  for (size_t sendCount : {size_t{1}, size_t{999}, size_t{140000}}) {
    std::vector<float> in(sendCount), out(sendCount * static_cast<size_t>(gRanks), -1.f);
    for (size_t i = 0; i < sendCount; ++i) in[i] = inputOf(gRank, i);
    LOOM_OK(loomAllGather(in.data(), out.data(), sendCount, loomFloat32, gComm, nullptr));
    for (int r = 0; r < gRanks; ++r)
      for (size_t i = 0; i < sendCount; ++i)
        ASSERT_EQ(out[static_cast<size_t>(r) * sendCount + i], inputOf(r, i)) << "from rank " << r << ", element " << i;
  }
}

TEST(Collectives, SendRecvAroundTheRing) {
  const int next = (gRank + 1) % gRanks;
  const int prev = (gRank + gRanks - 1) % gRanks;
  for (size_t count : {size_t{0}, size_t{3}, size_t{500000}}) {
    std::vector<int32_t> out(count), in(count, -1);
    for (size_t i = 0; i < count; ++i) out[i] = intInputOf(gRank, i);
    LOOM_OK(loomGroupStart());
    LOOM_OK(loomSend(out.data(), count, loomInt32, next, gComm, nullptr));
    LOOM_OK(loomRecv(in.data(), count, loomInt32, prev, gComm, nullptr));
    LOOM_OK(loomGroupEnd());
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(in[i], intInputOf(prev, i)) << "count " << count << ", element " << i;
  }
}

// Each rank's own verdict is not enough: all must pass, so a failure anywhere
// fails this rank too (loomrun reports the first failing rank's status).
TEST(Collectives, ZZEveryRankPassed) {
  int32_t failed = ::testing::UnitTest::GetInstance()->failed_test_count() > 0 ? 1 : 0, anyFailed = 0;
  LOOM_OK(loomAllReduce(&failed, &anyFailed, 1, loomInt32, loomMax, gComm, nullptr));
  EXPECT_EQ(anyFailed, 0) << "a test failed on another rank";
}

using loom::testing::faults::Fault;
using loom::testing::faults::FaultCase;
using loom::testing::faults::FaultOutcome;

TEST(PeerKilled, SurvivorsGetRemoteErrorNamingTheRankBeforeTheDeadline) {
  ASSERT_STREQ(std::getenv("LOOM_TRANSPORT"), "ucx") << "run through ctest, which sets LOOM_TRANSPORT=ucx";
  FaultCase c;
  c.collective = "allreduce";
  c.fault = Fault::kKill;
  c.nranks = 3;
  c.victim = 2;
  c.timeoutSeconds = 20;
  c.count = 1 << 18;
  FaultOutcome o = loom::testing::faults::runFaultCase(c);
  ASSERT_EQ(o.setupError, "");
  EXPECT_TRUE(o.missing.empty()) << "survivors without a report: " << o.missing.size();
  ASSERT_EQ(o.reports.size(), 2u);
  for (const auto& rep : o.reports) {
    std::printf("rank %d failed %.3f s after the kill (destroy %.3f s): %s\n", rep.rank, rep.failedAfter,
                rep.destroySeconds, rep.message.c_str());
    EXPECT_EQ(rep.code, loomRemoteError) << rep.message;
    EXPECT_NE(rep.message.find("rank 2"), std::string::npos) << rep.message;
    EXPECT_LT(rep.failedAfter, 10.0) << "noticed too late: " << rep.message;
    EXPECT_EQ(rep.asyncCode, loomRemoteError);
    EXPECT_NE(rep.nextCallCode, loomSuccess);
    EXPECT_LT(rep.destroySeconds, 6.0);
    EXPECT_EQ(rep.fdsAfter, rep.fdsBefore) << "rank " << rep.rank << " leaked descriptors";
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const bool underLauncher = std::getenv("RANK") && std::getenv("WORLD_SIZE");
  if (underLauncher) {
    // Loom's INFO log for this rank, read back by EveryPeerIsServedByUcx.
    gLogPath = "/tmp/loom-ucx-test-" + std::to_string(::getpid()) + ".log";
    ::setenv("LOOM_DEBUG", "INFO", 1);
    ::setenv("LOOM_DEBUG_SUBSYS", "TRANSPORT", 1);
    ::setenv("LOOM_DEBUG_FILE", gLogPath.c_str(), 1);
    loomUniqueId id;
    if (loomGetUniqueIdFromEnv(&id, &gRank, &gRanks) != loomSuccess ||
        loomCommInitRank(&gComm, gRanks, id, gRank) != loomSuccess) {
      std::fprintf(stderr, "init failed: %s\n", loomGetLastError(nullptr));
      return 2;
    }
  } else {
    ::testing::GTEST_FLAG(filter) = ::testing::GTEST_FLAG(filter) + "-Collectives.*";
  }
  if (underLauncher) ::testing::GTEST_FLAG(filter) = ::testing::GTEST_FLAG(filter) + "-PeerKilled.*";
  int rc = RUN_ALL_TESTS();
  if (gComm) loomCommDestroy(gComm);
  if (!gLogPath.empty()) ::unlink(gLogPath.c_str());
  return rc;
}
