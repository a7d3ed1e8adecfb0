// The UCX transport's connections, ranks as threads, over UCX's TCP
// (loopback) and shared-memory transports: ordered, intact delivery with many
// chunks (slots wrap thousands of times), tiny, zero-byte and large
// (rendezvous) chunks, 2 and 3 ranks; credit flow control; waits that observe
// deadlines and the abort flag; misconfiguration caught by the hello.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/unit/transports/shm/shm_test_util.h"
#include "transports/ucx/ucx_transport.h"
#include "tests/unit/transports/transport_world.h"

namespace loom::testing::ucx {
namespace {

using transports::Backend;
using transports::World;
using transports::connectWorld;
using transports::exchangeAll;
using transports::ucxConfig;
using transports::useUcxTransports;

struct TrafficCase {
  const char* name;
  const char* tls;  // "tcp" or "sm"
  int nranks;
  size_t chunkBytes;
  int slots;
  uint64_t chunks;
  int sizeMode;  // 0: varying in [0, chunkBytes], 1: full chunks, 2: 0..8 bytes
};

void PrintTo(const TrafficCase& tc, std::ostream* os) { *os << tc.name; }

class UcxTraffic : public ::testing::TestWithParam<TrafficCase> {};

TEST_P(UcxTraffic, EveryChunkArrivesIntactAndInOrder) {
  const TrafficCase& tc = GetParam();
  useUcxTransports(tc.tls);
  World world = connectWorld(Backend::kUcx, tc.nranks, shm::uniqueJobTag(), ucxConfig(tc.chunkBytes, tc.slots));
  ASSERT_EQ(world.firstError(), "");
  auto bytesOf = [&](int src, int dst, uint64_t chunk) -> size_t {
    if (tc.sizeMode == 1) return tc.chunkBytes;
    if (tc.sizeMode == 2) return static_cast<size_t>((chunk + static_cast<uint64_t>(src) * 3 + dst) % 9);
    return shm::chunkSizeFor(src, dst, chunk, tc.chunkBytes);
  };
  auto problems = exchangeAll(world, tc.chunks, bytesOf, 30);
  for (int r = 0; r < tc.nranks; ++r) EXPECT_EQ(problems[static_cast<size_t>(r)], "") << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(
    Ucx, UcxTraffic,
    ::testing::Values(TrafficCase{"tcp_np2_4k_wrap", "tcp", 2, 4096, 2, 2000, 0},
                      TrafficCase{"tcp_np3_16k_wrap", "tcp", 3, 16 << 10, 3, 400, 0},
                      TrafficCase{"tcp_np3_tiny", "tcp", 3, 4096, 2, 1500, 2},
                      TrafficCase{"tcp_np2_1m_rendezvous", "tcp", 2, 1 << 20, 4, 64, 1},
                      TrafficCase{"sm_np2_4k_wrap", "sm", 2, 4096, 2, 2000, 0},
                      TrafficCase{"sm_np3_64k_wrap", "sm", 3, 64 << 10, 3, 300, 0},
                      TrafficCase{"sm_np2_tiny", "sm", 2, 4096, 2, 1500, 2},
                      TrafficCase{"sm_np2_1m_rendezvous", "sm", 2, 1 << 20, 4, 64, 1}),
    [](const ::testing::TestParamInfo<TrafficCase>& info) { return std::string(info.param.name); });

class UcxConnection : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { useUcxTransports(GetParam()); }
};

TEST_P(UcxConnection, BlockingAcquireDeliversAcrossThreads) {
  World world = connectWorld(Backend::kUcx, 2, shm::uniqueJobTag(), ucxConfig(8192, 2));
  ASSERT_EQ(world.firstError(), "");
  constexpr uint64_t kChunks = 300;
  std::thread sender([&] {
    auto& conn = world.transports[0]->sendTo(1, transport::Protocol::kSimple);
    for (uint64_t c = 0; c < kChunks; ++c) {
      Status s = shm::sendPatternChunk(conn, 0, 1, c, shm::chunkSizeFor(0, 1, c, 8192), shm::waitFor(10));
      ASSERT_TRUE(s.isOk()) << s.message();
    }
  });
  auto& conn = world.transports[1]->recvFrom(0, transport::Protocol::kSimple);
  for (uint64_t c = 0; c < kChunks; ++c) {
    Status s = shm::recvPatternChunk(conn, 0, 1, c, shm::chunkSizeFor(0, 1, c, 8192), shm::waitFor(10));
    ASSERT_TRUE(s.isOk()) << s.message();
  }
  sender.join();
}

TEST_P(UcxConnection, CreditsStopTheSenderAtTwiceTheSlotsThenItResumes) {
  // The receiver never releases: its `slots` receives fill, the sender's
  // `slots` buffers fill with chunks it may not post, and acquire blocks.
  // Whatever UCX's eager/rendezvous choice, exactly 2 x slots get committed.
  constexpr int kSlots = 3;
  constexpr size_t kChunk = 2048;  // eager: only credits can stop the sender
  World world = connectWorld(Backend::kUcx, 2, shm::uniqueJobTag(), ucxConfig(kChunk, kSlots));
  ASSERT_EQ(world.firstError(), "");
  auto& send = world.transports[0]->sendTo(1, transport::Protocol::kSimple);
  uint64_t committed = 0;
  for (;; ++committed) {
    std::byte* slot = nullptr;
    Status s = send.acquire(&slot, shm::waitFor(0.5));
    if (!s.isOk()) {
      EXPECT_EQ(s.code(), Code::kTimeout) << s.message();
      EXPECT_NE(s.message().find("rank 1 (host host1)"), std::string::npos) << s.message();
      break;
    }
    shm::fillPattern(slot, kChunk, 0, 1, committed);
    send.commit(kChunk);
    ASSERT_LT(committed, 100u) << "the sender never ran out of room: no flow control";
  }
  EXPECT_EQ(committed, 2u * kSlots);
  std::thread drain([&] {
    auto& recv = world.transports[1]->recvFrom(0, transport::Protocol::kSimple);
    for (uint64_t c = 0; c < committed + 5; ++c) {
      Status s = shm::recvPatternChunk(recv, 0, 1, c, kChunk, shm::waitFor(10));
      ASSERT_TRUE(s.isOk()) << "chunk " << c << ": " << s.message();
    }
  });
  for (uint64_t c = committed; c < committed + 5; ++c) {
    Status s = shm::sendPatternChunk(send, 0, 1, c, kChunk, shm::waitFor(10));
    EXPECT_TRUE(s.isOk()) << s.message();
  }
  drain.join();
}

TEST_P(UcxConnection, ReceiveWithNothingSentTimesOutNamingThePeer) {
  World world = connectWorld(Backend::kUcx, 2, shm::uniqueJobTag(), ucxConfig(4096, 2));
  ASSERT_EQ(world.firstError(), "");
  const std::byte* data = nullptr;
  size_t bytes = 0;
  auto& conn = world.transports[1]->recvFrom(0, transport::Protocol::kSimple);
  EXPECT_FALSE(conn.tryAcquire(&data, &bytes));
  const auto start = std::chrono::steady_clock::now();
  Status s = conn.acquire(&data, &bytes, shm::waitFor(0.3));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(s.code(), Code::kTimeout) << s.message();
  EXPECT_NE(s.message().find("rank 0 (host host0) to rank 1 over ucx"), std::string::npos) << s.message();
  EXPECT_GE(took, 0.25);
  EXPECT_LT(took, 2.0);
}

TEST_P(UcxConnection, AbortWakesAWaitingReceiver) {
  World world = connectWorld(Backend::kUcx, 2, shm::uniqueJobTag(), ucxConfig(4096, 2));
  ASSERT_EQ(world.firstError(), "");
  std::atomic<bool> abort{false};
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    abort.store(true);
  });
  const std::byte* data = nullptr;
  size_t bytes = 0;
  const auto start = std::chrono::steady_clock::now();
  Status s = world.transports[0]->recvFrom(1, transport::Protocol::kSimple).acquire(&data, &bytes,
                                                                                     shm::waitFor(20, &abort));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  aborter.join();
  EXPECT_EQ(s.code(), Code::kRemoteError) << s.message();
  EXPECT_NE(s.message().find("aborted"), std::string::npos) << s.message();
  EXPECT_LT(took, 2.0);
}

TEST_P(UcxConnection, UnconnectedPeerAndLLAreClearErrors) {
  World world = connectWorld(Backend::kUcx, 2, shm::uniqueJobTag(), ucxConfig(4096, 2));
  ASSERT_EQ(world.firstError(), "");
  EXPECT_FALSE(world.transports[0]->supports(transport::Protocol::kLL));
  EXPECT_STREQ(world.transports[0]->name(), "ucx");
  std::byte* slot = nullptr;
  Status s = world.transports[0]->sendTo(5, transport::Protocol::kSimple).acquire(&slot, shm::waitFor(1));
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  s = world.transports[0]->sendTo(1, transport::Protocol::kLL).acquire(&slot, shm::waitFor(1));
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  ASSERT_NE(world.transports[0]->health(), nullptr);
  EXPECT_TRUE(world.transports[0]->health()->check().isOk());
}

TEST_P(UcxConnection, MismatchedChunkSizeFailsEveryRankAtTheHello) {
  World world = connectWorld(Backend::kUcx, 2, shm::uniqueJobTag(), ucxConfig(4096, 2), nullptr, [](int rank) { return ucxConfig(rank == 0 ? 4096 : 8192, 2); });
  ASSERT_FALSE(world.statuses[0].isOk());
  ASSERT_FALSE(world.statuses[1].isOk());
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(world.statuses[static_cast<size_t>(r)].message().find("LOOM_CHUNK_SIZE"), std::string::npos)
        << world.statuses[static_cast<size_t>(r)].message();
}

INSTANTIATE_TEST_SUITE_P(Tls, UcxConnection, ::testing::Values("tcp", "sm"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

TEST(UcxSelection, CanConnectFollowsLoomTransport) {
  transport::PeerInfo a, b, c;
  a.hostHash = 1;
  b.hostHash = 1;
  c.hostHash = 2;
  Config cfg;
  const auto& f = transport::ucxTransportFactory();
  EXPECT_STREQ(f.name, "ucx");
  EXPECT_FALSE(f.canConnect(a, b, cfg));  // same host: shared memory's
  EXPECT_TRUE(f.canConnect(a, c, cfg));   // other host
  cfg.transport = "ucx";
  EXPECT_TRUE(f.canConnect(a, b, cfg));
  cfg.transport = "tcp";
  EXPECT_FALSE(f.canConnect(a, c, cfg));
  cfg.transport = "shm";
  EXPECT_FALSE(f.canConnect(a, c, cfg));
}

}  // namespace
}  // namespace loom::testing::ucx
