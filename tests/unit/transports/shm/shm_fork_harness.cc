#include "tests/unit/transports/shm/shm_fork_harness.h"

#include "transports/shm/shm_transport.h"
#include "tests/unit/transports/shm/shm_test_util.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

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

}  // namespace

Status SocketPairBootstrap::allGather(void* data, size_t bytes, const WaitContext& wait) {
  uint64_t header = bytes;
  auto* mine = static_cast<char*>(data) + rank_ * bytes;
  if (!transferAll(fd_, &header, sizeof header, true, wait.deadline) ||
      !transferAll(fd_, mine, bytes, true, wait.deadline) ||
      !transferAll(fd_, data, bytes * nranks_, false, wait.deadline))
    return makeError(Code::kRemoteError, "rendezvous of rank %d failed", rank_);
  return Status::ok();
}

Status SocketPairBootstrap::barrier(const WaitContext& wait) {
  std::vector<char> token(nranks_);
  return allGather(token.data(), 1, wait);
}

std::vector<int> runForkedRanks(int nranks, const std::function<std::string(int rank, bootstrap::Bootstrap& boot)>& body,
                                double seconds) {
  std::vector<int> parentFds;
  std::vector<pid_t> pids;
  std::vector<int> codes(nranks, -1);
  std::fflush(nullptr);  // so children do not repeat buffered output
  for (int r = 0; r < nranks; ++r) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) break;
    pid_t pid = ::fork();
    if (pid < 0) {
      ::close(sv[0]);
      ::close(sv[1]);
      break;
    }
    if (pid == 0) {
      for (int fd : parentFds) ::close(fd);
      ::close(sv[0]);
      SocketPairBootstrap boot(sv[1], r, nranks);
      std::string err = body(r, boot);
      if (!err.empty()) std::fprintf(stderr, "child rank %d: %s\n", r, err.c_str());
      std::fflush(stderr);
      ::_exit(err.empty() ? 0 : 1);
    }
    ::close(sv[1]);
    parentFds.push_back(sv[0]);
    pids.push_back(pid);
  }
  // With fewer children than ranks (fork failed), the rendezvous never
  // completes: the children time out and the missing ones read as -1.
  serveRendezvous(parentFds, Deadline::after(seconds));
  for (int fd : parentFds) ::close(fd);
  for (size_t r = 0; r < pids.size(); ++r) {
    int status = 0;
    if (::waitpid(pids[r], &status, 0) != pids[r]) continue;
    codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
  }
  return codes;
}

std::string connectForkedRank(bootstrap::Bootstrap& boot, int rank, int nranks, const std::string& tag,
                              const Config& cfg, std::unique_ptr<transport::Transport>* out) {
  std::vector<transport::PeerInfo> infos(static_cast<size_t>(nranks));
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
  *out = std::move(t);
  return "";
}

}  // namespace loom::testing::shm
