// Latency of LL next to Simple over the shared-memory transport: ping-pong
// between two rank threads at a few message sizes. The numbers are printed
// for the record, not asserted (the machine is shared); every payload is
// checked, so the test still fails on wrong data.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "tests/support/rank_threads.h"
#include "transports/shm/shm_layout.h"
#include "transports/shm/shm_transport.h"
#include "tests/unit/transports/shm/shm_test_util.h"
#include "tests/unit/transports/transport_world.h"

namespace loom::testing::shm {
namespace {

using transports::Backend;
using transports::World;
using transports::connectWorld;

using transport::Protocol;

struct Latency {
  Status status;
  double medianOneWayMicros = 0;
};

Status sendCopy(transport::SendConnection& tx, const std::vector<std::byte>& payload, const WaitContext& wait) {
  std::byte* slot = nullptr;
  LOOM_TRY(tx.acquire(&slot, wait));
  std::memcpy(slot, payload.data(), payload.size());
  tx.commit(payload.size());
  return Status::ok();
}

Status receiveAndCompare(transport::RecvConnection& rx, const std::vector<std::byte>& expect, uint64_t i,
                         const WaitContext& wait) {
  const std::byte* data = nullptr;
  size_t bytes = 0;
  LOOM_TRY(rx.acquire(&data, &bytes, wait));
  bool same = bytes == expect.size() && std::memcmp(data, expect.data(), bytes) == 0;
  rx.release();
  LOOM_ENFORCE(same, Code::kInternalError, "ping-pong message %llu: %zu bytes, wrong size or content",
               static_cast<unsigned long long>(i), bytes);
  return Status::ok();
}

// Rank 0 sends message 2i, rank 1 answers with 2i + 1, each of `bytes`
// bytes. Payloads are precomputed (so the timing is the transport's, not the
// pattern generator's) and alternate between two contents per direction, so
// a chunk delivered twice or out of order shows in the comparison.
Latency pingPong(Protocol proto, size_t bytes, int roundTrips) {
  World w = connectWorld(Backend::kShm, 2, uniqueJobTag(), smallConfig(64 * 1024, 4), [](int r) { return std::vector<int>{1 - r}; });
  if (!w.allOk()) return {Status(Code::kInternalError, w.firstError())};
  std::vector<std::byte> payload[2][2];  // [sender rank][message parity]
  for (int r = 0; r < 2; ++r)
    for (int p = 0; p < 2; ++p) {
      payload[r][p].resize(bytes);
      fillPattern(payload[r][p].data(), bytes, r, 1 - r, p);
    }
  std::vector<Status> statuses(2);
  std::vector<double> samples;
  samples.reserve(roundTrips);
  runRankThreads(2, [&](int rank) {
    int peer = 1 - rank;
    transport::SendConnection& tx = w.transports[rank]->sendTo(peer, proto);
    transport::RecvConnection& rx = w.transports[rank]->recvFrom(peer, proto);
    WaitContext wait = waitFor(30);
    Status& st = statuses[rank];
    for (uint64_t i = 0; i < static_cast<uint64_t>(roundTrips) && st.isOk(); ++i) {
      auto start = Clock::now();
      if (rank == 0) {
        st = sendCopy(tx, payload[0][i % 2], wait);
        if (st.isOk()) st = receiveAndCompare(rx, payload[1][i % 2], 2 * i + 1, wait);
        samples.push_back(std::chrono::duration<double>(Clock::now() - start).count());
      } else {
        st = receiveAndCompare(rx, payload[0][i % 2], 2 * i, wait);
        if (st.isOk()) st = sendCopy(tx, payload[1][i % 2], wait);
      }
    }
  });
  for (const Status& s : statuses)
    if (!s.isOk()) return {s};
  std::sort(samples.begin(), samples.end());
  return {Status::ok(), samples[samples.size() / 2] / 2 * 1e6};
}

TEST(ShmLLPerf, PingPongLatencyAgainstSimple) {
  constexpr int kRoundTrips = 2000;
  for (size_t bytes : {size_t{8}, size_t{256}, size_t{1024}, size_t{transport::shm::kLLChunkBytes}}) {
    Latency simple = pingPong(Protocol::kSimple, bytes, kRoundTrips);
    ASSERT_TRUE(simple.status.isOk()) << simple.status.message();
    Latency ll = pingPong(Protocol::kLL, bytes, kRoundTrips);
    ASSERT_TRUE(ll.status.isOk()) << ll.status.message();
    std::printf("[shm perf] one-way latency, %zu-byte chunks, 2 rank threads: Simple %.2f us, LL %.2f us (median)\n",
                bytes, simple.medianOneWayMicros, ll.medianOneWayMicros);
  }
}

}  // namespace
}  // namespace loom::testing::shm
