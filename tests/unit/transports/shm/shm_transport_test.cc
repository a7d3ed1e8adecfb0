// Conformance of the shared-memory transport with ranks as threads: ordering,
// sizes, all pairs, bidirectional traffic, timeouts, abort, and cleanup.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "tests/support/rank_threads.h"
#include "transports/shm/shm_transport.h"
#include "tests/unit/transports/shm/shm_test_util.h"
#include "tests/unit/transports/transport_world.h"

namespace loom::testing::shm {
namespace {

using transports::Backend;
using transports::World;
using transports::connectWorld;

using transport::RecvConnection;
using transport::SendConnection;

std::vector<int> pairPeers(int rank) { return {1 - rank}; }

TEST(ShmTransport, FactoryMatchesSameHostOnly) {
  const transport::TransportFactory& f = transport::shmTransportFactory();
  EXPECT_STREQ(f.name, "shm");
  transport::PeerInfo a, b, c;
  a.hostHash = b.hostHash = 0x1234;
  c.hostHash = 0x5678;
  Config cfg;
  EXPECT_TRUE(f.canConnect(a, b, cfg));
  EXPECT_FALSE(f.canConnect(a, c, cfg));
  EXPECT_STREQ(f.create()->name(), "shm");
}

// More chunks than slots, sizes 0..chunkBytes, every byte checked, in order.
TEST(ShmTransport, ManyChunksArriveInOrderWithContent) {
  Config cfg = smallConfig(4096, 4);
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), cfg, pairPeers);
  ASSERT_TRUE(w.allOk()) << w.firstError();
  constexpr int kChunks = 500;
  std::vector<Status> results(2);
  runRankThreads(2, [&](int rank) {
    WaitContext wait = waitFor(20);
    for (uint64_t c = 0; c < kChunks && results[rank].isOk(); ++c) {
      size_t n = chunkSizeFor(0, 1, c, cfg.chunkBytes);
      results[rank] = rank == 0 ? sendPatternChunk(w.transports[0]->sendTo(1, transport::Protocol::kSimple), 0, 1, c, n, wait)
                                : recvPatternChunk(w.transports[1]->recvFrom(0, transport::Protocol::kSimple), 0, 1, c, n, wait);
    }
  });
  EXPECT_TRUE(results[0].isOk()) << results[0].message();
  EXPECT_TRUE(results[1].isOk()) << results[1].message();
}

TEST(ShmTransport, ZeroByteChunksAreDeliveredAndCounted) {
  Config cfg = smallConfig(4096, 2);
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), cfg, pairPeers);
  ASSERT_TRUE(w.allOk()) << w.firstError();
  WaitContext wait = waitFor(10);
  SendConnection& tx = w.transports[0]->sendTo(1, transport::Protocol::kSimple);
  RecvConnection& rx = w.transports[1]->recvFrom(0, transport::Protocol::kSimple);
  // Same thread, interleaved: a zero-byte chunk still occupies a slot.
  for (uint64_t c = 0; c < 20; ++c) {
    ASSERT_TRUE(sendPatternChunk(tx, 0, 1, c, 0, wait).isOk());
    ASSERT_TRUE(sendPatternChunk(tx, 0, 1, c + 100, 5, wait).isOk());
    ASSERT_TRUE(recvPatternChunk(rx, 0, 1, c, 0, wait).isOk());
    Status s = recvPatternChunk(rx, 0, 1, c + 100, 5, wait);
    ASSERT_TRUE(s.isOk()) << s.message();
  }
}

TEST(ShmTransport, FullSizeChunksFillWholeSlots) {
  Config cfg = smallConfig(256 * 1024, 2);
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), cfg, pairPeers);
  ASSERT_TRUE(w.allOk()) << w.firstError();
  EXPECT_EQ(w.transports[0]->sendTo(1, transport::Protocol::kSimple).chunkBytes(), cfg.chunkBytes);
  EXPECT_EQ(w.transports[1]->recvFrom(0, transport::Protocol::kSimple).chunkBytes(), cfg.chunkBytes);
  std::vector<Status> results(2);
  runRankThreads(2, [&](int rank) {
    WaitContext wait = waitFor(20);
    for (uint64_t c = 0; c < 12 && results[rank].isOk(); ++c)
      results[rank] = rank == 0 ? sendPatternChunk(w.transports[0]->sendTo(1, transport::Protocol::kSimple), 0, 1, c, cfg.chunkBytes, wait)
                                : recvPatternChunk(w.transports[1]->recvFrom(0, transport::Protocol::kSimple), 0, 1, c, cfg.chunkBytes, wait);
  });
  EXPECT_TRUE(results[0].isOk()) << results[0].message();
  EXPECT_TRUE(results[1].isOk()) << results[1].message();
}

// Chunks smaller than a slot are packed (transports/shm/chunk_ring.h): one at
// a time, 1 KiB chunks of a 4 x 16 KiB FIFO land at 13 places 4 KiB apart
// (the 14th would leave less than a chunk before the end), not at 4 slots.
TEST(ShmTransport, SmallChunksCycleOverTheWholeSlotMemory) {
  Config cfg = smallConfig(16 * 1024, 4);
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), cfg, pairPeers);
  ASSERT_TRUE(w.allOk()) << w.firstError();
  WaitContext wait = waitFor(10);
  SendConnection& tx = w.transports[0]->sendTo(1, transport::Protocol::kSimple);
  RecvConnection& rx = w.transports[1]->recvFrom(0, transport::Protocol::kSimple);
  std::set<const std::byte*> places;
  const std::byte* first = nullptr;
  for (uint64_t c = 0; c < 40; ++c) {
    ASSERT_TRUE(sendPatternChunk(tx, 0, 1, c, 1024, wait).isOk());
    const std::byte* data = nullptr;
    size_t bytes = 0;
    ASSERT_TRUE(rx.tryAcquire(&data, &bytes));
    EXPECT_EQ(bytes, 1024u);
    if (!first) first = data;
    EXPECT_EQ(static_cast<size_t>(data - first), (c % 13) * 4096) << "chunk " << c;
    places.insert(data);
    rx.release();
  }
  EXPECT_EQ(places.size(), 13u);
}

// Every rank sends to and receives from every other, one chunk per peer per
// round (so each FIFO holds at most two chunks and one thread per rank suffices).
void exchangeAllPairs(int nranks, int rounds, const Config& cfg) {
  World w = connectWorld(Backend::kShm, nranks, uniqueJobTag(), cfg, [&](int r) { return allPeersOf(r, nranks); });
  ASSERT_TRUE(w.allOk()) << w.firstError();
  std::vector<Status> results(nranks);
  runRankThreads(nranks, [&](int rank) {
    WaitContext wait = waitFor(30);
    transport::Transport& t = *w.transports[rank];
    Status& st = results[rank];
    for (uint64_t c = 0; c < static_cast<uint64_t>(rounds) && st.isOk(); ++c) {
      for (int k = 1; k < nranks && st.isOk(); ++k) {
        int dst = (rank + k) % nranks;
        st = sendPatternChunk(t.sendTo(dst, transport::Protocol::kSimple), rank, dst, c, chunkSizeFor(rank, dst, c, cfg.chunkBytes), wait);
      }
      for (int k = 1; k < nranks && st.isOk(); ++k) {
        int src = (rank - k + nranks) % nranks;
        st = recvPatternChunk(t.recvFrom(src, transport::Protocol::kSimple), src, rank, c, chunkSizeFor(src, rank, c, cfg.chunkBytes), wait);
      }
    }
  });
  for (int r = 0; r < nranks; ++r) EXPECT_TRUE(results[r].isOk()) << "rank " << r << ": " << results[r].message();
}

TEST(ShmTransport, AllPairsForTwoToEightRanks) {
  for (int n = 2; n <= 8; ++n) {
    SCOPED_TRACE("nranks " + std::to_string(n));
    exchangeAllPairs(n, 12, smallConfig(1024, 2));
  }
}

// With no spinning or yielding every wait sleeps on the futex: the wake-ups
// must still arrive.
TEST(ShmTransport, FutexOnlyWaitsStillDeliver) {
  Config cfg = smallConfig(1024, 2);
  cfg.spinMicros = 0;
  cfg.yieldMicros = 0;
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), cfg, pairPeers);
  ASSERT_TRUE(w.allOk()) << w.firstError();
  std::vector<Status> results(2);
  runRankThreads(2, [&](int rank) {
    WaitContext wait = waitFor(20);
    wait.spinMicros = 0;
    wait.yieldMicros = 0;
    for (uint64_t c = 0; c < 300 && results[rank].isOk(); ++c) {
      size_t n = chunkSizeFor(0, 1, c, cfg.chunkBytes);
      results[rank] = rank == 0 ? sendPatternChunk(w.transports[0]->sendTo(1, transport::Protocol::kSimple), 0, 1, c, n, wait)
                                : recvPatternChunk(w.transports[1]->recvFrom(0, transport::Protocol::kSimple), 0, 1, c, n, wait);
    }
  });
  EXPECT_TRUE(results[0].isOk()) << results[0].message();
  EXPECT_TRUE(results[1].isOk()) << results[1].message();
}

// Each rank sends and receives at once (a sender and a receiver thread per rank).
TEST(ShmTransport, BidirectionalSimultaneousTraffic) {
  Config cfg = smallConfig(8192, 3);
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), cfg, pairPeers);
  ASSERT_TRUE(w.allOk()) << w.firstError();
  constexpr int kChunks = 400;
  std::vector<Status> results(4);
  runRankThreads(4, [&](int id) {
    int rank = id / 2, peer = 1 - rank;
    bool sender = id % 2 == 0;
    WaitContext wait = waitFor(20);
    for (uint64_t c = 0; c < kChunks && results[id].isOk(); ++c) {
      results[id] = sender ? sendPatternChunk(w.transports[rank]->sendTo(peer, transport::Protocol::kSimple), rank, peer, c,
                                              chunkSizeFor(rank, peer, c, cfg.chunkBytes), wait)
                           : recvPatternChunk(w.transports[rank]->recvFrom(peer, transport::Protocol::kSimple), peer, rank, c,
                                              chunkSizeFor(peer, rank, c, cfg.chunkBytes), wait);
    }
  });
  for (int id = 0; id < 4; ++id) EXPECT_TRUE(results[id].isOk()) << results[id].message();
}

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(ShmTransport, ReceiveTimesOutNamingThePeer) {
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), smallConfig(), pairPeers);
  ASSERT_TRUE(w.allOk()) << w.firstError();
  const std::byte* data = nullptr;
  size_t bytes = 0;
  auto start = Clock::now();
  Status s = w.transports[0]->recvFrom(1, transport::Protocol::kSimple).acquire(&data, &bytes, waitFor(0.2));
  double took = secondsSince(start);
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_NE(s.message().find("chunk from rank 1 to rank 0 over shm"), std::string::npos) << s.message();
  EXPECT_GE(took, 0.19);
  EXPECT_LT(took, 2.0);
}

TEST(ShmTransport, SendTimesOutWhenReceiverHoldsEverySlot) {
  Config cfg = smallConfig(4096, 3);
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), cfg, pairPeers);
  ASSERT_TRUE(w.allOk()) << w.firstError();
  SendConnection& tx = w.transports[1]->sendTo(0, transport::Protocol::kSimple);
  for (uint64_t c = 0; c < 3; ++c) ASSERT_TRUE(sendPatternChunk(tx, 1, 0, c, 10, waitFor(5)).isOk());
  std::byte* slot = nullptr;
  Status s = tx.acquire(&slot, waitFor(0.1));
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_NE(s.message().find("room to send to rank 0 over shm"), std::string::npos) << s.message();
  // Releasing one chunk frees exactly one slot.
  ASSERT_TRUE(recvPatternChunk(w.transports[0]->recvFrom(1, transport::Protocol::kSimple), 1, 0, 0, 10, waitFor(5)).isOk());
  EXPECT_TRUE(sendPatternChunk(tx, 1, 0, 3, 10, waitFor(5)).isOk());
  EXPECT_EQ(tx.acquire(&slot, waitFor(0.05)).code(), Code::kTimeout);
}

TEST(ShmTransport, AbortFlagUnblocksAWait) {
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), smallConfig(), pairPeers);
  ASSERT_TRUE(w.allOk()) << w.firstError();
  std::atomic<bool> abort{false};
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    abort.store(true);
  });
  const std::byte* data = nullptr;
  size_t bytes = 0;
  auto start = Clock::now();
  Status s = w.transports[1]->recvFrom(0, transport::Protocol::kSimple).acquire(&data, &bytes, waitFor(30, &abort));
  double took = secondsSince(start);
  aborter.join();
  EXPECT_EQ(s.code(), Code::kRemoteError);
  EXPECT_NE(s.message().find("aborted"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rank 0"), std::string::npos) << s.message();
  EXPECT_LT(took, 1.0);
}

TEST(ShmTransport, NoSegmentLeftInDevShmAfterConnectOrDestruction) {
  std::string tag = uniqueJobTag();
  World w = connectWorld(Backend::kShm, 4, tag, smallConfig(), [](int r) { return allPeersOf(r, 4); });
  ASSERT_TRUE(w.allOk()) << w.firstError();
  EXPECT_TRUE(leftoverSegments(tag).empty()) << leftoverSegments(tag)[0];
  // The unlinked segments stay usable through the mappings.
  EXPECT_TRUE(sendPatternChunk(w.transports[2]->sendTo(3, transport::Protocol::kSimple), 2, 3, 0, 100, waitFor(5)).isOk());
  EXPECT_TRUE(recvPatternChunk(w.transports[3]->recvFrom(2, transport::Protocol::kSimple), 2, 3, 0, 100, waitFor(5)).isOk());
  w.transports.clear();
  EXPECT_TRUE(leftoverSegments(tag).empty());
}

TEST(ShmTransport, FileSegmentsInAnotherDirectoryWorkAndAreRemoved) {
  std::string dir = ::testing::TempDir() + "loom-shm-" + uniqueJobTag();
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  Config cfg = smallConfig(2048, 2);
  cfg.shmDir = dir + "/";
  std::string tag = uniqueJobTag();
  {
    World w = connectWorld(Backend::kShm, 3, tag, cfg, [](int r) { return allPeersOf(r, 3); });
    ASSERT_TRUE(w.allOk()) << w.firstError();
    EXPECT_TRUE(leftoverSegments(tag, dir).empty());
    EXPECT_TRUE(sendPatternChunk(w.transports[0]->sendTo(2, transport::Protocol::kSimple), 0, 2, 7, 2048, waitFor(5)).isOk());
    EXPECT_TRUE(recvPatternChunk(w.transports[2]->recvFrom(0, transport::Protocol::kSimple), 0, 2, 7, 2048, waitFor(5)).isOk());
  }
  EXPECT_TRUE(leftoverSegments(tag, dir).empty());
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace loom::testing::shm
