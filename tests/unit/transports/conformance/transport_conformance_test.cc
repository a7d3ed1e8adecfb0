// The transport contract (transports/transport.h), the same cases on every
// backend: connecting, FIFO order with content intact through slot
// wrap-around, the LL protocol where a backend has it, back-pressure (a
// sender with every slot in flight waits, then proceeds once the receiver
// releases), a peer's death (a clear error naming it, long before the
// deadline) and the abort flag. Backend-specific behaviour stays in shm/,
// tcp/, ucx/ and verbs/.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/transports/shm/shm_fork_harness.h"
#include "tests/unit/transports/shm/shm_test_util.h"
#include "tests/unit/transports/transport_world.h"
#if LOOM_TEST_HAVE_VERBS
#include "transports/verbs/emulated_verbs.h"
#endif

namespace loom::testing::transports {

// gtest prints the parameter into each ctest name ("... # GetParam() = tcp");
// found by argument-dependent lookup, so outside the unnamed namespace.
void PrintTo(Backend backend, std::ostream* os);
void PrintTo(Backend backend, std::ostream* os) { *os << backendName(backend); }

namespace {

using transport::Protocol;
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

bool names(const std::string& message, const std::string& what) { return message.find(what) != std::string::npos; }

// Parameterized by value, not by type: ctest then names each case
// Backends/TransportConformance.<Case>/<backend>.
class TransportConformance : public ::testing::TestWithParam<Backend> {
 protected:
  // UCX over its TCP transport on loopback: the set every machine has.
  void SetUp() override {
    if (GetParam() == Backend::kUcx) useUcxTransports("tcp");
  }

  World connect(int nranks, size_t chunkBytes, int slots) const {
    return connectWorld(GetParam(), nranks, shm::uniqueJobTag(), backendConfig(GetParam(), chunkBytes, slots));
  }
};

std::vector<Backend> builtBackends() {
  std::vector<Backend> built;
  for (Backend b : {Backend::kShm, Backend::kTcp, Backend::kUcx, Backend::kVerbs})
    if (backendBuilt(b)) built.push_back(b);
  return built;
}

// Every rank reaches every other, in both directions, right after connect().
TEST_P(TransportConformance, ConnectsEveryPairOfFourRanks) {
  constexpr int kRanks = 4;
  World world = connect(kRanks, 4096, 2);
  ASSERT_TRUE(world.allOk()) << world.firstError();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_NE(world.transports[static_cast<size_t>(r)], nullptr) << "rank " << r;
    EXPECT_TRUE(world.transports[static_cast<size_t>(r)]->supports(Protocol::kSimple)) << "rank " << r;
  }
  auto problems = exchangeAll(world, 1, [](int src, int dst, uint64_t) { return static_cast<size_t>(64 + src * 8 + dst); },
                              20);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(problems[static_cast<size_t>(r)], "") << "rank " << r;
}

// Chunks of every size in [0, chunkBytes] arrive intact and in commit order
// while two slots wrap around hundreds of times, every pair of three ranks at once.
TEST_P(TransportConformance, ChunksArriveInFifoOrderThroughSlotWrapAround) {
  constexpr int kRanks = 3;
  constexpr size_t kChunk = 4096;
  World world = connect(kRanks, kChunk, 2);
  ASSERT_TRUE(world.allOk()) << world.firstError();
  auto problems = exchangeAll(
      world, 400, [](int src, int dst, uint64_t chunk) { return shm::chunkSizeFor(src, dst, chunk, kChunk); }, 30);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(problems[static_cast<size_t>(r)], "") << "rank " << r;
}

// Where a backend has LL connections they keep the same contract (order,
// content, sizes up to their own chunk size). Where it has none, asking for
// one is a usage error, never a silent fallback.
TEST_P(TransportConformance, LLChunksArriveInOrderWhereSupported) {
  constexpr int kRanks = 2;
  World world = connect(kRanks, 4096, 2);
  ASSERT_TRUE(world.allOk()) << world.firstError();
  transport::Transport& t0 = *world.transports[0];
  if (!t0.supports(Protocol::kLL)) {
    std::byte* slot = nullptr;
    Status s = t0.sendTo(1, Protocol::kLL).acquire(&slot, shm::waitFor(1));
    EXPECT_EQ(s.code(), Code::kInvalidUsage) << s.message();
    GTEST_SKIP() << backendName(GetParam())
                 << " has no LL protocol (supports(kLL) is false; an LL acquire is refused as a usage error, checked)";
  }
  ASSERT_TRUE(world.transports[1]->supports(Protocol::kLL));
  const size_t llChunk = t0.sendTo(1, Protocol::kLL).chunkBytes();
  ASSERT_GT(llChunk, 0u);
  auto problems = exchangeAll(
      world, 500, [&](int src, int dst, uint64_t chunk) { return shm::chunkSizeFor(src, dst, chunk, llChunk); }, 30,
      Protocol::kLL);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(problems[static_cast<size_t>(r)], "") << "rank " << r;
}

// A sender that runs ahead of a receiver that releases nothing is stopped
// (the wait times out, tryAcquire says no) after at least `slots` chunks;
// once the receiver drains, the waiting sender proceeds and every chunk
// arrives in order. Large chunks, so kernel socket buffers fill quickly too.
TEST_P(TransportConformance, FullSlotsBlockTheSenderUntilTheReceiverReleases) {
  constexpr size_t kChunk = 256 << 10;
  constexpr int kSlots = 2;
  constexpr uint64_t kMaxChunks = 2048;  // 512 MiB: far beyond any slot count or socket buffer
  World world = connect(2, kChunk, kSlots);
  ASSERT_TRUE(world.allOk()) << world.firstError();
  auto& send = world.transports[0]->sendTo(1, Protocol::kSimple);
  uint64_t committed = 0;
  for (;; ++committed) {
    ASSERT_LT(committed, kMaxChunks) << "the sender never ran out of room: no flow control";
    std::byte* slot = nullptr;
    Status s = send.acquire(&slot, shm::waitFor(0.3));
    if (!s.isOk()) {
      EXPECT_EQ(s.code(), Code::kTimeout) << s.message();
      break;
    }
    shm::fillPattern(slot, kChunk, 0, 1, committed);
    send.commit(kChunk);
  }
  EXPECT_GE(committed, static_cast<uint64_t>(kSlots));
  std::byte* none = nullptr;
  EXPECT_FALSE(send.tryAcquire(&none)) << "a slot appeared with nothing released";

  std::atomic<bool> draining{false};
  std::thread drain([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the sender is waiting by now
    draining = true;
    auto& recv = world.transports[1]->recvFrom(0, Protocol::kSimple);
    for (uint64_t c = 0; c <= committed; ++c) {
      Status s = shm::recvPatternChunk(recv, 0, 1, c, kChunk, shm::waitFor(10));
      ASSERT_TRUE(s.isOk()) << "chunk " << c << ": " << s.message();
    }
  });
  Status s = shm::sendPatternChunk(send, 0, 1, committed, kChunk, shm::waitFor(10));
  EXPECT_TRUE(s.isOk()) << s.message();
  EXPECT_TRUE(draining.load()) << "the sender proceeded before the receiver released anything";
  drain.join();
}

// The abort flag ends a receive that would otherwise wait 20 s, promptly,
// with an error that says so.
TEST_P(TransportConformance, AbortFlagEndsAWaitPromptly) {
  World world = connect(2, 4096, 2);
  ASSERT_TRUE(world.allOk()) << world.firstError();
  std::atomic<bool> abort{false};
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    abort = true;
  });
  const std::byte* data = nullptr;
  size_t bytes = 0;
  const auto start = Clock::now();
  Status s = world.transports[1]->recvFrom(0, Protocol::kSimple).acquire(&data, &bytes, shm::waitFor(20, &abort));
  const double took = secondsSince(start);
  aborter.join();
  EXPECT_EQ(s.code(), Code::kRemoteError) << s.message();
  EXPECT_TRUE(names(s.message(), "aborted")) << s.message();
  EXPECT_LT(took, 2.0);
}

// With nothing sent, a receive ends at its deadline with a timeout naming the peer.
TEST_P(TransportConformance, SilenceEndsInATimeoutNamingThePeer) {
  World world = connect(2, 4096, 2);
  ASSERT_TRUE(world.allOk()) << world.firstError();
  const std::byte* data = nullptr;
  size_t bytes = 0;
  auto& recv = world.transports[1]->recvFrom(0, Protocol::kSimple);
  EXPECT_FALSE(recv.tryAcquire(&data, &bytes));
  const auto start = Clock::now();
  Status s = recv.acquire(&data, &bytes, shm::waitFor(0.3));
  const double took = secondsSince(start);
  EXPECT_EQ(s.code(), Code::kTimeout) << s.message();
  EXPECT_TRUE(names(s.message(), "rank 0")) << s.message();
  EXPECT_GE(took, 0.25);
  EXPECT_LT(took, 2.0);
}

// Rank 1 sends three chunks, then dies without a goodbye. Rank 0 still gets
// the three, then a wait that would last 15 s fails within a few seconds,
// not as a timeout, naming rank 1. Ranks are forked processes killed with
// SIGKILL; on the emulated verbs fabric (one process) the peer's device dies.
TEST_P(TransportConformance, PeerDeathIsAClearErrorNotAHang) {
  constexpr double kWait = 15;
  constexpr double kNoticeWithin = 5;
  const Config cfg = backendConfig(GetParam(), 64 << 10, 4);
  // Rank 0's side: the three chunks, then the failing wait; "" if all as expected.
  auto survivor = [&](transport::Transport& t) -> std::string {
    auto& recv = t.recvFrom(1, Protocol::kSimple);
    for (uint64_t c = 0; c < 3; ++c) {
      Status s = shm::recvPatternChunk(recv, 1, 0, c, 1000, shm::waitFor(5));
      if (!s.isOk()) return "chunk " + std::to_string(c) + " before the death: " + s.message();
    }
    const std::byte* data = nullptr;
    size_t bytes = 0;
    // The communicator's waits watch the backend's peer health; so does this one.
    WaitContext wait = shm::waitFor(kWait);
    wait.health = t.health();
    const auto start = Clock::now();
    Status s = recv.acquire(&data, &bytes, wait);
    const double took = secondsSince(start);
    if (s.isOk()) return "a fourth chunk arrived from a dead peer";
    if (s.code() == Code::kTimeout) return "timed out instead of noticing the death: " + s.message();
    if (!names(s.message(), "rank 1")) return "error does not name rank 1: " + s.message();
    if (took > kNoticeWithin) return "noticed only after " + std::to_string(took) + " s: " + s.message();
    return "";
  };
  auto sendThree = [](transport::Transport& t) -> std::string {
    for (uint64_t c = 0; c < 3; ++c) {
      Status s = shm::sendPatternChunk(t.sendTo(0, Protocol::kSimple), 1, 0, c, 1000, shm::waitFor(5));
      if (!s.isOk()) return s.message();
    }
    return "";
  };

  if (GetParam() == Backend::kVerbs) {
#if LOOM_TEST_HAVE_VERBS
    World world = connectWorld(Backend::kVerbs, 2, shm::uniqueJobTag(), cfg);
    ASSERT_TRUE(world.allOk()) << world.firstError();
    ASSERT_EQ(sendThree(*world.transports[1]), "");
    std::thread killer([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 0 is waiting for a fourth
      world.fabric->killDevice(1);
    });
    EXPECT_EQ(survivor(*world.transports[0]), "");
    killer.join();
#endif
    return;
  }
  const std::string tag = shm::uniqueJobTag();
  auto codes = shm::runForkedRanks(2, [&](int rank, bootstrap::Bootstrap& boot) -> std::string {
    std::vector<transport::PeerInfo> peers;
    std::unique_ptr<transport::Transport> t;
    if (auto e = connectForkedRank(GetParam(), boot, rank, 2, tag, cfg, peers, &t); !e.empty()) return e;
    if (rank == 1) {
      if (auto e = sendThree(*t); !e.empty()) return e;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the chunks leave
      ::kill(::getpid(), SIGKILL);
    }
    if (auto e = survivor(*t); !e.empty()) return e;
    _exit(0);  // skip the destructor's goodbye to a dead peer
  }, 30);
  EXPECT_EQ(codes, (std::vector<int>{0, 128 + SIGKILL}));
  EXPECT_TRUE(shm::leftoverSegments(tag).empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, TransportConformance, ::testing::ValuesIn(builtBackends()),
                         [](const ::testing::TestParamInfo<Backend>& info) { return std::string(backendName(info.param)); });

}  // namespace
}  // namespace loom::testing::transports
