// Successful rendezvous: ranks as threads, as processes, over IPv6, on the
// default interface, and many communicators at once.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "bootstrap/sock_addr.h"
#include "tests/support/rank_threads.h"
#include "tests/unit/bootstrap/test_helpers.h"

namespace loom::bootstrap {
namespace {

using testing::quietLogger;
using testing::runRank;

// Ranks receive the id serialized, as through loomUniqueId.
UniqueId throughWire(const UniqueId& id) {
  char raw[kUniqueIdBytes];
  id.serialize(raw);
  Result<UniqueId> back = UniqueId::parse(raw);
  EXPECT_TRUE(back.isOk()) << back.status().message();
  return back.value();
}

void expectRendezvous(const UniqueId& id, int nranks, int salt) {
  std::vector<std::string> errors(nranks);
  loom::testing::runRankThreads(nranks, [&](int rank) { errors[rank] = runRank(id, rank, nranks, salt, 20); });
  for (int r = 0; r < nranks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r << " of " << nranks;
}

class RendezvousThreads : public ::testing::TestWithParam<int> {};

TEST_P(RendezvousThreads, AllGatherAndBarrier) {
  const int nranks = GetParam();
  Result<UniqueId> id = startRoot("127.0.0.1", 0, randomSecret(), 20, quietLogger());
  ASSERT_TRUE(id.isOk()) << id.status().message();
  EXPECT_EQ(id.value().rootHost, "127.0.0.1");
  EXPECT_NE(id.value().rootPort, 0);
  expectRendezvous(throughWire(id.value()), nranks, nranks);
}

INSTANTIATE_TEST_SUITE_P(Sizes, RendezvousThreads, ::testing::Values(1, 2, 3, 5, 8));

TEST(Rendezvous, ForkedRanks) {
  for (int nranks : {2, 4}) {
    Result<UniqueId> id = startRoot("127.0.0.1", 0, randomSecret(), 20, quietLogger());
    ASSERT_TRUE(id.isOk()) << id.status().message();
    const UniqueId rootId = throughWire(id.value());
    std::vector<int> codes = testing::runRankProcesses(
        nranks,
        [&](int rank) {
          std::string err = runRank(rootId, rank, nranks, 7, 20);
          if (err.empty()) return 0;
          std::fprintf(stderr, "rank %d: %s\n", rank, err.c_str());
          return 1;
        },
        30);
    for (int r = 0; r < nranks; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r << " of " << nranks;
  }
}

TEST(Rendezvous, ManyCommunicatorsAtOnce) {
  constexpr int kComms = 4;
  constexpr int kRanks = 3;
  std::vector<UniqueId> ids;
  for (int c = 0; c < kComms; ++c) {
    Result<UniqueId> id = startRoot("127.0.0.1", 0, randomSecret(), 20, quietLogger());
    ASSERT_TRUE(id.isOk()) << id.status().message();
    ids.push_back(id.value());
  }
  std::vector<std::string> errors(kComms * kRanks);
  loom::testing::runRankThreads(kComms * kRanks, [&](int t) {
    const int comm = t % kComms;
    const int rank = t / kComms;
    // Different salts per communicator: data crossing over would fail checks.
    errors[t] = runRank(ids[comm], rank, kRanks, 100 + comm, 20);
  });
  for (int t = 0; t < kComms * kRanks; ++t) EXPECT_EQ(errors[t], "") << "comm " << t % kComms;
}

TEST(Rendezvous, Ipv6Loopback) {
  Result<UniqueId> id = startRoot("::1", 0, randomSecret(), 20, quietLogger());
  if (!id.isOk()) GTEST_SKIP() << "no IPv6 loopback here: " << id.status().message();
  EXPECT_EQ(id.value().rootHost, "::1");
  expectRendezvous(throughWire(id.value()), 3, 3);
}

TEST(Rendezvous, EmptyHostUsesAnInterfaceAddress) {
  Result<UniqueId> id = startRoot("", 0, randomSecret(), 20, quietLogger());
  ASSERT_TRUE(id.isOk()) << id.status().message();
  EXPECT_EQ(id.value().rootHost, defaultHostAddress());
  Result<SockAddr> parsed = SockAddr::fromNumeric(id.value().rootHost, id.value().rootPort);
  ASSERT_TRUE(parsed.isOk());
  EXPECT_EQ(parsed.value().family(), AF_INET);
  // No rendezvous here: test traffic stays on loopback, and this address may
  // be a real interface.
}

TEST(Rendezvous, SingleRankNeedsNoRing) {
  Result<UniqueId> id = startRoot("127.0.0.1", 0, randomSecret(), 20, quietLogger());
  ASSERT_TRUE(id.isOk());
  WaitContext wait{Deadline::after(10)};
  auto b = Bootstrap::connect(id.value(), 0, 1, wait, quietLogger());
  ASSERT_TRUE(b.isOk()) << b.status().message();
  uint64_t value = 0x1122334455667788ull;
  ASSERT_TRUE(b.value()->allGather(&value, sizeof(value), wait).isOk());
  EXPECT_EQ(value, 0x1122334455667788ull);
  EXPECT_TRUE(b.value()->barrier(wait).isOk());
}

}  // namespace
}  // namespace loom::bootstrap
