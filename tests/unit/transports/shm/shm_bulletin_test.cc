// The shared-memory bulletin (transports/shm/shm_bulletin.h): rounds of
// messages between rank threads over bulletins in this process's heap (so a
// test can shrink the flag period and forge nothing), then over real
// segments through the shm transport; the misuse and failure reports.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/rank_threads.h"
#include "transports/shm/shm_bulletin.h"
#include "transports/shm/shm_layout.h"
#include "transports/shm/shm_ll_connection.h"
#include "tests/unit/transports/shm/shm_test_util.h"
#include "tests/unit/transports/transport_world.h"

namespace loom::testing::shm {
namespace {

using transports::Backend;
using transports::World;
using transports::connectWorld;

using transport::shm::BulletinControl;
using transport::shm::BulletinView;
using transport::shm::kBulletinBuffers;
using transport::shm::kLLFlagPeriod;
using transport::shm::ShmBulletin;

bool contains(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

// Every rank's bulletin in the heap, zeroed like a fresh segment.
class LocalBulletins {
 public:
  LocalBulletins(int nranks, uint64_t capacity, uint32_t period = kLLFlagPeriod) : nranks_(nranks) {
    const uint64_t stride = (1 + capacity / 4) * 8;
    for (int r = 0; r < nranks; ++r) {
      controls_.push_back(std::make_unique<BulletinControl>());
      lines_.emplace_back(kBulletinBuffers * stride / 8, 0);
      BulletinView v;
      v.control = controls_.back().get();
      v.buffers = reinterpret_cast<std::byte*>(lines_.back().data());
      v.stride = stride;
      v.capacity = capacity;
      v.flagPeriod = period;
      views_.push_back(v);
    }
  }
  // Rank `rank`'s bulletin, seeing every rank.
  ShmBulletin make(int rank) const { return ShmBulletin(rank, views_); }
  std::vector<BulletinView>& views() { return views_; }

 private:
  int nranks_;
  std::vector<std::unique_ptr<BulletinControl>> controls_;
  std::vector<std::vector<uint64_t>> lines_;
  std::vector<BulletinView> views_;
};

// The message size of a round, the same on every rank: long and short
// rounds alternate irregularly, so short ones leave older lines behind.
size_t roundBytes(uint64_t round, size_t capacity) {
  const size_t pick[] = {capacity, 1, 7, capacity - 1, 0, 4, 13, capacity / 2, 3, capacity};
  return pick[(round * 7 + round / 10) % 10];
}

// Runs `rounds` rounds on `nranks` threads: each rank posts its pattern,
// then reads and checks every peer's. Returns the first failure, or "".
std::string exchangeRounds(int nranks, int rounds, size_t capacity,
                           const std::function<transport::Bulletin&(int rank)>& bulletinOf) {
  std::vector<std::string> failure(static_cast<size_t>(nranks));
  runRankThreads(nranks, [&](int rank) {
    transport::Bulletin& b = bulletinOf(rank);
    std::vector<std::byte> mine(capacity), got(capacity);
    for (int k = 0; k < rounds; ++k) {
      const size_t bytes = roundBytes(static_cast<uint64_t>(k), capacity);
      fillPattern(mine.data(), bytes, rank, 0, static_cast<uint64_t>(k));
      Status posted = b.post(mine.data(), bytes);
      if (!posted.isOk()) {
        failure[rank] = "post: " + posted.message();
        return;
      }
      for (int q = 0; q < nranks; ++q) {
        if (q == rank) continue;
        std::fill(got.begin(), got.end(), std::byte{0xee});
        Status read = b.read(q, got.data(), bytes, waitFor(30));
        if (!read.isOk()) {
          failure[rank] = "read: " + read.message();
          return;
        }
        std::string bad = checkPattern(got.data(), bytes, q, 0, static_cast<uint64_t>(k));
        if (!bad.empty()) {
          failure[rank] = "rank " + std::to_string(rank) + " round " + std::to_string(k) + " from rank " +
                          std::to_string(q) + ": " + bad;
          return;
        }
        // Nothing past the message is written.
        for (size_t i = bytes; i < capacity; ++i) {
          if (got[i] != std::byte{0xee}) {
            failure[rank] = "read wrote past the message at byte " + std::to_string(i);
            return;
          }
        }
      }
    }
  });
  for (const auto& f : failure)
    if (!f.empty()) return f;
  return "";
}

class ShmBulletinPeriods : public ::testing::TestWithParam<uint32_t> {};

// Short flag periods make flags repeat every few rounds: only the writer's
// full rewrites keep a short round from taking an old line for a new one.
TEST_P(ShmBulletinPeriods, EveryRankReadsEveryPeersMessageOfEveryRound) {
  const int n = 4;
  const size_t capacity = 64;
  LocalBulletins boards(n, capacity, GetParam());
  std::vector<std::unique_ptr<ShmBulletin>> bulletins;
  for (int r = 0; r < n; ++r) bulletins.push_back(std::make_unique<ShmBulletin>(boards.make(r)));
  EXPECT_EQ(bulletins[0]->capacity(), capacity);
  std::string failure = exchangeRounds(n, 600, capacity, [&](int r) -> transport::Bulletin& { return *bulletins[r]; });
  EXPECT_EQ(failure, "");
}

INSTANTIATE_TEST_SUITE_P(Periods, ShmBulletinPeriods, ::testing::Values(kLLFlagPeriod, 9u, 10u, 13u, 17u));

// Flags repeat every 9 rounds here and buffers every 8, so buffer 0's lines
// of round 0 carry round 72's flag. Rounds 1..71 are one byte long and leave
// them in place unless the writer rewrites whole buffers. A reader that
// meets round 72's first lines (forged: the writer is mid-post) before the
// rest must wait for them, not take round 0's.
// The collective counts behind asynchronous calls run inline: a rank sees
// that its peers have started collective k once each announced k or later,
// and not before; a view without a control block (no bulletin) is skipped.
TEST(ShmBulletin, PeersStartedFollowsEveryPeersAnnouncement) {
  LocalBulletins local(3, 64);
  ShmBulletin b0 = local.make(0), b1 = local.make(1), b2 = local.make(2);
  EXPECT_TRUE(b0.peersStarted(0)) << "nothing to wait for before the first collective";
  EXPECT_FALSE(b0.peersStarted(1)) << "no peer announced collective 1";
  b0.announceStart(1);
  EXPECT_FALSE(b1.peersStarted(1)) << "rank 2 has not announced it";
  b2.announceStart(1);
  EXPECT_TRUE(b1.peersStarted(1)) << "ranks 0 and 2 announced collective 1";
  EXPECT_FALSE(b0.peersStarted(1)) << "rank 1 has not announced it";
  b1.announceStart(2);
  EXPECT_TRUE(b0.peersStarted(1)) << "rank 1 is past collective 1 and rank 2 at it";
  EXPECT_FALSE(b0.peersStarted(2)) << "rank 2 is still at collective 1";
  EXPECT_FALSE(b2.peersStarted(2)) << "rank 0 is still at collective 1";
  local.views()[2].control = nullptr;  // rank 2 has no bulletin this rank can see
  EXPECT_TRUE(local.make(0).peersStarted(2)) << "only rank 1 is readable, and it announced 2";
}

// What a split run polls (algorithm.h's SplitRun): whether every peer has
// posted the round this rank posted last. Over more rounds than buffers and
// flag periods, so a buffer's older round (or a repeated flag) never counts.
TEST(ShmBulletin, PeersPostedOnlyOnceEveryPeerPostedTheSameRound) {
  LocalBulletins local(3, 64, /*period=*/kBulletinBuffers + 1);
  ShmBulletin b[] = {local.make(0), local.make(1), local.make(2)};
  EXPECT_FALSE(b[0].peersPosted()) << "before this rank posted any round";
  for (int round = 0; round < 4 * static_cast<int>(kBulletinBuffers + 1); ++round) {
    const uint32_t word = static_cast<uint32_t>(round);
    const int first = round % 3;  // a different rank posts first each round
    ASSERT_TRUE(b[first].post(&word, sizeof word).isOk());
    EXPECT_FALSE(b[first].peersPosted()) << "round " << round << ": only rank " << first << " posted";
    const int second = (first + 1) % 3, third = (first + 2) % 3;
    ASSERT_TRUE(b[second].post(&word, sizeof word).isOk());
    EXPECT_FALSE(b[first].peersPosted()) << "round " << round << ": rank " << third << " has not posted";
    EXPECT_FALSE(b[second].peersPosted()) << "round " << round << ": rank " << third << " has not posted";
    ASSERT_TRUE(b[third].post(&word, sizeof word).isOk());
    for (int r = 0; r < 3; ++r) {
      EXPECT_TRUE(b[r].peersPosted()) << "round " << round << ", rank " << r;
      for (int peer = 0; peer < 3; ++peer) {
        if (peer == r) continue;
        uint32_t got = ~word;
        ASSERT_TRUE(b[r].read(peer, &got, sizeof got, WaitContext{}).isOk());
        EXPECT_EQ(got, word);
      }
    }
  }
}

TEST(ShmBulletin, StaleLinesWithARepeatedFlagAreNeverTaken) {
  const uint32_t period = 9;
  LocalBulletins boards(2, 64, period);
  ShmBulletin a = boards.make(0), b = boards.make(1);
  std::byte data[64] = {};
  for (uint64_t k = 0; k < 72; ++k) {
    const size_t bytes = k == 0 ? 64 : 1;
    fillPattern(data, bytes, 1, 0, k);
    ASSERT_TRUE(a.post(data, bytes).isOk());
    ASSERT_TRUE(b.post(data, bytes).isOk());
    ASSERT_TRUE(a.read(1, data, bytes, waitFor(5)).isOk());
    ASSERT_TRUE(b.read(0, data, bytes, waitFor(5)).isOk());
  }
  ASSERT_TRUE(a.post(data, 64).isOk());
  ASSERT_EQ(transport::shm::llFlagFor(72, period), transport::shm::llFlagFor(0, period));
  // Buffer 72 mod 8 = 0: the header and the first data line have arrived.
  auto* lines = reinterpret_cast<uint64_t*>(boards.views()[1].buffers);
  const uint32_t flag = transport::shm::llFlagFor(72, period);
  std::atomic_ref<uint64_t>(lines[0]).store(transport::shm::llLine(64, flag));
  std::atomic_ref<uint64_t>(lines[1]).store(transport::shm::llLine(0, flag));
  Status s = a.read(1, data, 64, waitFor(0.05));
  EXPECT_EQ(s.code(), Code::kTimeout) << "took stale lines of round 0 as round 72's";
  EXPECT_TRUE(contains(s, "(1 of 16 lines arrived)")) << s.message();
}

TEST(ShmBulletin, ThroughTheShmTransportBetweenEveryPair) {
  const int n = 3;
  World world = connectWorld(Backend::kShm, n, uniqueJobTag(), smallConfig(), [&](int r) { return allPeersOf(r, n); });
  ASSERT_TRUE(world.allOk()) << world.firstError();
  for (int r = 0; r < n; ++r) ASSERT_NE(world.transports[r]->bulletin(), nullptr) << "rank " << r;
  const size_t capacity = world.transports[0]->bulletin()->capacity();
  EXPECT_EQ(capacity, transport::shm::kBulletinCapacityBytes);
  std::string failure =
      exchangeRounds(n, 100, capacity, [&](int r) -> transport::Bulletin& { return *world.transports[r]->bulletin(); });
  EXPECT_EQ(failure, "");
}

// A bulletin must reach every other rank: with a peer served elsewhere
// (sparse peer lists) the transport offers none.
TEST(ShmBulletin, NoneWhenTheTransportDoesNotServeEveryRank) {
  const int n = 3;
  World world = connectWorld(Backend::kShm, n, uniqueJobTag(), smallConfig(), [](int r) {
    if (r == 2) return std::vector<int>{};
    return std::vector<int>{1 - r};
  });
  ASSERT_TRUE(world.allOk()) << world.firstError();
  for (int r = 0; r < n; ++r) EXPECT_EQ(world.transports[r]->bulletin(), nullptr) << "rank " << r;
}

TEST(ShmBulletin, DifferentCountsAreReportedNamingBothRanks) {
  LocalBulletins boards(2, 64);
  ShmBulletin a = boards.make(0), b = boards.make(1);
  std::byte data[64] = {};
  ASSERT_TRUE(a.post(data, 8).isOk());
  ASSERT_TRUE(b.post(data, 12).isOk());
  Status s = a.read(1, data, 8, waitFor(5));
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_TRUE(contains(s, "rank 1 posted 12 bytes in round 0 where rank 0 expected 8")) << s.message();
}

TEST(ShmBulletin, NextRoundBeforeReadingEveryPeerIsRefused) {
  LocalBulletins boards(3, 64);
  ShmBulletin a = boards.make(0), b = boards.make(1);
  std::byte data[8] = {};
  ASSERT_TRUE(a.post(data, 8).isOk());
  ASSERT_TRUE(b.post(data, 8).isOk());
  ASSERT_TRUE(a.read(1, data, 8, waitFor(5)).isOk());
  ASSERT_TRUE(a.read(1, data, 8, waitFor(5)).isOk());  // a second read of one peer does not count twice
  Status s = a.post(data, 8);
  EXPECT_EQ(s.code(), Code::kInternalError);
  EXPECT_TRUE(contains(s, "round 1 started before round 0 was read from every peer (1 unread)")) << s.message();
}

TEST(ShmBulletin, ReadTimesOutNamingTheSilentPeer) {
  LocalBulletins boards(2, 64);
  ShmBulletin a = boards.make(0);
  std::byte data[8] = {};
  ASSERT_TRUE(a.post(data, 8).isOk());
  Status s = a.read(1, data, 8, waitFor(0.05));
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_TRUE(contains(s, "rank 1's message of round 0, read by rank 0 over shm (nothing arrived)")) << s.message();
}

TEST(ShmBulletin, AbortEndsAWaitingRead) {
  LocalBulletins boards(2, 64);
  ShmBulletin a = boards.make(0);
  std::byte data[8] = {};
  ASSERT_TRUE(a.post(data, 8).isOk());
  std::atomic<bool> abort{false};
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    abort = true;
  });
  Status s = a.read(1, data, 8, waitFor(30, &abort));
  aborter.join();
  EXPECT_EQ(s.code(), Code::kRemoteError) << s.message();
}

// A reader that spins and yields not at all goes straight to sleep on the
// writer's signal; the post must wake it (or its 20 ms naps find the data).
TEST(ShmBulletin, ASleepingReaderGetsTheMessage) {
  LocalBulletins boards(2, 64);
  ShmBulletin a = boards.make(0), b = boards.make(1);
  std::byte sent[40], got[40] = {};
  fillPattern(sent, sizeof sent, 1, 0, 0);
  ASSERT_TRUE(a.post(got, sizeof got).isOk());
  std::atomic<bool> asleep{false};
  std::thread writer([&] {
    // Post only once the reader sleeps, so the wake-up path runs (bounded:
    // a reader that failed early never sleeps).
    const auto giveUp = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (boards.views()[1].control->posted.sleepers.load() == 0 && std::chrono::steady_clock::now() < giveUp)
      std::this_thread::yield();
    asleep = boards.views()[1].control->posted.sleepers.load() != 0;
    ASSERT_TRUE(b.post(sent, sizeof sent).isOk());
  });
  WaitContext w = waitFor(30);
  w.spinMicros = 0;
  w.yieldMicros = 0;
  Status s = a.read(1, got, sizeof got, w);
  writer.join();
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_TRUE(asleep.load());
  EXPECT_EQ(checkPattern(got, sizeof got, 1, 0, 0), "");
}

TEST(ShmBulletin, MisuseIsReportedNotActedOn) {
  LocalBulletins boards(2, 64);
  ShmBulletin a = boards.make(0);
  std::byte data[128] = {};
  Status early = a.read(1, data, 8, waitFor(1));
  EXPECT_TRUE(contains(early, "read from rank 1 before this rank posted a round")) << early.message();
  Status big = a.post(data, 65);
  EXPECT_TRUE(contains(big, "a message of 65 bytes exceeds its capacity of 64")) << big.message();
  ASSERT_TRUE(a.post(data, 8).isOk());
  for (int peer : {0, 2, -1}) {
    Status s = a.read(peer, data, 8, waitFor(1));
    EXPECT_TRUE(contains(s, "no bulletin of rank " + std::to_string(peer) + " to read")) << s.message();
  }
  Status bigRead = a.read(1, data, 65, waitFor(1));
  EXPECT_TRUE(contains(bigRead, "a read of 65 bytes exceeds the capacity of 64")) << bigRead.message();

  // A flag period that lets a buffer see a repeated flag is refused up front.
  LocalBulletins shortPeriod(2, 64, kBulletinBuffers);
  ShmBulletin bad = shortPeriod.make(0);
  Status s = bad.post(data, 8);
  EXPECT_EQ(s.code(), Code::kInternalError);
  EXPECT_TRUE(contains(s, "shm bulletin of rank 0: bad geometry for rank 0")) << s.message();
  ShmBulletin outside(5, shortPeriod.views());
  EXPECT_TRUE(contains(outside.post(data, 8), "rank 5 outside its 2 views"));
}

}  // namespace
}  // namespace loom::testing::shm
