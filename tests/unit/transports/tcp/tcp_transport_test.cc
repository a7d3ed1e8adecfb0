// The TCP transport's connections over loopback, ranks as threads: ordered,
// intact delivery with many chunks (slots wrap thousands of times), 1, 2 and
// 4 sockets per peer, tiny and large chunks, 2 and 3 ranks; and waits that
// observe deadlines and the abort flag.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/unit/transports/shm/shm_test_util.h"
#include "tests/unit/transports/transport_world.h"

namespace loom::testing::tcp {
namespace {

using transports::Backend;
using transports::World;
using transports::connectWorld;
using transports::exchangeAll;
using transports::tcpConfig;

struct TrafficCase {
  const char* name;
  int nranks;
  int sockets;
  size_t chunkBytes;
  int slots;
  uint64_t chunks;
  int sizeMode;  // 0: varying in [0, chunkBytes], 1: full chunks, 2: 0..8 bytes
};

void PrintTo(const TrafficCase& tc, std::ostream* os) { *os << tc.name; }

class TcpTraffic : public ::testing::TestWithParam<TrafficCase> {};

TEST_P(TcpTraffic, EveryChunkArrivesIntactAndInOrder) {
  const TrafficCase& tc = GetParam();
  World world = connectWorld(Backend::kTcp, tc.nranks, shm::uniqueJobTag(), tcpConfig(tc.chunkBytes, tc.slots, tc.sockets));
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
    Loopback, TcpTraffic,
    ::testing::Values(TrafficCase{"np2_2socks_4k_wrap", 2, 2, 4096, 2, 3000, 0},
                      TrafficCase{"np2_1sock_4k", 2, 1, 4096, 4, 1000, 0},
                      TrafficCase{"np2_4socks_64k", 2, 4, 64 << 10, 4, 400, 0},
                      TrafficCase{"np3_4socks_16k_wrap", 3, 4, 16 << 10, 3, 600, 0},
                      TrafficCase{"np3_2socks_tiny", 3, 2, 4096, 2, 2000, 2},
                      TrafficCase{"np2_2socks_1m_large", 2, 2, 1 << 20, 4, 96, 1}),
    [](const ::testing::TestParamInfo<TrafficCase>& info) { return std::string(info.param.name); });

TEST(TcpConnection, BlockingAcquireDeliversAcrossThreads) {
  World world = connectWorld(Backend::kTcp, 2, shm::uniqueJobTag(), tcpConfig(8192, 2, 2));
  ASSERT_EQ(world.firstError(), "");
  constexpr uint64_t kChunks = 200;
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

TEST(TcpConnection, ReceiveWithNothingSentTimesOutNamingThePeer) {
  World world = connectWorld(Backend::kTcp, 2, shm::uniqueJobTag(), tcpConfig(4096, 2, 2));
  ASSERT_EQ(world.firstError(), "");
  const std::byte* data = nullptr;
  size_t bytes = 0;
  auto& conn = world.transports[1]->recvFrom(0, transport::Protocol::kSimple);
  EXPECT_FALSE(conn.tryAcquire(&data, &bytes));
  const auto start = std::chrono::steady_clock::now();
  Status s = conn.acquire(&data, &bytes, shm::waitFor(0.3));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(s.code(), Code::kTimeout) << s.message();
  EXPECT_NE(s.message().find("rank 0 (host host0"), std::string::npos) << s.message();
  EXPECT_GE(took, 0.25);
  EXPECT_LT(took, 2.0);
}

TEST(TcpConnection, AbortWakesAWaitingReceiver) {
  World world = connectWorld(Backend::kTcp, 2, shm::uniqueJobTag(), tcpConfig(4096, 2, 2));
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

TEST(TcpConnection, SenderBlocksWhenReceiverHoldsEverythingThenResumes) {
  // Small socket buffers are still megabytes, so push enough to fill them.
  World world = connectWorld(Backend::kTcp, 2, shm::uniqueJobTag(), tcpConfig(1 << 20, 2, 1));
  ASSERT_EQ(world.firstError(), "");
  auto& send = world.transports[0]->sendTo(1, transport::Protocol::kSimple);
  uint64_t committed = 0;
  for (;; ++committed) {
    std::byte* slot = nullptr;
    Status s = send.acquire(&slot, shm::waitFor(0.5));
    if (!s.isOk()) {
      EXPECT_EQ(s.code(), Code::kTimeout) << s.message();
      break;
    }
    shm::fillPattern(slot, 1 << 20, 0, 1, committed);
    send.commit(1 << 20);
    ASSERT_LT(committed, 1000u) << "the sender never ran out of room: no flow control";
  }
  EXPECT_GE(committed, 2u);
  // Draining the receiver lets everything through, in order.
  std::thread drain([&] {
    auto& recv = world.transports[1]->recvFrom(0, transport::Protocol::kSimple);
    for (uint64_t c = 0; c < committed + 1; ++c) {
      Status s = shm::recvPatternChunk(recv, 0, 1, c, 1 << 20, shm::waitFor(10));
      ASSERT_TRUE(s.isOk()) << "chunk " << c << ": " << s.message();
    }
  });
  Status s = shm::sendPatternChunk(send, 0, 1, committed, 1 << 20, shm::waitFor(10));
  EXPECT_TRUE(s.isOk()) << s.message();
  drain.join();
}

TEST(TcpConnection, UnconnectedPeerAndLLAreClearErrors) {
  World world = connectWorld(Backend::kTcp, 2, shm::uniqueJobTag(), tcpConfig(4096, 2, 2));
  ASSERT_EQ(world.firstError(), "");
  EXPECT_FALSE(world.transports[0]->supports(transport::Protocol::kLL));
  std::byte* slot = nullptr;
  Status s = world.transports[0]->sendTo(5, transport::Protocol::kSimple).acquire(&slot, shm::waitFor(1));
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  s = world.transports[0]->sendTo(1, transport::Protocol::kLL).acquire(&slot, shm::waitFor(1));
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
}

TEST(TcpConnection, NoMatchingInterfaceFailsEveryRankNamingTheSpec) {
  Config c = tcpConfig(4096, 2, 2);
  c.socketIfname = "=no-such-interface0";
  World world = connectWorld(Backend::kTcp, 2, shm::uniqueJobTag(), c);
  ASSERT_FALSE(world.statuses[0].isOk());
  ASSERT_FALSE(world.statuses[1].isOk());
  EXPECT_NE(world.statuses[0].message().find("no-such-interface0"), std::string::npos) << world.statuses[0].message();
}

}  // namespace
}  // namespace loom::testing::tcp
