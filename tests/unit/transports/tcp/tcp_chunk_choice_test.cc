// TCP's own Simple chunk (TransportFactory::preferredChunkBytes): 2 MiB unless
// LOOM_CHUNK_SIZE is given, and the rings hold such chunks end to end.
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/unit/transports/shm/shm_test_util.h"
#include "tests/unit/transports/transport_world.h"
#include "transports/tcp/tcp_transport.h"

namespace loom::testing::tcp {
namespace {

using transports::Backend;
using transports::World;
using transports::connectWorld;
using transports::exchangeAll;
using transports::tcpConfig;

constexpr size_t kTwoMiB = size_t{2} << 20;

size_t preferred(const Config& config) {
  const auto& factory = transport::tcpTransportFactory();
  EXPECT_NE(factory.preferredChunkBytes, nullptr) << "tcp states no chunk preference";
  return factory.preferredChunkBytes ? factory.preferredChunkBytes(config) : 0;
}

TEST(TcpChunkChoice, DefaultConfigAsksForTwoMiB) {
  Config config;
  ASSERT_FALSE(config.chunkBytesSet);
  EXPECT_EQ(preferred(config), kTwoMiB);
}

TEST(TcpChunkChoice, ExplicitChunkSizeWinsEvenWhenSmaller) {
  Config config;
  config.chunkBytes = 64 * 1024;
  config.chunkBytesSet = true;
  EXPECT_EQ(preferred(config), size_t{64 * 1024});
  config.chunkBytes = size_t{8} << 20;
  EXPECT_EQ(preferred(config), size_t{8} << 20);
}

TEST(TcpChunkChoice, FromEnvMarksAnExplicitChunkSize) {
  const char* old = std::getenv("LOOM_CHUNK_SIZE");
  const std::string saved = old ? old : "";
  unsetenv("LOOM_CHUNK_SIZE");
  EXPECT_FALSE(Config::fromEnv().chunkBytesSet);
  setenv("LOOM_CHUNK_SIZE", "128K", 1);
  Config set = Config::fromEnv();
  EXPECT_TRUE(set.chunkBytesSet);
  EXPECT_EQ(set.chunkBytes, size_t{128 * 1024});
  setenv("LOOM_CHUNK_SIZE", "not-a-size", 1);
  EXPECT_FALSE(Config::fromEnv().chunkBytesSet) << "a value that does not parse keeps the default";
  if (old) setenv("LOOM_CHUNK_SIZE", saved.c_str(), 1);
  else unsetenv("LOOM_CHUNK_SIZE");
}

// The communicator hands TCP the agreed chunk; full 2 MiB chunks (a ring of
// 2 slots under the 4 MiB budget, more than the socket buffers take at once)
// must cross intact and in order, several times around the ring.
TEST(TcpChunkChoice, FullTwoMiBChunksCrossIntact) {
  World world = connectWorld(Backend::kTcp, 2, shm::uniqueJobTag(), tcpConfig(kTwoMiB, 4, 2));
  ASSERT_EQ(world.firstError(), "");
  EXPECT_EQ(world.transports[0]->sendTo(1, transport::Protocol::kSimple).chunkBytes(), kTwoMiB);
  EXPECT_EQ(world.transports[1]->recvFrom(0, transport::Protocol::kSimple).chunkBytes(), kTwoMiB);
  auto results = exchangeAll(world, 7, [](int, int, uint64_t chunk) { return chunk % 3 ? kTwoMiB : kTwoMiB - 64; }, 30);
  for (size_t r = 0; r < results.size(); ++r) EXPECT_EQ(results[r], "") << "rank " << r;
}

}  // namespace
}  // namespace loom::testing::tcp
