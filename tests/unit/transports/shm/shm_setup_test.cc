// Setup and misuse of the shared-memory transport: every failure is a Status
// that names what went wrong, on every rank, and nothing is left behind.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/support/local_bootstrap.h"
#include "tests/support/rank_threads.h"
#include "transports/shm/shm_transport.h"
#include "tests/unit/transports/shm/shm_test_util.h"
#include "tests/unit/transports/transport_world.h"

namespace loom::testing::shm {
namespace {

using transports::Backend;
using transports::World;
using transports::connectWorld;

bool contains(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

TEST(ShmSetup, MismatchedChunkSizesFailOnEveryRank) {
  std::string tag = uniqueJobTag();
  Config base = smallConfig(4096, 4);
  World w = connectWorld(Backend::kShm, 2, tag, base, [](int r) { return std::vector<int>{1 - r}; }, [&](int r) {
    Config c = base;
    if (r == 1) c.chunkBytes = 8192;
    return c;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(w.statuses[r].code(), Code::kInvalidUsage) << w.statuses[r].message();
    EXPECT_TRUE(contains(w.statuses[r], "LOOM_CHUNK_SIZE")) << w.statuses[r].message();
  }
  EXPECT_TRUE(leftoverSegments(tag).empty());
}

TEST(ShmSetup, AsymmetricPeersAreReported) {
  std::string tag = uniqueJobTag();
  // Rank 0 expects to talk to rank 1, but rank 1 serves nobody.
  World w = connectWorld(Backend::kShm, 2, tag, smallConfig(), [](int r) { return r == 0 ? std::vector<int>{1} : std::vector<int>{}; });
  EXPECT_FALSE(w.statuses[0].isOk());
  EXPECT_TRUE(contains(w.statuses[0], "segment /dev/shm/loom-" + tag + "-1 of peer rank 1")) << w.statuses[0].message();
  EXPECT_EQ(w.statuses[1].code(), Code::kRemoteError);
  EXPECT_TRUE(contains(w.statuses[1], "rank(s) 0")) << w.statuses[1].message();
  EXPECT_TRUE(leftoverSegments(tag).empty());

  // Rank 1 has a segment, but no FIFO for rank 0.
  std::string tag3 = uniqueJobTag();
  World w3 = connectWorld(Backend::kShm, 3, tag3, smallConfig(), [](int r) {
    return r == 0 ? std::vector<int>{1, 2} : r == 1 ? std::vector<int>{2} : std::vector<int>{0, 1};
  });
  EXPECT_EQ(w3.statuses[0].code(), Code::kInvalidUsage);
  EXPECT_TRUE(contains(w3.statuses[0], "peer rank 1 does not expect chunks from rank 0")) << w3.statuses[0].message();
  EXPECT_TRUE(contains(w3.statuses[2], "rank(s) 0")) << w3.statuses[2].message();
  EXPECT_TRUE(leftoverSegments(tag3).empty());
}

TEST(ShmSetup, BadPeerListFailsLocallyAndRemotely) {
  std::string tag = uniqueJobTag();
  World w = connectWorld(Backend::kShm, 3, tag, smallConfig(), [](int r) {
    return r == 2 ? std::vector<int>{0, 0, 1} : allPeersOf(r, 3);
  });
  EXPECT_EQ(w.statuses[2].code(), Code::kInvalidArgument);
  EXPECT_TRUE(contains(w.statuses[2], "peer rank 0 listed twice on rank 2")) << w.statuses[2].message();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(w.statuses[r].code(), Code::kRemoteError) << w.statuses[r].message();
    EXPECT_TRUE(contains(w.statuses[r], "rank(s) 2")) << w.statuses[r].message();
  }
  EXPECT_TRUE(leftoverSegments(tag).empty());

  World out = connectWorld(Backend::kShm, 2, uniqueJobTag(), smallConfig(), [](int r) { return std::vector<int>{r == 0 ? 5 : 0}; });
  EXPECT_TRUE(contains(out.statuses[0], "peer rank 5 out of range [0, 2)")) << out.statuses[0].message();
}

TEST(ShmSetup, ExistingSegmentNameIsAClearError) {
  std::string tag = uniqueJobTag();
  std::string name = "/loom-" + tag + "-1";
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  World w = connectWorld(Backend::kShm, 2, tag, smallConfig(), [](int r) { return std::vector<int>{1 - r}; });
  ::shm_unlink(name.c_str());
  EXPECT_EQ(w.statuses[1].code(), Code::kSystemError);
  EXPECT_TRUE(contains(w.statuses[1], "/dev/shm" + name + " of rank 1 already exists")) << w.statuses[1].message();
  EXPECT_TRUE(contains(w.statuses[0], "rank(s) 1")) << w.statuses[0].message();
  EXPECT_TRUE(leftoverSegments(tag).empty());
}

TEST(ShmSetup, MissingDirectoryNamesPathAndErrno) {
  Config cfg = smallConfig();
  cfg.shmDir = "/nonexistent-loom-dir";
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), cfg, [](int r) { return std::vector<int>{1 - r}; });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(w.statuses[r].code(), Code::kSystemError);
    EXPECT_TRUE(contains(w.statuses[r], "cannot create segment /nonexistent-loom-dir/loom-")) << w.statuses[r].message();
    EXPECT_TRUE(contains(w.statuses[r], "No such file or directory")) << w.statuses[r].message();
  }
}

TEST(ShmSetup, InvalidConfigIsRejected) {
  Config cfg = smallConfig();
  cfg.fifoSlots = 0;
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), cfg, [](int r) { return std::vector<int>{1 - r}; });
  EXPECT_EQ(w.statuses[0].code(), Code::kInvalidArgument);
  EXPECT_TRUE(contains(w.statuses[0], "LOOM_SHM_SLOTS")) << w.statuses[0].message();
  World noTag = connectWorld(Backend::kShm, 2, "", smallConfig(), [](int r) { return std::vector<int>{1 - r}; });
  EXPECT_TRUE(contains(noTag.statuses[1], "job tag")) << noTag.statuses[1].message();
}

TEST(ShmSetup, InconsistentSetupContextIsRejected) {
  Config cfg = smallConfig();
  transport::SetupContext ctx;
  ctx.rank = 0;
  ctx.nranks = 2;
  ctx.jobTag = uniqueJobTag();
  ctx.config = &cfg;
  auto t = transport::shmTransportFactory().create();
  Status s = t->connect(ctx, {1});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_TRUE(contains(s, "bootstrap is null")) << s.message();

  LocalBootstrap other(LocalBootstrapGroup::create(3), 1);
  ctx.bootstrap = &other;
  s = t->connect(ctx, {1});
  EXPECT_TRUE(contains(s, "says rank 0 of 2 but its bootstrap says rank 1 of 3")) << s.message();
  ctx.rank = 2;
  s = t->connect(ctx, {1});
  EXPECT_TRUE(contains(s, "rank 2 out of range [0, 2)")) << s.message();
}

// One rank may serve itself: it writes into and reads from its own segment.
TEST(ShmSetup, SelfConnectionLoopsBack) {
  World w = connectWorld(Backend::kShm, 1, uniqueJobTag(), smallConfig(1024, 2), [](int) { return std::vector<int>{0}; });
  ASSERT_TRUE(w.allOk()) << w.firstError();
  WaitContext wait = waitFor(5);
  for (uint64_t c = 0; c < 10; ++c) {
    ASSERT_TRUE(sendPatternChunk(w.transports[0]->sendTo(0, transport::Protocol::kSimple), 0, 0, c, chunkSizeFor(0, 0, c, 1024), wait).isOk());
    Status s = recvPatternChunk(w.transports[0]->recvFrom(0, transport::Protocol::kSimple), 0, 0, c, chunkSizeFor(0, 0, c, 1024), wait);
    ASSERT_TRUE(s.isOk()) << s.message();
  }
}

// A ring: each rank serves only its neighbours; others get a clear error.
TEST(ShmSetup, SparsePeersConnectOnlyThoseListed) {
  constexpr int n = 5;
  World w = connectWorld(Backend::kShm, n, uniqueJobTag(), smallConfig(512, 2), [](int r) {
    return std::vector<int>{(r + 1) % n, (r + n - 1) % n};
  });
  ASSERT_TRUE(w.allOk()) << w.firstError();
  std::vector<Status> results(n);
  runRankThreads(n, [&](int r) {
    WaitContext wait = waitFor(10);
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    for (uint64_t c = 0; c < 30 && results[r].isOk(); ++c) {
      results[r] = sendPatternChunk(w.transports[r]->sendTo(next, transport::Protocol::kSimple), r, next, c, chunkSizeFor(r, next, c, 512), wait);
      if (results[r].isOk())
        results[r] = recvPatternChunk(w.transports[r]->recvFrom(prev, transport::Protocol::kSimple), prev, r, c, chunkSizeFor(prev, r, c, 512), wait);
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_TRUE(results[r].isOk()) << results[r].message();
  std::byte* slot = nullptr;
  Status s = w.transports[0]->sendTo(2, transport::Protocol::kSimple).acquire(&slot, waitFor(1));
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_TRUE(contains(s, "rank 0 has no connection to rank 2")) << s.message();
  const std::byte* data = nullptr;
  size_t bytes = 0;
  EXPECT_EQ(w.transports[0]->recvFrom(-1, transport::Protocol::kSimple).acquire(&data, &bytes, waitFor(1)).code(), Code::kInvalidUsage);
  EXPECT_EQ(w.transports[0]->recvFrom(n, transport::Protocol::kSimple).acquire(&data, &bytes, waitFor(1)).code(), Code::kInvalidUsage);
}

TEST(ShmSetup, UnconnectedTransportAndSecondConnectAreUsageErrors) {
  auto fresh = transport::shmTransportFactory().create();
  std::byte* slot = nullptr;
  EXPECT_EQ(fresh->sendTo(0, transport::Protocol::kSimple).acquire(&slot, waitFor(1)).code(), Code::kInvalidUsage);

  World w = connectWorld(Backend::kShm, 1, uniqueJobTag(), smallConfig(), [](int) { return std::vector<int>{0}; });
  ASSERT_TRUE(w.allOk()) << w.firstError();
  Config cfg = smallConfig();
  transport::SetupContext ctx;
  ctx.jobTag = uniqueJobTag();
  ctx.config = &cfg;
  Status again = w.transports[0]->connect(ctx, {0});
  EXPECT_EQ(again.code(), Code::kInvalidUsage);
  // The first connection still works.
  EXPECT_TRUE(sendPatternChunk(w.transports[0]->sendTo(0, transport::Protocol::kSimple), 0, 0, 1, 3, waitFor(1)).isOk());
  EXPECT_TRUE(recvPatternChunk(w.transports[0]->recvFrom(0, transport::Protocol::kSimple), 0, 0, 1, 3, waitFor(1)).isOk());
}

TEST(ShmSetup, CommitOrReleaseWithoutAcquireIsReportedByNextAcquire) {
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), smallConfig(1024, 2), [](int r) { return std::vector<int>{1 - r}; });
  ASSERT_TRUE(w.allOk()) << w.firstError();
  transport::SendConnection& tx = w.transports[0]->sendTo(1, transport::Protocol::kSimple);
  transport::RecvConnection& rx = w.transports[1]->recvFrom(0, transport::Protocol::kSimple);
  tx.commit(10);
  std::byte* slot = nullptr;
  Status s = tx.acquire(&slot, waitFor(1));
  EXPECT_EQ(s.code(), Code::kInternalError);
  EXPECT_TRUE(contains(s, "commit without acquire")) << s.message();
  rx.release();
  const std::byte* data = nullptr;
  size_t bytes = 0;
  Status r = rx.acquire(&data, &bytes, waitFor(1));
  EXPECT_TRUE(contains(r, "release without acquire")) << r.message();

  transport::SendConnection& tx2 = w.transports[1]->sendTo(0, transport::Protocol::kSimple);
  ASSERT_TRUE(tx2.acquire(&slot, waitFor(1)).isOk());
  tx2.commit(1025);
  EXPECT_TRUE(contains(tx2.acquire(&slot, waitFor(1)), "exceeds the chunk size 1024"));
  // Nothing was published by the rejected commits.
  EXPECT_EQ(w.transports[0]->recvFrom(1, transport::Protocol::kSimple).acquire(&data, &bytes, waitFor(0.05)).code(), Code::kTimeout);
}

TEST(LocalBootstrap, AllGatherDeliversEverySlotAndTimesOutNamingMissingRanks) {
  auto group = LocalBootstrapGroup::create(4);
  std::vector<std::vector<int>> out(4, std::vector<int>(4 * 2));
  std::vector<Status> st(4);
  runRankThreads(4, [&](int r) {
    LocalBootstrap boot(group, r);
    for (int round = 0; round < 50 && st[r].isOk(); ++round) {
      out[r][2 * r] = r * 100 + round;
      out[r][2 * r + 1] = -r;
      st[r] = boot.allGather(out[r].data(), 2 * sizeof(int), waitFor(10));
      for (int q = 0; q < 4 && st[r].isOk(); ++q)
        if (out[r][2 * q] != q * 100 + round || out[r][2 * q + 1] != -q)
          st[r] = Status(Code::kInternalError, "wrong slot");
    }
  });
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(st[r].isOk()) << st[r].message();

  auto lonely = LocalBootstrapGroup::create(3);
  LocalBootstrap boot(lonely, 1);
  Status s = boot.barrier(waitFor(0.05));
  EXPECT_EQ(s.code(), Code::kRemoteError);
  EXPECT_TRUE(contains(s, "rank(s) 0, 2")) << s.message();
}

}  // namespace
}  // namespace loom::testing::shm
