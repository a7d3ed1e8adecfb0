// A byte flipped in a bootstrap message, by a proxy between a real rank and
// the real root: the damaged field is named on the rank that sent or received
// it and in the root's log, every other rank gets a clear error, all within
// bounded time, and nothing leaks.
//
// Byte positions (wire.h): frame header magic 0-3, version 4-5, type 6-7,
// length 8-11; Hello payload from 12: secret 12-27, rank 28-31, nranks
// 32-35, address family 36, port 37-38, address 39-54 (IPv4: 39-42, then
// padding), scope 55-58. AddressTable payload from 12: count 12-15, then
// 23-byte entries from 16 (family, port, address, scope).
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "bootstrap/wire.h"
#include "tests/faults/bootstrap/root_and_rank_threads.h"
#include "tests/faults/bootstrap/tcp_proxy.h"

namespace loom::bootstrap::testing {
namespace {

struct FlipCase {
  const char* field;
  ProxyFault::Direction direction;
  size_t offset;
  uint8_t mask;
  const char* expect;  // the words naming the damage
};

struct FlipResult {
  std::string rootAddress;
  std::string rootLog;
  std::string proxyAddress;
  std::vector<RankOutcome> ranks;  // rank 0 direct, rank 1 through the proxy
};

// Rank 0 connects directly, rank 1 through a proxy that applies the flip.
FlipResult runFlip(const FlipCase& c, double rootTimeout, double rankWait) {
  FlipResult out;
  TestRoot root = startTestRoot(rootTimeout);
  out.rootAddress = root.address;
  {
    TcpProxy proxy(rootAddress(root.id), {c.direction, ProxyFault::Kind::kFlipByte, c.offset, c.mask});
    UniqueId proxied = throughProxy(root.id, proxy.port());
    out.proxyAddress = rootAddress(proxied).toString();
    out.ranks = runRanks({root.id, proxied}, rankWait);
  }
  out.rootLog = root.log.text();
  return out;
}

std::vector<FlipResult> runFlipsConcurrently(const std::vector<FlipCase>& cases, double rootTimeout, double rankWait) {
  std::vector<FlipResult> results(cases.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < cases.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = runFlip(cases[i], rootTimeout, rankWait); });
  }
  for (auto& t : threads) t.join();
  return results;
}

TEST(BootstrapFaults, FlippedHelloFieldIsNamedOnTheRankAndInTheRootLog) {
  using D = ProxyFault::Direction;
  const std::vector<FlipCase> cases = {
      {"magic", D::kToServer, 0, 0x01, "bad frame magic"},
      {"version", D::kToServer, 4, 0x01, "wire version 0, this build speaks 1"},
      {"type", D::kToServer, 6, 0x02, "message type 3 where a hello was expected"},
      {"length", D::kToServer, 8, 0x01, "length 46 (limit 47)"},
      {"secret", D::kToServer, 12, 0x01, "did not present this job's secret"},
      {"rank", D::kToServer, 28, 0x80, "says rank 129, out of range [0, 2)"},
      {"nranks", D::kToServer, 35, 0x80, "says nranks -2147483646, out of range"},
      {"family", D::kToServer, 36, 0x01, "address family tag 5"},
      {"padding", D::kToServer, 50, 0x01, "IPv4 address with nonzero padding byte 11"},
  };
  const ResourceCounts before = ResourceCounts::now();
  const auto start = Clock::now();
  std::vector<FlipResult> results = runFlipsConcurrently(cases, /*rootTimeout=*/1.0, /*rankWait=*/5.0);
  EXPECT_LT(secondsSince(start), 4.0);
  for (size_t i = 0; i < cases.size(); ++i) {
    const FlipCase& c = cases[i];
    const FlipResult& r = results[i];
    ASSERT_EQ(r.ranks.size(), 2u);
    SCOPED_TRACE(c.field);
    // The damaged rank hears from the root what was wrong, at once.
    const RankOutcome& damaged = r.ranks[1];
    EXPECT_EQ(damaged.status.code(), Code::kRemoteError) << damaged.status.message();
    EXPECT_TRUE(contains(damaged.status.message(), c.expect)) << damaged.status.message();
    EXPECT_TRUE(contains(damaged.status.message(), "the root at " + r.rootAddress)) << damaged.status.message();
    EXPECT_LT(damaged.seconds, 1.0);
    // The healthy rank learns at the root's deadline which rank is missing.
    const RankOutcome& healthy = r.ranks[0];
    EXPECT_EQ(healthy.status.code(), Code::kTimeout) << healthy.status.message();
    EXPECT_EQ(healthy.status.message(),
              "bootstrap: rank 1 of 2 never reached the root at " + r.rootAddress + " within 1 s");
    EXPECT_GT(healthy.seconds, 0.8);
    EXPECT_LT(healthy.seconds, 3.0);
    // The root logged the connection it dropped and why.
    EXPECT_TRUE(contains(r.rootLog, c.expect)) << r.rootLog;
    EXPECT_TRUE(contains(r.rootLog, "bootstrap root at " + r.rootAddress + ": ")) << r.rootLog;
    EXPECT_TRUE(contains(r.rootLog, "dropping connection from 127.0.0.1:") || contains(r.rootLog, "rejecting 127.0.0.1:"))
        << r.rootLog;
  }
  // Roots exit at their deadline; each captured log keeps one descriptor.
  const ResourceCounts after = waitForCounts({before.fds + static_cast<int>(cases.size()), before.threads}, 3.0);
  EXPECT_LE(after.fds, before.fds + static_cast<int>(cases.size()));
  EXPECT_LE(after.threads, before.threads);
}

TEST(BootstrapFaults, FlippedAddressTableFieldIsNamedOnTheRank) {
  using D = ProxyFault::Direction;
  // The table for two IPv4 ranks: count at 12, entry 0 at 16, entry 1 at 39.
  const std::vector<FlipCase> cases = {
      {"magic", D::kToClient, 0, 0x01, "bad frame magic"},
      {"count", D::kToClient, 12, 0x01, "3 entries for 2 ranks"},
      {"family", D::kToClient, 39, 0x01, "address table entry 1: address family tag 5"},
      {"padding", D::kToClient, 16 + 3 + 4, 0x01, "address table entry 0: IPv4 address with nonzero padding byte 4"},
  };
  const ResourceCounts before = ResourceCounts::now();
  const auto start = Clock::now();
  std::vector<FlipResult> results = runFlipsConcurrently(cases, /*rootTimeout=*/10.0, /*rankWait=*/1.5);
  EXPECT_LT(secondsSince(start), 4.0);
  for (size_t i = 0; i < cases.size(); ++i) {
    const FlipCase& c = cases[i];
    const FlipResult& r = results[i];
    SCOPED_TRACE(c.field);
    const RankOutcome& damaged = r.ranks[1];
    EXPECT_FALSE(damaged.status.isOk());
    EXPECT_TRUE(contains(damaged.status.message(), c.expect)) << damaged.status.message();
    EXPECT_TRUE(contains(damaged.status.message(), "bootstrap: rank 1 of 2: ")) << damaged.status.message();
    EXPECT_LT(damaged.seconds, 1.0);
    // Rank 0 got a good table, but its ring neighbour gave up: it times out
    // (its own deadline) naming rank 1, or, if its ring hello reached rank 1
    // before rank 1 closed its sockets (slow runs, e.g. under ASan), it sees
    // that connection closed, also naming rank 1.
    const RankOutcome& healthy = r.ranks[0];
    EXPECT_TRUE(healthy.status.code() == Code::kTimeout || healthy.status.code() == Code::kRemoteError)
        << healthy.status.message();
    EXPECT_TRUE(contains(healthy.status.message(), "rank 1")) << healthy.status.message();
    EXPECT_LT(healthy.seconds, 3.0);
    // The root served both ranks and had nothing to complain about.
    EXPECT_EQ(r.rootLog, "");
  }
  const ResourceCounts after = waitForCounts({before.fds + static_cast<int>(cases.size()), before.threads}, 3.0);
  EXPECT_LE(after.fds, before.fds + static_cast<int>(cases.size()));
  EXPECT_LE(after.threads, before.threads);
}

// Rank 1 of 2 is played by hand: a clean rendezvous, then a ring hello with
// its rank field damaged. Rank 0 drops that connection (logged) and, when its
// deadline ends the wait for its predecessor, says what it dropped.
TEST(BootstrapFaults, FlippedRingHelloIsNamedWhenThePredecessorTimesOut) {
  const ResourceCounts before = ResourceCounts::now();
  TestRoot root = startTestRoot(/*timeout=*/10);
  CapturedLog rank0Log = captureLog();
  Status rank0;
  double rank0Seconds = 0;
  std::thread t0([&] {
    const auto start = Clock::now();
    auto b = Bootstrap::connect(root.id, 0, 2, WaitContext{Deadline::after(1.5)}, rank0Log.logger);
    rank0 = b.isOk() ? Status::ok() : b.status();
    rank0Seconds = secondsSince(start);
  });
  WaitContext wait{Deadline::after(5)};
  Result<HandPlayedRank> me = rendezvousByHand(root.id, 1, 2, wait);
  ASSERT_TRUE(me.isOk()) << me.status().message();
  Result<Socket> out = connectWithRetry(me.value().table[0], wait, "rank 0");
  ASSERT_TRUE(out.isOk()) << out.status().message();
  const std::string myAddress = localAddressOf(out.value().fd()).value().toString();
  const int damagedRank = 1 ^ 0x04;
  ASSERT_TRUE(sendFrame(out.value().fd(), MsgType::kRingHello, encodeRingHello({root.id.secret, damagedRank, 2}), wait,
                        "ring hello")
                  .isOk());
  t0.join();
  EXPECT_EQ(rank0.code(), Code::kTimeout);
  EXPECT_EQ(rank0.message(), "bootstrap: rank 0 of 2: timed out waiting for rank 1 (ring predecessor) to connect; 1 "
                             "connection(s) dropped meanwhile, the last from " +
                                 myAddress + ": it says it is rank 5, rank 1 was expected");
  EXPECT_GT(rank0Seconds, 1.3);
  EXPECT_LT(rank0Seconds, 2.5);
  EXPECT_TRUE(contains(rank0Log.text(), "bootstrap rank 0: dropping connection from " + myAddress +
                                            ": it says it is rank 5, rank 1 was expected"))
      << rank0Log.text();
  out.value().close();
  me.value().listener.close();
  const ResourceCounts after = waitForCounts({before.fds + 2, before.threads}, 3.0);
  EXPECT_LE(after.fds, before.fds + 2);  // the two captured logs
  EXPECT_LE(after.threads, before.threads);
}

}  // namespace
}  // namespace loom::bootstrap::testing
