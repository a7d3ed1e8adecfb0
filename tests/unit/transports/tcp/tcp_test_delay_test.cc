// LOOM_TCP_TEST_DELAY_US (Config::tcpTestDelayMicros), the multi-host test
// bed's stand-in for netem: every chunk reaches the peer no earlier than the
// delay after its commit, and chunks in flight are delayed together (the
// delay is latency, not a cap on bandwidth).
#include <gtest/gtest.h>

#include <chrono>

#include "common/wait.h"
#include "tests/unit/transports/shm/shm_test_util.h"
#include "tests/unit/transports/transport_world.h"

namespace loom::testing::tcp {
namespace {

using transports::Backend;
using transports::World;
using transports::connectWorld;
using transports::exchangeAll;
using transports::tcpConfig;

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

WaitContext waitFor(double seconds) {
  WaitContext w;
  w.deadline = Deadline::after(seconds);
  return w;
}

// Commits `chunks` chunks from rank 0 to rank 1 at once, then returns the
// seconds until rank 1 has all of them.
double deliverySeconds(World& world, int chunks) {
  auto& send = world.transports[0]->sendTo(1, transport::Protocol::kSimple);
  auto& recv = world.transports[1]->recvFrom(0, transport::Protocol::kSimple);
  const auto start = Clock::now();
  for (int c = 0; c < chunks; ++c) {
    std::byte* slot = nullptr;
    EXPECT_TRUE(send.acquire(&slot, waitFor(10)).isOk());
    slot[0] = static_cast<std::byte>(c);
    send.commit(64);
  }
  for (int c = 0; c < chunks; ++c) {
    const std::byte* data = nullptr;
    size_t bytes = 0;
    EXPECT_TRUE(recv.acquire(&data, &bytes, waitFor(10)).isOk());
    EXPECT_EQ(bytes, 64u);
    EXPECT_EQ(data[0], static_cast<std::byte>(c));
    recv.release();
  }
  return secondsSince(start);
}

TEST(TcpTestDelay, EveryChunkIsHeldForTheDelayAndChunksStayPipelined) {
  constexpr int kDelayUs = 100000;  // 0.1 s: far above scheduling noise
  constexpr int kChunks = 8;
  Config config = tcpConfig(4096, kChunks, 2);
  config.tcpTestDelayMicros = kDelayUs;
  World world = connectWorld(Backend::kTcp, 2, shm::uniqueJobTag(), config);
  ASSERT_EQ(world.firstError(), "");
  const double one = deliverySeconds(world, 1);
  EXPECT_GE(one, kDelayUs * 1e-6);
  // Eight chunks committed together arrive about one delay later, not eight.
  const double eight = deliverySeconds(world, kChunks);
  EXPECT_GE(eight, kDelayUs * 1e-6);
  EXPECT_LT(eight, 4 * kDelayUs * 1e-6) << "chunks were delayed one after another";
}

TEST(TcpTestDelay, OffByDefault) {
  Config config = tcpConfig(4096, 4, 1);
  EXPECT_EQ(config.tcpTestDelayMicros, 0);
  World world = connectWorld(Backend::kTcp, 2, shm::uniqueJobTag(), config);
  ASSERT_EQ(world.firstError(), "");
  EXPECT_LT(deliverySeconds(world, 1), 0.09);  // well below the delayed case's 0.1 s
}

}  // namespace
}  // namespace loom::testing::tcp
