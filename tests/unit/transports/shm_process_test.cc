// The shared-memory transport between real processes. The test process forks
// the ranks and acts as their rendezvous: each child reaches it through a
// socketpair, and an allGather is "every child sends its slot, the parent
// sends back the whole table" (a stand-in for src/bootstrap, developed
// separately). Children report failures through their exit status and stderr.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "common/format.h"
#include "transports/shm/shm_transport.h"
#include "unit/transports/shm_test_util.h"

namespace loom::testing::shm {
namespace {

// Reads or writes exactly `bytes`, giving up at the deadline or on EOF.
bool transferAll(int fd, void* buf, size_t bytes, bool writing, const Deadline& deadline) {
  auto* p = static_cast<char*>(buf);
  while (bytes > 0) {
    pollfd pfd{fd, static_cast<short>(writing ? POLLOUT : POLLIN), 0};
    int ready = ::poll(&pfd, 1, deadline.remainingMillis(100));
    if (ready < 0 && errno != EINTR) return false;
    if (ready <= 0) {
      if (deadline.expired()) return false;
      continue;
    }
    // MSG_NOSIGNAL: a closed rendezvous is an error to report, not a SIGPIPE.
    ssize_t n = writing ? ::send(fd, p, bytes, MSG_NOSIGNAL) : ::recv(fd, p, bytes, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

// The child's end of the rendezvous.
class SocketPairBootstrap final : public bootstrap::Bootstrap {
 public:
  SocketPairBootstrap(int fd, int rank, int nranks) : fd_(fd), rank_(rank), nranks_(nranks) {}
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  Status allGather(void* data, size_t bytes, const WaitContext& wait) override {
    uint64_t header = bytes;
    auto* mine = static_cast<char*>(data) + rank_ * bytes;
    if (!transferAll(fd_, &header, sizeof header, true, wait.deadline) ||
        !transferAll(fd_, mine, bytes, true, wait.deadline) ||
        !transferAll(fd_, data, bytes * nranks_, false, wait.deadline))
      return makeError(Code::kRemoteError, "rendezvous of rank %d failed", rank_);
    return Status::ok();
  }
  Status barrier(const WaitContext& wait) override {
    std::vector<char> token(nranks_);
    return allGather(token.data(), 1, wait);
  }

 private:
  int fd_;
  int rank_;
  int nranks_;
};

// The parent's side: serves rounds until every child has hung up.
void serveRendezvous(const std::vector<int>& fds, const Deadline& deadline) {
  const size_t n = fds.size();
  for (;;) {
    uint64_t bytes = 0;
    std::vector<char> table;
    for (size_t r = 0; r < n; ++r) {
      uint64_t b = 0;
      if (!transferAll(fds[r], &b, sizeof b, false, deadline)) return;  // a child is done (or died)
      if (r == 0) {
        bytes = b;
        table.assign(bytes * n, 0);
      }
      if (b != bytes || !transferAll(fds[r], table.data() + r * bytes, bytes, false, deadline)) return;
    }
    for (size_t r = 0; r < n; ++r)
      if (!transferAll(fds[r], table.data(), table.size(), true, deadline)) return;
  }
}

// One child rank: connect to every other rank, exchange rounds of patterned
// chunks, check that no segment name survives connect().
std::string runChildRank(int fd, int rank, int nranks, const std::string& tag, bool futexOnly) {
  SocketPairBootstrap boot(fd, rank, nranks);
  Config cfg = smallConfig(16 * 1024, 2);
  std::vector<transport::PeerInfo> infos(nranks);
  transport::SetupContext ctx;
  ctx.rank = rank;
  ctx.nranks = nranks;
  ctx.peers = &infos;
  ctx.jobTag = tag;
  ctx.config = &cfg;
  ctx.bootstrap = &boot;
  ctx.wait = waitFor(20);
  auto t = transport::shmTransportFactory().create();
  Status st = t->connect(ctx, allPeersOf(rank, nranks));
  if (!st.isOk()) return "connect: " + st.message();
  // Each rank unlinks its own segment on its way out of connect(): wait for all.
  st = boot.barrier(waitFor(20));
  if (!st.isOk()) return "barrier after connect: " + st.message();
  if (!leftoverSegments(tag).empty()) return "segment left after connect: " + leftoverSegments(tag)[0];
  WaitContext wait = waitFor(20);
  if (futexOnly) wait.spinMicros = wait.yieldMicros = 0;
  for (uint64_t c = 0; c < 40 && st.isOk(); ++c) {
    for (int k = 1; k < nranks && st.isOk(); ++k) {
      int dst = (rank + k) % nranks;
      st = sendPatternChunk(t->sendTo(dst, transport::Protocol::kSimple), rank, dst, c, chunkSizeFor(rank, dst, c, cfg.chunkBytes), wait);
    }
    for (int k = 1; k < nranks && st.isOk(); ++k) {
      int src = (rank - k + nranks) % nranks;
      st = recvPatternChunk(t->recvFrom(src, transport::Protocol::kSimple), src, rank, c, chunkSizeFor(src, rank, c, cfg.chunkBytes), wait);
    }
  }
  if (!st.isOk()) return st.message();
  // Nobody unmaps before everyone has received everything.
  st = boot.barrier(waitFor(20));
  return st.isOk() ? std::string() : "final barrier: " + st.message();
}

void runProcesses(int nranks, bool futexOnly) {
  std::string tag = uniqueJobTag();
  std::vector<int> parentFds;
  std::vector<pid_t> pids;
  std::fflush(nullptr);  // so children do not repeat buffered output
  for (int r = 0; r < nranks; ++r) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int fd : parentFds) ::close(fd);
      ::close(sv[0]);
      std::string err = runChildRank(sv[1], r, nranks, tag, futexOnly);
      if (!err.empty()) std::fprintf(stderr, "child rank %d: %s\n", r, err.c_str());
      std::fflush(stderr);
      ::_exit(err.empty() ? 0 : 1);
    }
    ::close(sv[1]);
    parentFds.push_back(sv[0]);
    pids.push_back(pid);
  }
  serveRendezvous(parentFds, Deadline::after(60));
  for (int fd : parentFds) ::close(fd);
  for (int r = 0; r < nranks; ++r) {
    int status = 0;
    ASSERT_EQ(::waitpid(pids[r], &status, 0), pids[r]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank " << r << " failed (see its stderr)";
  }
  EXPECT_TRUE(leftoverSegments(tag).empty());
}

TEST(ShmProcesses, TwoProcessesExchangeChunks) { runProcesses(2, false); }
TEST(ShmProcesses, FourProcessesAllPairs) { runProcesses(4, false); }
// Futex wake-ups across processes (the wait goes straight to sleeping).
TEST(ShmProcesses, ThreeProcessesFutexOnlyWaits) { runProcesses(3, true); }

// A rank that dies before connecting makes the others fail, not hang, and
// leaves nothing behind.
TEST(ShmProcesses, DeadRankFailsTheOthersPromptly) {
  std::string tag = uniqueJobTag();
  constexpr int kRanks = 3;
  std::vector<int> parentFds;
  std::vector<pid_t> pids;
  std::fflush(nullptr);
  for (int r = 0; r < kRanks; ++r) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (r == 1) ::_exit(3);  // dies before connect()
      for (int fd : parentFds) ::close(fd);
      ::close(sv[0]);
      std::string err = runChildRank(sv[1], r, kRanks, tag, false);
      ::_exit(err.find("rendezvous of rank") != std::string::npos ? 0 : 1);
    }
    ::close(sv[1]);
    parentFds.push_back(sv[0]);
    pids.push_back(pid);
  }
  auto start = Clock::now();
  serveRendezvous(parentFds, Deadline::after(30));
  for (int fd : parentFds) ::close(fd);
  for (int r = 0; r < kRanks; ++r) {
    int status = 0;
    ASSERT_EQ(::waitpid(pids[r], &status, 0), pids[r]);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), r == 1 ? 3 : 0) << "rank " << r;
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10.0);
  EXPECT_TRUE(leftoverSegments(tag).empty());
}

}  // namespace
}  // namespace loom::testing::shm
