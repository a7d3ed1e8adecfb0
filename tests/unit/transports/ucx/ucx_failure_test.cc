// Peer failures with ranks as forked processes, over UCX's TCP and
// shared-memory transports: a peer that dies mid-stream fails the survivor's
// waits (and health()) with an error naming the peer's rank and host, well
// before the deadline; an orderly close (goodbye) is not a failure; the
// transport leaves no thread behind.
#include <gtest/gtest.h>
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tests/unit/transports/shm/shm_fork_harness.h"
#include "tests/unit/transports/shm/shm_test_util.h"
#include "tests/unit/transports/transport_world.h"

namespace loom::testing::ucx {
namespace {

using transports::Backend;
using transports::connectForkedRank;
using transports::ucxConfig;
using transports::useUcxTransports;

bool names(const std::string& message, const std::string& what) { return message.find(what) != std::string::npos; }

int threadCount() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++n;
    ::closedir(d);
  }
  return n;
}

class UcxFailure : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { useUcxTransports(GetParam()); }
};

TEST_P(UcxFailure, PeerKilledMidStreamFailsTheReceiverNamingIt) {
  const Config cfg = ucxConfig(64 << 10, 4);
  auto codes = shm::runForkedRanks(2, [&](int rank, bootstrap::Bootstrap& boot) -> std::string {
    std::vector<transport::PeerInfo> peers;
    std::unique_ptr<transport::Transport> t;
    if (auto e = connectForkedRank(Backend::kUcx, boot, rank, 2, "ucxfail", cfg, peers, &t); !e.empty()) return e;
    if (rank == 1) {
      for (uint64_t c = 0; c < 3; ++c) {
        Status s = shm::sendPatternChunk(t->sendTo(0, transport::Protocol::kSimple), 1, 0, c, 1000, shm::waitFor(5));
        if (!s.isOk()) return s.message();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the chunks leave
      ::kill(::getpid(), SIGKILL);
    }
    auto& recv = t->recvFrom(1, transport::Protocol::kSimple);
    for (uint64_t c = 0; c < 3; ++c) {
      Status s = shm::recvPatternChunk(recv, 1, 0, c, 1000, shm::waitFor(5));
      if (!s.isOk()) return "chunk " + std::to_string(c) + " before the kill: " + s.message();
    }
    const std::byte* data = nullptr;
    size_t bytes = 0;
    const auto start = std::chrono::steady_clock::now();
    Status s = recv.acquire(&data, &bytes, shm::waitFor(15));
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s.isOk()) return "a fourth chunk arrived from a dead peer";
    if (s.code() != Code::kRemoteError) return "expected a remote error, got: " + s.message();
    if (!names(s.message(), "rank 1") || !names(s.message(), "forkhost1"))
      return "error does not name rank 1 and its host: " + s.message();
    if (took > 10) return "noticed only after " + std::to_string(took) + " s: " + s.message();
    if (!t->health() || t->health()->check().isOk()) return "health() does not report the dead peer";
    const int before = threadCount();
    t.reset();  // closes against a dead peer: bounded, and the progress thread goes
    if (threadCount() >= before) return "destroying the transport left its progress thread";
    return "";
  }, 40);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], 128 + SIGKILL);
}

TEST_P(UcxFailure, OrderlyCloseIsNotAFailure) {
  const Config cfg = ucxConfig(4096, 2);
  auto codes = shm::runForkedRanks(2, [&](int rank, bootstrap::Bootstrap& boot) -> std::string {
    const int threadsBefore = threadCount();
    std::vector<transport::PeerInfo> peers;
    std::unique_ptr<transport::Transport> t;
    if (auto e = connectForkedRank(Backend::kUcx, boot, rank, 2, "ucxfail", cfg, peers, &t); !e.empty()) return e;
    if (rank == 1) {
      Status s = shm::sendPatternChunk(t->sendTo(0, transport::Protocol::kSimple), 1, 0, 0, 100, shm::waitFor(5));
      if (!s.isOk()) return s.message();
      const auto start = std::chrono::steady_clock::now();
      t.reset();  // goodbye, then close
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (took > 2.5) return "an orderly close took " + std::to_string(took) + " s";
      if (threadCount() > threadsBefore) return "threads left after destroying the transport";
      return "";
    }
    Status s = shm::recvPatternChunk(t->recvFrom(1, transport::Protocol::kSimple), 1, 0, 0, 100, shm::waitFor(5));
    if (!s.isOk()) return s.message();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // rank 1 has closed by now
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

INSTANTIATE_TEST_SUITE_P(Tls, UcxFailure, ::testing::Values("tcp", "sm"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace loom::testing::ucx
