// The LL protocol of the shared-memory transport, through ShmTransport, with
// ranks as threads and as forked processes: sizes, ordering over many slot
// wraps, tryAcquire, misuse, timeouts, abort, both protocols at once, cleanup.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/support/rank_threads.h"
#include "transports/shm/shm_layout.h"
#include "transports/shm/shm_transport.h"
#include "tests/unit/transports/shm/shm_fork_harness.h"
#include "tests/unit/transports/shm/shm_test_util.h"
#include "tests/unit/transports/transport_world.h"

namespace loom::testing::shm {
namespace {

using transports::Backend;
using transports::World;
using transports::connectWorld;

using transport::Protocol;
using transport::RecvConnection;
using transport::SendConnection;
using transport::shm::kLLChunkBytes;
using transport::shm::kLLSlots;

constexpr Protocol kLL = Protocol::kLL;

std::vector<int> pairPeers(int rank) { return {1 - rank}; }
bool contains(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

// Streams `chunks` pattern chunks from rank 0 to rank 1 over LL on two threads.
void streamPair(World& w, uint64_t chunks, bool futexOnly) {
  std::vector<Status> results(2);
  runRankThreads(2, [&](int rank) {
    WaitContext wait = waitFor(30);
    if (futexOnly) wait.spinMicros = wait.yieldMicros = 0;
    for (uint64_t c = 0; c < chunks && results[rank].isOk(); ++c) {
      size_t n = chunkSizeFor(0, 1, c, kLLChunkBytes);
      results[rank] = rank == 0 ? sendPatternChunk(w.transports[0]->sendTo(1, kLL), 0, 1, c, n, wait)
                                : recvPatternChunk(w.transports[1]->recvFrom(0, kLL), 0, 1, c, n, wait);
    }
  });
  EXPECT_TRUE(results[0].isOk()) << results[0].message();
  EXPECT_TRUE(results[1].isOk()) << results[1].message();
}

TEST(ShmLL, SupportedWithItsOwnConnectionsAndChunkSize) {
  EXPECT_TRUE(transport::shmTransportFactory().create()->supports(kLL));
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), smallConfig(4096, 2), pairPeers);
  ASSERT_TRUE(w.allOk()) << w.firstError();
  transport::Transport& t = *w.transports[0];
  EXPECT_TRUE(t.supports(Protocol::kSimple));
  EXPECT_TRUE(t.supports(kLL));
  EXPECT_EQ(t.sendTo(1, kLL).chunkBytes(), kLLChunkBytes);
  EXPECT_EQ(w.transports[1]->recvFrom(0, kLL).chunkBytes(), kLLChunkBytes);
  EXPECT_EQ(t.sendTo(1, Protocol::kSimple).chunkBytes(), 4096u);
  EXPECT_NE(&t.sendTo(1, kLL), &t.sendTo(1, Protocol::kSimple));
  // Ranks outside the peer list and unknown protocols get the usage-error stand-in.
  std::byte* slot = nullptr;
  EXPECT_EQ(t.sendTo(0, kLL).acquire(&slot, waitFor(1)).code(), Code::kInvalidUsage);
  EXPECT_EQ(t.sendTo(1, static_cast<Protocol>(7)).acquire(&slot, waitFor(1)).code(), Code::kInvalidUsage);
}

// Each edge size alone, then all of them queued at once (filling the slots).
TEST(ShmLL, EdgeSizesArriveIntact) {
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), smallConfig(), pairPeers);
  ASSERT_TRUE(w.allOk()) << w.firstError();
  SendConnection& tx = w.transports[0]->sendTo(1, kLL);
  RecvConnection& rx = w.transports[1]->recvFrom(0, kLL);
  const std::vector<size_t> sizes = {0, 1, 3, 4, 5, kLLChunkBytes - 1, kLLChunkBytes, 2, kLLChunkBytes - 4};
  ASSERT_LE(sizes.size(), 2 * kLLSlots);
  WaitContext wait = waitFor(10);
  uint64_t c = 0;
  for (size_t n : sizes) {
    ASSERT_TRUE(sendPatternChunk(tx, 0, 1, c, n, wait).isOk());
    Status s = recvPatternChunk(rx, 0, 1, c++, n, wait);
    ASSERT_TRUE(s.isOk()) << "size " << n << ": " << s.message();
  }
  for (size_t i = 0; i < sizes.size(); i += kLLSlots) {
    size_t end = std::min(sizes.size(), i + kLLSlots);
    for (size_t k = i; k < end; ++k) ASSERT_TRUE(sendPatternChunk(tx, 0, 1, c + k, sizes[k], wait).isOk());
    for (size_t k = i; k < end; ++k) {
      Status s = recvPatternChunk(rx, 0, 1, c + k, sizes[k], wait);
      ASSERT_TRUE(s.isOk()) << "size " << sizes[k] << ": " << s.message();
    }
  }
}

// Far more chunks than slots (the slots wrap hundreds of times), every byte checked.
TEST(ShmLL, ManyChunksWrapTheSlotsInOrder) {
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), smallConfig(), pairPeers);
  ASSERT_TRUE(w.allOk()) << w.firstError();
  streamPair(w, 200 * kLLSlots, false);
}

// Waits that go straight to the futex: the sender's notify must wake the receiver.
TEST(ShmLL, FutexOnlyWaitsStillDeliver) {
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), smallConfig(), pairPeers);
  ASSERT_TRUE(w.allOk()) << w.firstError();
  streamPair(w, 20 * kLLSlots, true);
}

TEST(ShmLL, TryAcquireNeverWaits) {
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), smallConfig(), pairPeers);
  ASSERT_TRUE(w.allOk()) << w.firstError();
  SendConnection& tx = w.transports[0]->sendTo(1, kLL);
  RecvConnection& rx = w.transports[1]->recvFrom(0, kLL);
  const std::byte* data = nullptr;
  size_t bytes = 0;
  EXPECT_FALSE(rx.tryAcquire(&data, &bytes));
  std::byte* slot = nullptr;
  for (uint64_t c = 0; c < kLLSlots; ++c) {
    ASSERT_TRUE(tx.tryAcquire(&slot)) << "slot " << c;
    fillPattern(slot, 100 + c, 0, 1, c);
    tx.commit(100 + c);
  }
  EXPECT_FALSE(tx.tryAcquire(&slot)) << "more than " << kLLSlots << " chunks in flight";
  ASSERT_TRUE(rx.tryAcquire(&data, &bytes));
  EXPECT_EQ(bytes, 100u);
  EXPECT_EQ(checkPattern(data, bytes, 0, 1, 0), "");
  EXPECT_FALSE(tx.tryAcquire(&slot)) << "a slot came free before its release";
  rx.release();
  EXPECT_TRUE(tx.tryAcquire(&slot));
  fillPattern(slot, 7, 0, 1, kLLSlots);
  tx.commit(7);
  for (uint64_t c = 1; c <= kLLSlots; ++c) {
    ASSERT_TRUE(rx.tryAcquire(&data, &bytes)) << "chunk " << c;
    size_t want = c == kLLSlots ? 7 : 100 + c;
    ASSERT_EQ(bytes, want);
    EXPECT_EQ(checkPattern(data, bytes, 0, 1, c), "");
    rx.release();
  }
  EXPECT_FALSE(rx.tryAcquire(&data, &bytes));
}

// A receiver thread polling only with tryAcquire against a sender thread.
TEST(ShmLL, TryAcquirePollingStreams) {
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), smallConfig(), pairPeers);
  ASSERT_TRUE(w.allOk()) << w.firstError();
  constexpr uint64_t kChunks = 30 * kLLSlots;
  std::vector<Status> results(2);
  runRankThreads(2, [&](int rank) {
    Deadline deadline = Deadline::after(30);
    for (uint64_t c = 0; c < kChunks && results[rank].isOk(); ++c) {
      size_t n = chunkSizeFor(0, 1, c, kLLChunkBytes);
      if (rank == 0) {
        std::byte* slot = nullptr;
        while (!w.transports[0]->sendTo(1, kLL).tryAcquire(&slot) && !deadline.expired()) std::this_thread::yield();
        if (!slot) {
          results[0] = Status(Code::kTimeout, "sender gave up");
          break;
        }
        fillPattern(slot, n, 0, 1, c);
        w.transports[0]->sendTo(1, kLL).commit(n);
        slot = nullptr;
      } else {
        RecvConnection& rx = w.transports[1]->recvFrom(0, kLL);
        const std::byte* data = nullptr;
        size_t bytes = 0;
        while (!rx.tryAcquire(&data, &bytes) && !deadline.expired()) std::this_thread::yield();
        if (!data) {
          results[1] = Status(Code::kTimeout, "receiver gave up");
          break;
        }
        std::string bad = bytes == n ? checkPattern(data, bytes, 0, 1, c) : "wrong size";
        rx.release();
        if (!bad.empty()) results[1] = Status(Code::kInternalError, bad);
      }
    }
  });
  EXPECT_TRUE(results[0].isOk()) << results[0].message();
  EXPECT_TRUE(results[1].isOk()) << results[1].message();
}

TEST(ShmLL, MisuseIsReportedByTheNextAcquire) {
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), smallConfig(), pairPeers);
  ASSERT_TRUE(w.allOk()) << w.firstError();
  SendConnection& tx = w.transports[0]->sendTo(1, kLL);
  RecvConnection& rx = w.transports[1]->recvFrom(0, kLL);
  tx.commit(10);
  std::byte* slot = nullptr;
  EXPECT_TRUE(contains(tx.acquire(&slot, waitFor(1)), "shm (LL) send to rank 1: commit without acquire"));
  EXPECT_FALSE(tx.tryAcquire(&slot));
  rx.release();
  const std::byte* data = nullptr;
  size_t bytes = 0;
  EXPECT_TRUE(contains(rx.acquire(&data, &bytes, waitFor(1)), "receive from rank 0: release without acquire"));

  SendConnection& tx2 = w.transports[1]->sendTo(0, kLL);
  ASSERT_TRUE(tx2.acquire(&slot, waitFor(1)).isOk());
  tx2.commit(kLLChunkBytes + 1);
  EXPECT_TRUE(contains(tx2.acquire(&slot, waitFor(1)), "exceeds the chunk size"));
  // Nothing was published by the rejected commits.
  EXPECT_EQ(w.transports[0]->recvFrom(1, kLL).acquire(&data, &bytes, waitFor(0.05)).code(), Code::kTimeout);
}

TEST(ShmLL, TimeoutsNameThePeerAndTheProtocol) {
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), smallConfig(), pairPeers);
  ASSERT_TRUE(w.allOk()) << w.firstError();
  const std::byte* data = nullptr;
  size_t bytes = 0;
  auto start = Clock::now();
  Status s = w.transports[0]->recvFrom(1, kLL).acquire(&data, &bytes, waitFor(0.2));
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_TRUE(contains(s, "from rank 1 to rank 0 over shm (LL)")) << s.message();
  EXPECT_GE(took, 0.19);
  EXPECT_LT(took, 2.0);

  SendConnection& tx = w.transports[1]->sendTo(0, kLL);
  for (uint64_t c = 0; c < kLLSlots; ++c) ASSERT_TRUE(sendPatternChunk(tx, 1, 0, c, 10, waitFor(5)).isOk());
  std::byte* slot = nullptr;
  s = tx.acquire(&slot, waitFor(0.1));
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_TRUE(contains(s, "free slot to send to rank 0 over shm (LL)")) << s.message();
  // Releasing one chunk frees exactly one slot.
  ASSERT_TRUE(recvPatternChunk(w.transports[0]->recvFrom(1, kLL), 1, 0, 0, 10, waitFor(5)).isOk());
  EXPECT_TRUE(sendPatternChunk(tx, 1, 0, kLLSlots, 10, waitFor(5)).isOk());
  EXPECT_EQ(tx.acquire(&slot, waitFor(0.05)).code(), Code::kTimeout);
}

TEST(ShmLL, AbortFlagUnblocksAWait) {
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
  Status s = w.transports[1]->recvFrom(0, kLL).acquire(&data, &bytes, waitFor(30, &abort));
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  aborter.join();
  EXPECT_EQ(s.code(), Code::kRemoteError);
  EXPECT_TRUE(contains(s, "aborted")) << s.message();
  EXPECT_TRUE(contains(s, "from rank 0 to rank 1 over shm (LL)")) << s.message();
  EXPECT_LT(took, 1.0);
}

// Chunks of both protocols on the same pair at once: each protocol is its
// own FIFO, in order, and neither disturbs the other.
TEST(ShmLL, BothProtocolsInterleavedOnOnePair) {
  Config cfg = smallConfig(2048, 2);
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), cfg, pairPeers);
  ASSERT_TRUE(w.allOk()) << w.firstError();
  constexpr uint64_t kRounds = 300;
  std::vector<Status> results(4);
  // Per rank a sender and a receiver thread; each alternates protocols.
  runRankThreads(4, [&](int id) {
    int rank = id / 2, peer = 1 - rank;
    bool sender = id % 2 == 0;
    WaitContext wait = waitFor(30);
    transport::Transport& t = *w.transports[rank];
    for (uint64_t c = 0; c < kRounds && results[id].isOk(); ++c) {
      // Chunk numbers of the two protocols differ so a cross-over shows in the content.
      uint64_t simpleChunk = 2 * c, llChunk = 2 * c + 1;
      size_t simpleBytes = chunkSizeFor(rank, peer, simpleChunk, cfg.chunkBytes);
      size_t llBytes = chunkSizeFor(rank, peer, llChunk, kLLChunkBytes);
      if (sender) {
        results[id] = sendPatternChunk(t.sendTo(peer, kLL), rank, peer, llChunk, llBytes, wait);
        if (results[id].isOk())
          results[id] = sendPatternChunk(t.sendTo(peer, Protocol::kSimple), rank, peer, simpleChunk, simpleBytes, wait);
      } else {
        size_t inSimple = chunkSizeFor(peer, rank, simpleChunk, cfg.chunkBytes);
        size_t inLL = chunkSizeFor(peer, rank, llChunk, kLLChunkBytes);
        // Opposite order to the sender's: both FIFOs must hold chunks meanwhile.
        results[id] = recvPatternChunk(t.recvFrom(peer, Protocol::kSimple), peer, rank, simpleChunk, inSimple, wait);
        if (results[id].isOk())
          results[id] = recvPatternChunk(t.recvFrom(peer, kLL), peer, rank, llChunk, inLL, wait);
      }
    }
  });
  for (int id = 0; id < 4; ++id) EXPECT_TRUE(results[id].isOk()) << "thread " << id << ": " << results[id].message();
}

TEST(ShmLL, AllPairsOfFourRanksAndNoSegmentLeft) {
  std::string tag = uniqueJobTag();
  constexpr int kRanks = 4;
  World w = connectWorld(Backend::kShm, kRanks, tag, smallConfig(), [](int r) { return allPeersOf(r, kRanks); });
  ASSERT_TRUE(w.allOk()) << w.firstError();
  EXPECT_TRUE(leftoverSegments(tag).empty()) << leftoverSegments(tag)[0];
  std::vector<Status> results(kRanks);
  runRankThreads(kRanks, [&](int rank) {
    WaitContext wait = waitFor(30);
    Status& st = results[rank];
    for (uint64_t c = 0; c < 3 * kLLSlots && st.isOk(); ++c) {
      for (int k = 1; k < kRanks && st.isOk(); ++k) {
        int dst = (rank + k) % kRanks;
        st = sendPatternChunk(w.transports[rank]->sendTo(dst, kLL), rank, dst, c,
                              chunkSizeFor(rank, dst, c, kLLChunkBytes), wait);
      }
      for (int k = 1; k < kRanks && st.isOk(); ++k) {
        int src = (rank - k + kRanks) % kRanks;
        st = recvPatternChunk(w.transports[rank]->recvFrom(src, kLL), src, rank, c,
                              chunkSizeFor(src, rank, c, kLLChunkBytes), wait);
      }
    }
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_TRUE(results[r].isOk()) << "rank " << r << ": " << results[r].message();
  w.transports.clear();
  EXPECT_TRUE(leftoverSegments(tag).empty());
}

// Processes: every pair exchanges LL and Simple chunks in alternation.
std::string runLLChild(bootstrap::Bootstrap& boot, int rank, int nranks, const std::string& tag, bool futexOnly) {
  Config cfg = smallConfig(4096, 2);
  std::unique_ptr<transport::Transport> t;
  if (std::string error = connectForkedRank(boot, rank, nranks, tag, cfg, &t); !error.empty()) return error;
  Status st;
  WaitContext wait = waitFor(30);
  if (futexOnly) wait.spinMicros = wait.yieldMicros = 0;
  for (uint64_t c = 0; c < 12 * kLLSlots && st.isOk(); ++c) {
    Protocol proto = c % 3 == 2 ? Protocol::kSimple : kLL;
    size_t limit = proto == kLL ? kLLChunkBytes : cfg.chunkBytes;
    for (int k = 1; k < nranks && st.isOk(); ++k) {
      int dst = (rank + k) % nranks;
      st = sendPatternChunk(t->sendTo(dst, proto), rank, dst, c, chunkSizeFor(rank, dst, c, limit), wait);
    }
    for (int k = 1; k < nranks && st.isOk(); ++k) {
      int src = (rank - k + nranks) % nranks;
      st = recvPatternChunk(t->recvFrom(src, proto), src, rank, c, chunkSizeFor(src, rank, c, limit), wait);
    }
  }
  if (!st.isOk()) return st.message();
  st = boot.barrier(waitFor(20));  // nobody unmaps before everyone has received everything
  return st.isOk() ? std::string() : "final barrier: " + st.message();
}

void runLLProcesses(int nranks, bool futexOnly) {
  std::string tag = uniqueJobTag();
  std::vector<int> codes = runForkedRanks(nranks, [&](int rank, bootstrap::Bootstrap& boot) {
    return runLLChild(boot, rank, nranks, tag, futexOnly);
  });
  for (int r = 0; r < nranks; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r << " failed (see its stderr)";
  EXPECT_TRUE(leftoverSegments(tag).empty());
}

TEST(ShmLLProcesses, ThreeProcessesAllPairsBothProtocols) { runLLProcesses(3, false); }
TEST(ShmLLProcesses, TwoProcessesFutexOnlyWaits) { runLLProcesses(2, true); }

}  // namespace
}  // namespace loom::testing::shm
