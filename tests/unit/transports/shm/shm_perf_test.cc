// Timing of the shared-memory transport with ranks as threads. The numbers
// are printed for the record, not asserted (the machine is shared), except
// the oversubscription bound, which catches waits that busy-spin for their
// whole time slice instead of yielding and sleeping. Every payload is still
// checked, so these tests fail on wrong data.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "tests/support/rank_threads.h"
#include "transports/shm/shm_transport.h"
#include "tests/unit/transports/shm/shm_test_util.h"
#include "tests/unit/transports/transport_world.h"

namespace loom::testing::shm {
namespace {

using transports::Backend;
using transports::World;
using transports::connectWorld;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Receives one 8-byte chunk and checks that it carries `expect`.
Status receiveValue(transport::RecvConnection& rx, uint64_t expect, const WaitContext& wait) {
  const std::byte* data = nullptr;
  size_t bytes = 0;
  LOOM_TRY(rx.acquire(&data, &bytes, wait));
  uint64_t got = 0;
  if (bytes == sizeof got) std::memcpy(&got, data, sizeof got);
  rx.release();
  LOOM_ENFORCE(bytes == sizeof got && got == expect, Code::kInternalError, "ping-pong: got %zu bytes (%llu), expected %llu",
               bytes, static_cast<unsigned long long>(got), static_cast<unsigned long long>(expect));
  return Status::ok();
}

Status sendValue(transport::SendConnection& tx, uint64_t value, const WaitContext& wait) {
  std::byte* slot = nullptr;
  LOOM_TRY(tx.acquire(&slot, wait));
  std::memcpy(slot, &value, sizeof value);
  tx.commit(sizeof value);
  return Status::ok();
}

struct PingPongResult {
  std::vector<Status> statuses;
  double seconds = 0;
  std::vector<double> roundTripSeconds;  // measured by rank 0, one per round trip
};

// Ping-pong of 8-byte chunks between `pairs` pairs of rank threads (rank 2p
// and 2p+1); both sides check every value.
PingPongResult pingPong(int pairs, int roundTrips) {
  PingPongResult out;
  int nranks = 2 * pairs;
  World w = connectWorld(Backend::kShm, nranks, uniqueJobTag(), smallConfig(4096, 4), [](int r) { return std::vector<int>{r ^ 1}; });
  if (!w.allOk()) {
    out.statuses.assign(1, Status(Code::kInternalError, w.firstError()));
    return out;
  }
  out.statuses.assign(nranks, Status::ok());
  out.roundTripSeconds.reserve(roundTrips);
  auto start = Clock::now();
  runRankThreads(nranks, [&](int rank) {
    int peer = rank ^ 1;
    transport::SendConnection& tx = w.transports[rank]->sendTo(peer, transport::Protocol::kSimple);
    transport::RecvConnection& rx = w.transports[rank]->recvFrom(peer, transport::Protocol::kSimple);
    WaitContext wait = waitFor(30);
    Status& st = out.statuses[rank];
    for (uint64_t i = 0; i < static_cast<uint64_t>(roundTrips) && st.isOk(); ++i) {
      if (rank % 2 == 0) {
        auto t0 = Clock::now();
        st = sendValue(tx, i, wait);
        if (st.isOk()) st = receiveValue(rx, i, wait);
        if (rank == 0) out.roundTripSeconds.push_back(secondsSince(t0));
      } else {
        st = receiveValue(rx, i, wait);
        if (st.isOk()) st = sendValue(tx, i, wait);
      }
    }
  });
  out.seconds = secondsSince(start);
  return out;
}

TEST(ShmPerf, OneWayLatencyOfSmallChunks) {
  constexpr int kRoundTrips = 10000;
  PingPongResult r = pingPong(1, kRoundTrips);
  for (const Status& s : r.statuses) ASSERT_TRUE(s.isOk()) << s.message();
  std::vector<double> sorted = r.roundTripSeconds;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(sorted.size(), static_cast<size_t>(kRoundTrips));
  std::printf("[shm perf] one-way latency, 8-byte chunks, 2 rank threads: median %.2f us, p10 %.2f us, "
              "mean %.2f us (%d round trips in %.3f s)\n",
              sorted[sorted.size() / 2] / 2 * 1e6, sorted[sorted.size() / 10] / 2 * 1e6,
              r.seconds / (2.0 * kRoundTrips) * 1e6, kRoundTrips, r.seconds);
}

// Streams 256 KiB chunks: the sender memcpys into the slot, the receiver
// memcpys out of it (what a send/recv costs), checking a word per page.
TEST(ShmPerf, StreamingBandwidthOf256KiBChunks) {
  constexpr size_t kChunk = 256 * 1024;
  constexpr int kChunks = 4000;  // ~1 GiB
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), smallConfig(kChunk, 4), [](int r) { return std::vector<int>{1 - r}; });
  ASSERT_TRUE(w.allOk()) << w.firstError();
  std::vector<Status> results(2);
  auto start = Clock::now();
  runRankThreads(2, [&](int rank) {
    std::vector<uint64_t> buffer(kChunk / sizeof(uint64_t));
    WaitContext wait = waitFor(60);
    Status& st = results[rank];
    for (uint64_t c = 0; c < kChunks && st.isOk(); ++c) {
      if (rank == 0) {
        for (size_t i = 0; i < buffer.size(); i += 512) buffer[i] = c * 1000003 + i;
        std::byte* slot = nullptr;
        st = w.transports[0]->sendTo(1, transport::Protocol::kSimple).acquire(&slot, wait);
        if (!st.isOk()) break;
        std::memcpy(slot, buffer.data(), kChunk);
        w.transports[0]->sendTo(1, transport::Protocol::kSimple).commit(kChunk);
      } else {
        const std::byte* data = nullptr;
        size_t bytes = 0;
        st = w.transports[1]->recvFrom(0, transport::Protocol::kSimple).acquire(&data, &bytes, wait);
        if (!st.isOk()) break;
        std::memcpy(buffer.data(), data, bytes);
        w.transports[1]->recvFrom(0, transport::Protocol::kSimple).release();
        if (bytes != kChunk) st = Status(Code::kInternalError, "short chunk");
        for (size_t i = 0; i < buffer.size() && st.isOk(); i += 512)
          if (buffer[i] != c * 1000003 + i) st = Status(Code::kInternalError, "chunk content mismatch");
      }
    }
  });
  double took = secondsSince(start);
  for (const Status& s : results) ASSERT_TRUE(s.isOk()) << s.message();
  std::printf("[shm perf] streaming 256 KiB chunks (memcpy in + out), 4 slots: %.2f GB/s (%d chunks in %.3f s)\n",
              kChunk * static_cast<double>(kChunks) / took / 1e9, kChunks, took);
}

// 8 rank threads on (typically) 2 cores: waits must hand the core over
// quickly rather than spin away their time slices.
TEST(ShmPerf, OversubscribedPingPongFinishesQuickly) {
  constexpr int kRoundTrips = 2000;
  PingPongResult r = pingPong(4, kRoundTrips);
  for (const Status& s : r.statuses) ASSERT_TRUE(s.isOk()) << s.message();
  double took = r.seconds;
  std::printf("[shm perf] 8 threads (4 ping-pong pairs) x %d round trips: %.3f s (%.1f us per round trip)\n",
              kRoundTrips, took, took / kRoundTrips * 1e6);
  EXPECT_LT(took, 3.0);
}

}  // namespace
}  // namespace loom::testing::shm
