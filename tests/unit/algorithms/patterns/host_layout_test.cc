// HostLayout from host keys, and the ring order it gives: every layout,
// grouped or interleaved, yields a ring whose hosts are contiguous (it
// crosses between hosts exactly nHosts times), the identity when the ranks
// are already grouped, and rails of one rank per host with equal local index.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/patterns/host_layout.h"
#include "algorithms/patterns/ring_order.h"

namespace loom::algo {
namespace {

// "AABB" -> keys of rank 0..3.
std::vector<uint64_t> keysOf(const std::string& hosts) {
  std::vector<uint64_t> keys;
  for (char c : hosts) keys.push_back(0x1000 + static_cast<uint64_t>(c));
  return keys;
}

int crossings(const HostLayout& l) {
  int n = 0;
  for (int p = 0; p < l.nranks; ++p)
    n += l.hostOf[static_cast<size_t>(l.ringOrder[static_cast<size_t>(p)])] !=
                 l.hostOf[static_cast<size_t>(l.ringOrder[static_cast<size_t>((p + 1) % l.nranks)])]
             ? 1
             : 0;
  return n;
}

TEST(HostLayout, GroupedRanksKeepTheIdentityRing) {
  const HostLayout l = HostLayout::fromHostKeys(keysOf("AABB"), 2);
  EXPECT_EQ(l.nHosts(), 2);
  EXPECT_EQ(l.hostOf, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(l.localRankOf, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(l.ranksOn, (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  EXPECT_TRUE(l.ringIsIdentity());
  EXPECT_TRUE(l.uniform());
  EXPECT_EQ(l.host(), 1);
  EXPECT_EQ(l.localRank(), 0);
  EXPECT_EQ(l.localRanks(), (std::vector<int>{2, 3}));
  EXPECT_EQ(l.rail, (std::vector<int>{0, 2}));
  EXPECT_EQ(crossings(l), 2);
}

TEST(HostLayout, InterleavedRanksAreGroupedInTheRing) {
  const HostLayout l = HostLayout::fromHostKeys(keysOf("ABAB"), 3);
  EXPECT_EQ(l.hostOf, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(l.ranksOn, (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
  EXPECT_EQ(l.ringOrder, (std::vector<int>{0, 2, 1, 3}));
  EXPECT_EQ(l.ringPosition, (std::vector<int>{0, 2, 1, 3}));
  EXPECT_FALSE(l.ringIsIdentity());
  EXPECT_EQ(l.localRank(), 1);
  EXPECT_EQ(l.rail, (std::vector<int>{2, 3}));
  EXPECT_EQ(crossings(l), 2);  // the rank-order ring would cross 4 times
}

TEST(HostLayout, HostsNumberedByFirstRank) {
  const HostLayout l = HostLayout::fromHostKeys(keysOf("CABCAB"), 0);
  EXPECT_EQ(l.nHosts(), 3);
  EXPECT_EQ(l.ranksOn, (std::vector<std::vector<int>>{{0, 3}, {1, 4}, {2, 5}}));
  EXPECT_EQ(l.ringOrder, (std::vector<int>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(l.rail, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(crossings(l), 3);
}

TEST(HostLayout, UnevenHostsHaveNoRails) {
  const HostLayout l = HostLayout::fromHostKeys(keysOf("ABA"), 1);
  EXPECT_FALSE(l.uniform());
  EXPECT_EQ(l.maxRanksPerHost(), 2);
  EXPECT_TRUE(l.rail.empty());
  EXPECT_EQ(l.ringOrder, (std::vector<int>{0, 2, 1}));
  EXPECT_EQ(crossings(l), 2);
}

TEST(HostLayout, OneHostAndOneRank) {
  const HostLayout one = HostLayout::fromHostKeys(keysOf("AAA"), 1);
  EXPECT_EQ(one.nHosts(), 1);
  EXPECT_TRUE(one.ringIsIdentity());
  EXPECT_EQ(crossings(one), 0);
  const HostLayout alone = HostLayout::fromHostKeys(keysOf("A"), 0);
  EXPECT_EQ(alone.nHosts(), 1);
  EXPECT_EQ(alone.rail, (std::vector<int>{0}));
}

// Every layout of up to 7 ranks over up to 3 hosts: the ring is a
// permutation, position and order are inverse, crossings == nHosts (> 1), and
// each host's ranks appear in rank order.
TEST(HostLayout, EveryLayoutGivesAMinimalCrossingRing) {
  for (int n = 1; n <= 7; ++n) {
    int layouts = 1;
    for (int i = 0; i < n; ++i) layouts *= 3;
    for (int code = 0; code < layouts; ++code) {
      std::string hosts;
      for (int i = 0, c = code; i < n; ++i, c /= 3) hosts += static_cast<char>('A' + c % 3);
      for (int rank = 0; rank < n; ++rank) {
        const HostLayout l = HostLayout::fromHostKeys(keysOf(hosts), rank);
        SCOPED_TRACE(hosts + " rank " + std::to_string(rank));
        std::set<int> seen(l.ringOrder.begin(), l.ringOrder.end());
        ASSERT_EQ(static_cast<int>(seen.size()), n);
        for (int r = 0; r < n; ++r)
          ASSERT_EQ(l.ringOrder[static_cast<size_t>(l.ringPosition[static_cast<size_t>(r)])], r);
        ASSERT_EQ(crossings(l), l.nHosts() > 1 ? l.nHosts() : 0);
        for (int r = 0; r < n; ++r)
          ASSERT_EQ(l.ranksOn[static_cast<size_t>(l.hostOf[static_cast<size_t>(r)])]
                             [static_cast<size_t>(l.localRankOf[static_cast<size_t>(r)])],
                    r);
        bool grouped = true;  // hosts appear as contiguous runs in rank order
        for (int r = 1; r < n; ++r)
          grouped = grouped && l.hostOf[static_cast<size_t>(r)] >= l.hostOf[static_cast<size_t>(r - 1)];
        ASSERT_EQ(l.ringIsIdentity(), grouped);
        if (l.uniform()) {
          ASSERT_EQ(l.rail.size(), static_cast<size_t>(l.nHosts()));
          for (int h = 0; h < l.nHosts(); ++h) {
            const int peer = l.rail[static_cast<size_t>(h)];
            ASSERT_EQ(l.hostOf[static_cast<size_t>(peer)], h);
            ASSERT_EQ(l.localRankOf[static_cast<size_t>(peer)], l.localRank());
          }
        }
      }
    }
  }
}

TEST(RingOrder, FollowsTheLayoutOnlyWhenItDescribesThisContext) {
  const HostLayout l = HostLayout::fromHostKeys(keysOf("ABAB"), 2);
  AlgoContext ctx;
  ctx.rank = 2;
  ctx.nranks = 4;
  ctx.hosts = &l;
  const RingOrder order(ctx.rank, ctx.nranks, ctx.hosts);
  EXPECT_EQ(order.position(), 1);
  EXPECT_EQ(order.next(), 1);
  EXPECT_EQ(order.prev(), 0);
  EXPECT_EQ(order.rankAt(-1), 3);
  EXPECT_EQ(order.rankAt(5), 2);
  AlgoContext none = ctx;
  none.hosts = nullptr;  // no layout: rank order
  const RingOrder plain(none.rank, none.nranks, none.hosts);
  EXPECT_EQ(plain.position(), 2);
  EXPECT_EQ(plain.next(), 3);
  EXPECT_EQ(plain.prev(), 1);
}

}  // namespace
}  // namespace loom::algo
