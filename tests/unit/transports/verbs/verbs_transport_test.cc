// The verbs transport over the emulated fabric: setup, the chunk FIFO,
// credit flow control, error completions, peer death, abort and timeouts.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "tests/unit/transports/shm/shm_test_util.h"
#include "tests/support/local_bootstrap.h"
#include "tests/support/rank_threads.h"
#include "transports/verbs/verbs_transport.h"
#include "tests/unit/transports/transport_world.h"
#include "transports/verbs/emulated_verbs.h"

namespace loom::testing::verbs {
namespace {

using transports::Backend;
using transports::World;
using transports::connectWorld;
using transports::verbsConfig;
using transports::exchangeAll;

using transport::Protocol;
using transport::verbs::QpState;

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(VerbsSetup, EveryQueuePairReachesRtsAndTeardownReleasesAll) {
  const int n = 3;
  auto world = connectWorld(Backend::kVerbs, n, shm::uniqueJobTag(), verbsConfig(4096, 4));
  ASSERT_EQ(world.firstError(), "");
  auto fabric = world.fabric;
  EXPECT_EQ(fabric->liveQueuePairs(), n * (n - 1));
  EXPECT_EQ(fabric->liveMemoryRegions(), 2 * n * (n - 1)) << "a staging and a receive ring per link";
  for (int r = 0; r < n; ++r) {
    auto qps = fabric->queuePairsOf(r);
    ASSERT_EQ(qps.size(), static_cast<size_t>(n - 1));
    for (uint32_t qpn : qps) EXPECT_EQ(fabric->stateOf(qpn), QpState::kRts) << "rank " << r << " QP " << qpn;
    EXPECT_NE(world.transports[static_cast<size_t>(r)]->health(), nullptr);
    EXPECT_FALSE(world.transports[static_cast<size_t>(r)]->supports(Protocol::kLL));
  }
  world.transports.clear();
  EXPECT_EQ(fabric->liveQueuePairs(), 0);
  EXPECT_EQ(fabric->liveMemoryRegions(), 0);
}

// A bootstrap that fails every exchange: a single-host job must not use it.
class NoBootstrap final : public bootstrap::Bootstrap {
 public:
  int rank() const override { return 0; }
  int nranks() const override { return 2; }
  Status allGather(void*, size_t, const WaitContext&) override { return {Code::kInternalError, "unexpected exchange"}; }
  Status barrier(const WaitContext&) override { return {Code::kInternalError, "unexpected barrier"}; }
};

TEST(VerbsSetup, SingleHostJobDoesNotExchangeAnything) {
  auto fabric = transport::verbs::emulated::Fabric::create();
  std::vector<transport::PeerInfo> peers(2);
  for (int r = 0; r < 2; ++r) peers[static_cast<size_t>(r)].rank = r;  // equal host hashes
  Config config = verbsConfig(4096, 4);
  NoBootstrap boot;
  transport::SetupContext ctx;
  ctx.rank = 0;
  ctx.nranks = 2;
  ctx.peers = &peers;
  ctx.config = &config;
  ctx.bootstrap = &boot;
  ctx.wait = shm::waitFor(5);
  auto t = transport::createVerbsTransport(fabric->provider(0));
  Status s = t->connect(ctx, {});
  EXPECT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(fabric->liveQueuePairs(), 0);
  // Another forced transport also keeps verbs out.
  config.transport = "tcp";
  peers[1].hostHash = 7;
  auto t2 = transport::createVerbsTransport(fabric->provider(0));
  s = t2->connect(ctx, {});
  EXPECT_TRUE(s.isOk()) << s.message();
}

TEST(VerbsFifo, ChunksOfEverySizeArriveInOrderThroughWrapAround) {
  for (int n : {2, 3}) {
    const size_t chunk = 4096;
    auto world = connectWorld(Backend::kVerbs, n, shm::uniqueJobTag(), verbsConfig(chunk, 3));
    ASSERT_EQ(world.firstError(), "");
    std::atomic<int> zeros{0}, fulls{0};
    auto sizeOf = [&](int src, int dst, uint64_t c) {
      size_t s = shm::chunkSizeFor(src, dst, c, chunk);
      return s;
    };
    for (uint64_t c = 0; c < 200; ++c) {
      zeros += sizeOf(0, 1, c) == 0;
      fulls += sizeOf(0, 1, c) == chunk;
    }
    ASSERT_GT(zeros.load(), 0) << "the size pattern must include empty chunks";
    ASSERT_GT(fulls.load(), 0) << "the size pattern must include full chunks";
    auto problems = exchangeAll(world, 200, sizeOf, 20);
    for (int r = 0; r < n; ++r) EXPECT_EQ(problems[static_cast<size_t>(r)], "") << n << " ranks, rank " << r;
    EXPECT_EQ(world.fabric->rnrErrors(), 0u) << "a write found no posted receive";
  }
}

TEST(VerbsFifo, CreditsHoldTheSenderUntilTheReceiverReleases) {
  const int slots = 3;
  auto world = connectWorld(Backend::kVerbs, 2, shm::uniqueJobTag(), verbsConfig(1024, slots));
  ASSERT_EQ(world.firstError(), "");
  auto& tx = world.transports[0]->sendTo(1, Protocol::kSimple);
  auto& rx = world.transports[1]->recvFrom(0, Protocol::kSimple);
  std::byte* slot = nullptr;
  for (int c = 0; c < slots; ++c) {
    ASSERT_TRUE(tx.tryAcquire(&slot)) << "chunk " << c;
    std::memset(slot, 'a' + c, 1024);
    tx.commit(1024);
  }
  EXPECT_FALSE(tx.tryAcquire(&slot)) << "a sender without credits must not get a slot";
  // The receiver reads all chunks in place but keeps the last unreleased.
  const std::byte* data = nullptr;
  size_t bytes = 0;
  for (int c = 0; c < slots; ++c) {
    ASSERT_TRUE(rx.acquire(&data, &bytes, shm::waitFor(5)).isOk());
    ASSERT_EQ(bytes, 1024u);
    EXPECT_EQ(static_cast<char>(data[0]), 'a' + c);
    if (c + 1 < slots) rx.release();
  }
  // Two credits came back: exactly two more chunks fit.
  for (int c = 0; c < 2; ++c) {
    ASSERT_TRUE(tx.tryAcquire(&slot)) << "after release " << c;
    std::memset(slot, 'x', 1024);
    tx.commit(1024);
  }
  EXPECT_FALSE(tx.tryAcquire(&slot));
  // The unreleased chunk was not overwritten by the new ones.
  for (size_t i = 0; i < 1024; ++i) ASSERT_EQ(static_cast<char>(data[i]), 'a' + slots - 1) << "byte " << i;

  // A blocking acquire sleeps until the receiver releases, then resumes.
  std::atomic<bool> got{false};
  Status waited;
  std::thread sender([&] {
    std::byte* s = nullptr;
    waited = tx.acquire(&s, shm::waitFor(10));
    got = true;
    if (waited.isOk()) tx.commit(0);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_FALSE(got.load()) << "the sender got a slot without credit";
  rx.release();
  sender.join();
  EXPECT_TRUE(waited.isOk()) << waited.message();
  for (char want : {'x', 'x'}) {
    ASSERT_TRUE(rx.acquire(&data, &bytes, shm::waitFor(5)).isOk());
    EXPECT_EQ(static_cast<char>(data[0]), want);
    rx.release();
  }
  ASSERT_TRUE(rx.acquire(&data, &bytes, shm::waitFor(5)).isOk());
  EXPECT_EQ(bytes, 0u);
  rx.release();
  EXPECT_EQ(world.fabric->rnrErrors(), 0u);
}

TEST(VerbsErrors, BadRkeyFailsBothSidesNamingThePeer) {
  auto world = connectWorld(Backend::kVerbs, 2, shm::uniqueJobTag(), verbsConfig(1024, 2));
  ASSERT_EQ(world.firstError(), "");
  world.fabric->revokeRemoteAccess(1);
  auto& tx = world.transports[0]->sendTo(1, Protocol::kSimple);
  std::byte* slot = nullptr;
  ASSERT_TRUE(tx.acquire(&slot, shm::waitFor(5)).isOk());
  tx.commit(512);
  auto start = std::chrono::steady_clock::now();
  Status s = tx.acquire(&slot, shm::waitFor(10));
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.code(), Code::kRemoteError);
  EXPECT_NE(s.message().find("rank 1 (host host1)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("IBV_WC_REM_ACCESS_ERR"), std::string::npos) << s.message();
  EXPECT_LT(secondsSince(start), 2.0);
  // The responder's QP went to error too: its wait fails, naming rank 0.
  const std::byte* data = nullptr;
  size_t bytes = 0;
  Status r = world.transports[1]->recvFrom(0, Protocol::kSimple).acquire(&data, &bytes, shm::waitFor(10));
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.code(), Code::kRemoteError);
  EXPECT_NE(r.message().find("rank 0 (host host0)"), std::string::npos) << r.message();
  EXPECT_FALSE(world.transports[1]->health()->check().isOk());
}

TEST(VerbsErrors, DeadPeerFailsAWaitingReceiverWellBeforeTheDeadline) {
  auto world = connectWorld(Backend::kVerbs, 3, shm::uniqueJobTag(), verbsConfig(1024, 2));
  ASSERT_EQ(world.firstError(), "");
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    world.fabric->killDevice(0);
  });
  const std::byte* data = nullptr;
  size_t bytes = 0;
  auto start = std::chrono::steady_clock::now();
  Status s = world.transports[1]->recvFrom(0, Protocol::kSimple).acquire(&data, &bytes, shm::waitFor(15));
  killer.join();
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.code(), Code::kRemoteError) << s.message();
  EXPECT_NE(s.message().find("rank 0 (host host0)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("IBV_WC_RETRY_EXC_ERR"), std::string::npos) << s.message();
  EXPECT_LT(secondsSince(start), 3.0) << "found by the probe, not the 15 s deadline";
  // health() reports it for the communicator's other waits.
  Status h = world.transports[1]->health()->check();
  EXPECT_EQ(h.code(), Code::kRemoteError);
  // The link between the survivors still works.
  auto& tx = world.transports[1]->sendTo(2, Protocol::kSimple);
  std::byte* slot = nullptr;
  ASSERT_TRUE(tx.acquire(&slot, shm::waitFor(5)).isOk());
  slot[0] = std::byte{42};
  tx.commit(1);
  auto& rx = world.transports[2]->recvFrom(1, Protocol::kSimple);
  ASSERT_TRUE(rx.acquire(&data, &bytes, shm::waitFor(5)).isOk());
  EXPECT_EQ(bytes, 1u);
  EXPECT_EQ(data[0], std::byte{42});
  rx.release();
}

TEST(VerbsErrors, DeadReceiverFailsASenderWaitingForCredits) {
  auto world = connectWorld(Backend::kVerbs, 2, shm::uniqueJobTag(), verbsConfig(1024, 2));
  ASSERT_EQ(world.firstError(), "");
  auto& tx = world.transports[0]->sendTo(1, Protocol::kSimple);
  std::byte* slot = nullptr;
  for (int c = 0; c < 2; ++c) {
    ASSERT_TRUE(tx.acquire(&slot, shm::waitFor(5)).isOk());
    tx.commit(8);
  }
  world.fabric->killDevice(1);
  auto start = std::chrono::steady_clock::now();
  Status s = tx.acquire(&slot, shm::waitFor(15));
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.code(), Code::kRemoteError);
  EXPECT_NE(s.message().find("rank 1 (host host1)"), std::string::npos) << s.message();
  EXPECT_LT(secondsSince(start), 3.0);
}

TEST(VerbsWaits, AbortEndsAWaitPromptly) {
  auto world = connectWorld(Backend::kVerbs, 2, shm::uniqueJobTag(), verbsConfig(1024, 2));
  ASSERT_EQ(world.firstError(), "");
  std::atomic<bool> abort{false};
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    abort = true;
  });
  const std::byte* data = nullptr;
  size_t bytes = 0;
  auto start = std::chrono::steady_clock::now();
  Status s = world.transports[0]->recvFrom(1, Protocol::kSimple).acquire(&data, &bytes, shm::waitFor(15, &abort));
  aborter.join();
  EXPECT_EQ(s.code(), Code::kRemoteError) << s.message();
  EXPECT_NE(s.message().find("aborted"), std::string::npos) << s.message();
  EXPECT_LT(secondsSince(start), 1.0);
}

TEST(VerbsWaits, SilenceEndsInTimeoutNamingThePeer) {
  auto world = connectWorld(Backend::kVerbs, 2, shm::uniqueJobTag(), verbsConfig(1024, 2));
  ASSERT_EQ(world.firstError(), "");
  const std::byte* data = nullptr;
  size_t bytes = 0;
  auto start = std::chrono::steady_clock::now();
  Status s = world.transports[0]->recvFrom(1, Protocol::kSimple).acquire(&data, &bytes, shm::waitFor(0.3));
  double took = secondsSince(start);
  EXPECT_EQ(s.code(), Code::kTimeout) << s.message();
  EXPECT_NE(s.message().find("rank 1 (host host1)"), std::string::npos) << s.message();
  EXPECT_GE(took, 0.29);
  EXPECT_LT(took, 2.0);
}

TEST(VerbsErrors, OrderlyCloseIsReportedButIsNotAPeerFailure) {
  auto world = connectWorld(Backend::kVerbs, 2, shm::uniqueJobTag(), verbsConfig(1024, 2));
  ASSERT_EQ(world.firstError(), "");
  // A chunk committed just before destruction is still delivered.
  auto& tx = world.transports[0]->sendTo(1, Protocol::kSimple);
  std::byte* slot = nullptr;
  ASSERT_TRUE(tx.acquire(&slot, shm::waitFor(5)).isOk());
  slot[0] = std::byte{7};
  tx.commit(1);
  world.transports[0].reset();
  auto& rx = world.transports[1]->recvFrom(0, Protocol::kSimple);
  const std::byte* data = nullptr;
  size_t bytes = 0;
  ASSERT_TRUE(rx.acquire(&data, &bytes, shm::waitFor(5)).isOk());
  EXPECT_EQ(data[0], std::byte{7});
  rx.release();
  Status s = rx.acquire(&data, &bytes, shm::waitFor(5));
  EXPECT_EQ(s.code(), Code::kRemoteError);
  EXPECT_NE(s.message().find("closed its connection"), std::string::npos) << s.message();
  EXPECT_TRUE(world.transports[1]->health()->check().isOk());
}

TEST(VerbsFifo, MisuseIsReportedNotIgnored) {
  auto world = connectWorld(Backend::kVerbs, 2, shm::uniqueJobTag(), verbsConfig(1024, 2));
  ASSERT_EQ(world.firstError(), "");
  auto& tx = world.transports[0]->sendTo(1, Protocol::kSimple);
  tx.commit(10);  // without acquire
  std::byte* slot = nullptr;
  Status s = tx.acquire(&slot, shm::waitFor(1));
  EXPECT_EQ(s.code(), Code::kInternalError);
  EXPECT_NE(s.message().find("commit without acquire"), std::string::npos) << s.message();
  // Non-peers and other protocols get a connection that refuses.
  EXPECT_EQ(world.transports[0]->sendTo(0, Protocol::kSimple).acquire(&slot, shm::waitFor(1)).code(),
            Code::kInvalidUsage);
  EXPECT_EQ(world.transports[0]->sendTo(1, Protocol::kLL).acquire(&slot, shm::waitFor(1)).code(),
            Code::kInvalidUsage);
}

TEST(VerbsSetup, MismatchedChunkSizesFailOnEveryRank) {
  auto fabric = transport::verbs::emulated::Fabric::create();
  std::vector<transport::PeerInfo> peers(2);
  for (int r = 0; r < 2; ++r) {
    peers[static_cast<size_t>(r)].rank = r;
    peers[static_cast<size_t>(r)].hostHash = 10 + static_cast<uint64_t>(r);
  }
  std::vector<Config> configs = {verbsConfig(1024, 2), verbsConfig(2048, 2)};
  std::vector<Status> results(2);
  auto group = LocalBootstrapGroup::create(2);
  runRankThreads(2, [&](int rank) {
    LocalBootstrap boot(group, rank);
    transport::SetupContext ctx;
    ctx.rank = rank;
    ctx.nranks = 2;
    ctx.peers = &peers;
    ctx.config = &configs[static_cast<size_t>(rank)];
    ctx.bootstrap = &boot;
    ctx.wait = shm::waitFor(10);
    auto t = transport::createVerbsTransport(fabric->provider(rank));
    results[static_cast<size_t>(rank)] = t->connect(ctx, {1 - rank});
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(results[static_cast<size_t>(r)].isOk()) << "rank " << r;
    EXPECT_NE(results[static_cast<size_t>(r)].message().find("LOOM_CHUNK_SIZE"), std::string::npos)
        << results[static_cast<size_t>(r)].message();
  }
}

}  // namespace
}  // namespace loom::testing::verbs
