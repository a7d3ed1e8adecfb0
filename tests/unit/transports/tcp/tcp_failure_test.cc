// Peer failures with ranks as forked processes: a peer that exits mid-stream
// (EOF without goodbye) or with unread data (reset) fails the waits of the
// survivor with an error naming the peer's rank and host; a normal close
// (both transports destroyed) is not an error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tests/unit/transports/shm/shm_fork_harness.h"
#include "tests/unit/transports/shm/shm_test_util.h"
#include "tests/unit/transports/transport_world.h"

namespace loom::testing::tcp {
namespace {

using transports::Backend;
using transports::connectForkedRank;
using transports::tcpConfig;

bool names(const std::string& message, const std::string& what) { return message.find(what) != std::string::npos; }

TEST(TcpFailure, PeerExitingMidStreamFailsTheReceiverNamingIt) {
  const Config cfg = tcpConfig(64 << 10, 4, 2);
  auto codes = shm::runForkedRanks(2, [&](int rank, bootstrap::Bootstrap& boot) -> std::string {
    std::vector<transport::PeerInfo> peers;
    std::unique_ptr<transport::Transport> t;
    if (auto e = connectForkedRank(Backend::kTcp, boot, rank, 2, "tcpfail", cfg, peers, &t); !e.empty()) return e;
    if (rank == 1) {
      for (uint64_t c = 0; c < 3; ++c) {
        Status s = shm::sendPatternChunk(t->sendTo(0, transport::Protocol::kSimple), 1, 0, c, 1000, shm::waitFor(5));
        if (!s.isOk()) return s.message();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the chunks leave
      _exit(0);  // no destructor: no goodbye, the kernel closes the sockets
    }
    auto& recv = t->recvFrom(1, transport::Protocol::kSimple);
    for (uint64_t c = 0; c < 3; ++c) {
      Status s = shm::recvPatternChunk(recv, 1, 0, c, 1000, shm::waitFor(5));
      if (!s.isOk()) return "chunk " + std::to_string(c) + " before the exit: " + s.message();
    }
    const std::byte* data = nullptr;
    size_t bytes = 0;
    Status s = recv.acquire(&data, &bytes, shm::waitFor(5));
    if (s.isOk()) return "a fourth chunk arrived from a dead peer";
    if (s.code() == Code::kTimeout) return "timed out instead of noticing the EOF: " + s.message();
    if (!names(s.message(), "rank 1") || !names(s.message(), "forkhost1"))
      return "error does not name rank 1 and its host: " + s.message();
    // The transport's health reports it too, for waits on other peers.
    if (!t->health() || t->health()->check().isOk()) return "health() does not report the dead peer";
    _exit(0);  // skip the destructor's goodbye to a dead peer
  }, 30);
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST(TcpFailure, PeerResetWhileSendingFailsTheSenderNamingIt) {
  const Config cfg = tcpConfig(1 << 20, 4, 2);
  auto codes = shm::runForkedRanks(2, [&](int rank, bootstrap::Bootstrap& boot) -> std::string {
    std::vector<transport::PeerInfo> peers;
    std::unique_ptr<transport::Transport> t;
    if (auto e = connectForkedRank(Backend::kTcp, boot, rank, 2, "tcpfail", cfg, peers, &t); !e.empty()) return e;
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // unread data piles up
      _exit(0);  // closing with unread data sends a reset
    }
    auto& send = t->sendTo(1, transport::Protocol::kSimple);
    for (uint64_t c = 0; c < 10000; ++c) {
      std::byte* slot = nullptr;
      Status s = send.acquire(&slot, shm::waitFor(10));
      if (!s.isOk()) {
        if (s.code() == Code::kTimeout) return "timed out instead of noticing the reset: " + s.message();
        if (!names(s.message(), "rank 1") || !names(s.message(), "forkhost1"))
          return "error does not name rank 1 and its host: " + s.message();
        _exit(0);
      }
      send.commit(1 << 20);
    }
    return "10000 MiB sent to a dead peer without an error";
  }, 30);
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST(TcpFailure, RanksWithDifferentChunkSizesBothFailAtOnceNamingBothValues) {
  // A setting that must match on every rank, set differently: both ranks
  // must fail now with kInvalidUsage, not wait for the 20 s deadline.
  auto codes = shm::runForkedRanks(2, [&](int rank, bootstrap::Bootstrap& boot) -> std::string {
    const Config cfg = tcpConfig(rank == 0 ? 64 << 10 : 128 << 10, 4, 2);
    std::vector<transport::PeerInfo> peers;
    std::unique_ptr<transport::Transport> t;
    const auto start = std::chrono::steady_clock::now();
    const std::string e = connectForkedRank(Backend::kTcp, boot, rank, 2, "tcpgeom", cfg, peers, &t);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (e.empty()) return "connected despite different chunk sizes";
    if (seconds > 5) return "failed only after " + std::to_string(seconds) + " s: " + e;
    if (!names(e, "65536") || !names(e, "131072") || !names(e, "LOOM_CHUNK_SIZE"))
      return "error does not name both chunk sizes and the setting: " + e;
    return "";
  }, 30);
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

TEST(TcpFailure, OrderlyCloseIsNotAFailure) {
  const Config cfg = tcpConfig(4096, 2, 2);
  auto codes = shm::runForkedRanks(2, [&](int rank, bootstrap::Bootstrap& boot) -> std::string {
    std::vector<transport::PeerInfo> peers;
    std::unique_ptr<transport::Transport> t;
    if (auto e = connectForkedRank(Backend::kTcp, boot, rank, 2, "tcpfail", cfg, peers, &t); !e.empty()) return e;
    if (rank == 1) {
      Status s = shm::sendPatternChunk(t->sendTo(0, transport::Protocol::kSimple), 1, 0, 0, 100, shm::waitFor(5));
      if (!s.isOk()) return s.message();
      t.reset();  // goodbye, then close
      return "";
    }
    Status s = shm::recvPatternChunk(t->recvFrom(1, transport::Protocol::kSimple), 1, 0, 0, 100, shm::waitFor(5));
    if (!s.isOk()) return s.message();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 1 has closed by now
    if (!t->health()) return "no health";
    Status h = t->health()->check();
    if (!h.isOk()) return "an orderly close counts as a failure: " + h.message();
    const std::byte* data = nullptr;
    size_t bytes = 0;
    Status w = t->recvFrom(1, transport::Protocol::kSimple).acquire(&data, &bytes, shm::waitFor(5));
    if (w.isOk() || !names(w.message(), "closed its connection")) return "waiting on a closed peer: " + w.message();
    return "";
  }, 30);
  EXPECT_EQ(codes, (std::vector<int>{0, 0}));
}

}  // namespace
}  // namespace loom::testing::tcp
