#include "tests/faults/peer_failure/forked_rank_faults.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "loom/loom.h"

namespace loom::testing::faults {
namespace {

int64_t monotonicNanos() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

double secondsSince(int64_t startNanos) { return static_cast<double>(monotonicNanos() - startNanos) / 1e9; }

// Entries of a directory whose name starts with `prefix` ("" counts all but . and ..).
std::vector<std::string> listDir(const char* dir, const std::string& prefix) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir)) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      if (name.compare(0, prefix.size(), prefix) == 0) names.push_back(name);
    }
    ::closedir(d);
  }
  return names;
}

int openFds() { return static_cast<int>(listDir("/proc/self/fd", "").size()) - 1; }  // minus opendir's own
int threads() { return static_cast<int>(listDir("/proc/self/task", "").size()); }

// A port that was free a moment ago, for the bootstrap root of rank 0.
int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

std::string randomSecret() {
  unsigned char bytes[16];
  if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) std::abort();
  std::string hex;
  for (unsigned char b : bytes) {
    char two[3];
    std::snprintf(two, sizeof two, "%02x", b);
    hex += two;
  }
  return hex;
}

struct Buffers {
  std::vector<float> send, recv;
};

loomResult_t runOnce(const std::string& name, loomComm_t comm, Buffers& b, size_t count, int rank, int nranks,
                     loomStream_t stream = nullptr) {
  float* s = b.send.data();
  float* r = b.recv.data();
  if (stream) {
    // Asynchronous: the worker thread runs it; the error comes back through the stream.
    loomResult_t queued = loomAllReduce(s, r, count, loomFloat32, loomSum, comm, stream);
    return queued != loomSuccess ? queued : loomStreamSynchronize(stream);
  }
  if (name == "allreduce") return loomAllReduce(s, r, count, loomFloat32, loomSum, comm, nullptr);
  if (name == "broadcast") return loomBroadcast(s, r, count, loomFloat32, 0, comm, nullptr);
  if (name == "reduce") return loomReduce(s, r, count, loomFloat32, loomSum, 0, comm, nullptr);
  if (name == "reducescatter") return loomReduceScatter(s, r, count, loomFloat32, loomSum, comm, nullptr);
  if (name == "allgather") return loomAllGather(s, r, count, loomFloat32, comm, nullptr);
  if (name == "alltoall") return loomAllToAll(s, r, count, loomFloat32, comm, nullptr);
  if (name == "barrier") return loomBarrier(comm, nullptr);
  if (name == "sendrecv") {
    loomGroupStart();
    loomSend(s, count, loomFloat32, (rank + 1) % nranks, comm, nullptr);
    loomRecv(r, count, loomFloat32, (rank + nranks - 1) % nranks, comm, nullptr);
    return loomGroupEnd();
  }
  return loomInvalidArgument;
}

// The body of one forked rank; writes "R" when it has run one collective,
// then (survivors) one report line. Never returns.
[[noreturn]] void rankMain(const FaultCase& c, int rank, int port, const std::string& secret, const std::string& dumpDir,
                           int out) {
  RankReport rep;
  rep.rank = rank;
  rep.fdsBefore = openFds();
  rep.tasksBefore = threads();
  ::setenv("RANK", std::to_string(rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(c.nranks).c_str(), 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  ::setenv("LOOM_JOB_SECRET", secret.c_str(), 1);
  ::setenv("LOOM_TIMEOUT", std::to_string(c.timeoutSeconds).c_str(), 1);
  ::setenv("LOOM_DUMP_DIR", dumpDir.c_str(), 1);  // flight-recorder dumps of a timeout stay out of /tmp
  auto die = [&](const char* what) {
    std::fprintf(stderr, "rank %d: %s: %s\n", rank, what, loomGetLastError(nullptr));
    ::_exit(2);
  };
  loomUniqueId id;
  int r = 0, n = 0;
  loomComm_t comm = nullptr;
  if (loomGetUniqueIdFromEnv(&id, &r, &n) != loomSuccess) die("loomGetUniqueIdFromEnv");
  if (loomCommInitRank(&comm, n, id, r) != loomSuccess) die("loomCommInitRank");
  loomStream_t stream = nullptr;
  if (c.onStream && loomStreamCreate(&stream) != loomSuccess) die("loomStreamCreate");
  Buffers b;
  b.send.assign(c.count * static_cast<size_t>(c.nranks), 1.0f);
  b.recv.assign(c.count * static_cast<size_t>(c.nranks), 0.0f);
  if (runOnce(c.collective, comm, b, c.count, rank, c.nranks) != loomSuccess) die("first collective");
  if (::write(out, "R", 1) != 1) ::_exit(3);

  // Loop until a call fails (the fault), or give up well after the deadline.
  const int64_t giveUp = monotonicNanos() + static_cast<int64_t>((c.timeoutSeconds + 20) * 1e9);
  loomResult_t res = loomSuccess;
  while (res == loomSuccess && monotonicNanos() < giveUp) {
    res = runOnce(c.collective, comm, b, c.count, rank, c.nranks, stream);
    if (res == loomSuccess) ++rep.callsBeforeFault;
    if (c.fault == Fault::kExit && rank == c.victim && rep.callsBeforeFault == 3) ::_exit(7);
  }
  const int64_t failedAt = monotonicNanos();
  rep.code = res;
  // A stream's error belongs to no communicator: it is the thread's last error.
  rep.message = stream ? loomGetLastError(nullptr) : loomGetLastError(comm);
  if (stream) loomStreamDestroy(stream);
  loomResult_t async = loomSuccess;
  loomCommGetAsyncError(comm, &async);
  rep.asyncCode = async;
  int64_t start = monotonicNanos();
  rep.nextCallCode = runOnce(c.collective, comm, b, c.count, rank, c.nranks);
  rep.nextCallSeconds = secondsSince(start);
  start = monotonicNanos();
  loomCommDestroy(comm);
  rep.destroySeconds = secondsSince(start);
  rep.fdsAfter = openFds();
  rep.tasksAfter = threads();
  for (const auto& name : listDir("/dev/shm", "loom-" + secret.substr(0, 16))) rep.shmLeft += name + " ";

  std::string msg = rep.message.substr(0, 2500);
  for (char& ch : msg)
    if (ch == '\n') ch = ' ';
  char line[4000];
  int len = std::snprintf(line, sizeof line, "%d %d %lld %.6f %d %d %.6f %d %d %d %d %d |%s|%s\n", rep.rank, rep.code,
                          static_cast<long long>(failedAt), rep.destroySeconds, rep.asyncCode, rep.nextCallCode,
                          rep.nextCallSeconds, rep.callsBeforeFault, rep.fdsBefore, rep.fdsAfter, rep.tasksBefore,
                          rep.tasksAfter, rep.shmLeft.c_str(), msg.c_str());
  if (::write(out, line, static_cast<size_t>(len)) != len) ::_exit(3);
  ::_exit(0);
}

RankReport parseReport(const std::string& line, int64_t faultAt) {
  RankReport rep;
  std::istringstream in(line);
  long long failedAt = 0;
  in >> rep.rank >> rep.code >> failedAt >> rep.destroySeconds >> rep.asyncCode >> rep.nextCallCode >>
      rep.nextCallSeconds >> rep.callsBeforeFault >> rep.fdsBefore >> rep.fdsAfter >> rep.tasksBefore >>
      rep.tasksAfter;
  rep.failedAfter = static_cast<double>(failedAt - faultAt) / 1e9;
  const size_t bar = line.find('|');
  const size_t bar2 = bar == std::string::npos ? bar : line.find('|', bar + 1);
  if (bar2 != std::string::npos) {
    rep.shmLeft = line.substr(bar + 1, bar2 - bar - 1);
    rep.message = line.substr(bar2 + 1);
    while (!rep.message.empty() && rep.message.back() == '\n') rep.message.pop_back();
  }
  return rep;
}

// Reads from `fd` until `want` bytes ending in `stop` arrived, EOF, or the deadline.
std::string readUntil(int fd, char stop, int64_t deadline) {
  std::string got;
  while (monotonicNanos() < deadline) {
    pollfd pfd{fd, POLLIN, 0};
    int ms = static_cast<int>((deadline - monotonicNanos()) / 1000000);
    if (::poll(&pfd, 1, ms < 1 ? 1 : ms) <= 0) continue;
    char ch;
    ssize_t n = ::read(fd, &ch, 1);
    if (n <= 0) break;
    got += ch;
    if (ch == stop) break;
  }
  return got;
}

}  // namespace

const std::vector<std::string>& collectiveNames() {
  static const std::vector<std::string> names{"allreduce", "broadcast", "reduce",   "reducescatter",
                                              "allgather", "sendrecv",  "alltoall", "barrier"};
  return names;
}

FaultOutcome runFaultCase(const FaultCase& c) {
  FaultOutcome out;
  const int64_t begin = monotonicNanos();
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  out.hostName = std::string(host).substr(0, 63);
  const int port = freePort();
  const std::string secret = randomSecret();
  char dirTemplate[] = "/tmp/loom-faults-XXXXXX";
  const std::string dumpDir = ::mkdtemp(dirTemplate) ? dirTemplate : "/tmp";
  std::vector<pid_t> pids(static_cast<size_t>(c.nranks), -1);
  std::vector<int> fds(static_cast<size_t>(c.nranks), -1);
  std::fflush(nullptr);
  for (int r = 0; r < c.nranks; ++r) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) break;
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      for (int fd : fds)
        if (fd >= 0) ::close(fd);
      rankMain(c, r, port, secret, dumpDir, p[1]);
    }
    ::close(p[1]);
    if (pid < 0) {
      ::close(p[0]);
      break;
    }
    pids[static_cast<size_t>(r)] = pid;
    fds[static_cast<size_t>(r)] = p[0];
  }
  const auto v = static_cast<size_t>(c.victim);
  out.victimPid = pids[v];

  int64_t deadline = monotonicNanos() + 30LL * 1000000000LL;
  for (int r = 0; r < c.nranks && out.setupError.empty(); ++r)
    if (fds[static_cast<size_t>(r)] < 0 || readUntil(fds[static_cast<size_t>(r)], 'R', deadline) != "R")
      out.setupError = "rank " + std::to_string(r) + " did not start (see its stderr)";

  if (out.setupError.empty()) {
    // Every rank is inside its loop: let them get well into a call, then
    // strike (a kExit victim exits by itself a few calls after its "R").
    const int64_t readyAt = monotonicNanos();
    if (c.fault != Fault::kExit) ::usleep(50 * 1000);
    const int64_t faultAt = c.fault == Fault::kExit ? readyAt : monotonicNanos();
    if (c.fault != Fault::kExit) ::kill(out.victimPid, c.fault == Fault::kKill ? SIGKILL : SIGSTOP);
    deadline = faultAt + static_cast<int64_t>((c.timeoutSeconds + 15) * 1e9);
    for (int r = 0; r < c.nranks; ++r) {
      if (r == c.victim) continue;
      std::string line = readUntil(fds[static_cast<size_t>(r)], '\n', deadline);
      if (line.empty() || line.back() != '\n') out.missing.push_back(r);
      else out.reports.push_back(parseReport(line, faultAt));
    }
  }

  // Reap everyone; the victim (stopped, or never struck) and stragglers get SIGKILL.
  if (out.victimPid > 0) ::kill(out.victimPid, SIGKILL);
  const int64_t reapBy = monotonicNanos() + 10LL * 1000000000LL;
  for (pid_t pid : pids) {
    if (pid <= 0) continue;
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (monotonicNanos() > reapBy) ::kill(pid, SIGKILL);
      ::usleep(2000);
    }
  }
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
  if (dumpDir != "/tmp") {
    for (const auto& name : listDir(dumpDir.c_str(), "")) ::unlink((dumpDir + "/" + name).c_str());
    ::rmdir(dumpDir.c_str());
  }
  out.seconds = secondsSince(begin);
  return out;
}

}  // namespace loom::testing::faults
