#include "tools/loomrun/rank_spawner.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <memory>

#include "src/topology/topology.h"

namespace loom::launcher {
namespace {

struct Pipe {
  int read = -1;
  int write = -1;
};

void closeFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

Status openPipe(Pipe& p) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return makeSystemError(errno, "cannot create a pipe for a rank (too many ranks for "
                                  "`ulimit -n`?)");
  }
  p.read = fds[0];
  p.write = fds[1];
  return Status::ok();
}

std::vector<char*> pointerArray(const std::vector<std::string>& strings) {
  std::vector<char*> ptrs;
  for (const std::string& s : strings) ptrs.push_back(const_cast<char*>(s.c_str()));
  ptrs.push_back(nullptr);
  return ptrs;
}

// A rank's CPU mask, built before fork: the child may only make
// async-signal-safe calls, so it must not allocate.
struct CpuMask {
  struct Free {
    void operator()(cpu_set_t* set) const { CPU_FREE(set); }
  };
  std::unique_ptr<cpu_set_t, Free> set;
  size_t bytes = 0;
  std::string failure;  // printed on the rank's stderr when binding fails

  explicit CpuMask(const std::vector<int>& cpus) {
    if (cpus.empty()) return;
    int highest = 0;
    for (int cpu : cpus) highest = std::max(highest, cpu);
    set.reset(CPU_ALLOC(highest + 1));
    bytes = CPU_ALLOC_SIZE(highest + 1);
    CPU_ZERO_S(bytes, set.get());
    for (int cpu : cpus)
      if (cpu >= 0) CPU_SET_S(static_cast<size_t>(cpu), bytes, set.get());
    failure = "loomrun: warning: cannot bind this rank to cpus " + topology::formatCpuList(cpus) +
              " (sched_setaffinity failed); it runs unbound\n";
  }
};

// Runs in the forked child; only async-signal-safe calls until exec.
[[noreturn]] void execRank(char* const* argv, char* const* envp, pid_t parent, const Pipe& out,
                           const Pipe& err, const Pipe& report, const SignalChannel& signals,
                           const CpuMask& mask) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(128 + SIGKILL);  // loomrun died before prctl
  setsid();
  // The pipes are close-on-exec; dup2 makes fresh, inheritable copies.
  if (dup2(out.write, STDOUT_FILENO) < 0 || dup2(err.write, STDERR_FILENO) < 0) {
    int e = errno;
    (void)!write(report.write, &e, sizeof(e));
    _exit(127);
  }
  if (mask.set && sched_setaffinity(0, mask.bytes, mask.set.get()) != 0)
    (void)!write(STDERR_FILENO, mask.failure.data(), mask.failure.size());
  signals.restoreInChild();
  execvpe(argv[0], argv, envp);
  int e = errno;
  (void)!write(report.write, &e, sizeof(e));
  _exit(127);
}

// Waits for the child's exec: end of file on the report pipe means success,
// an int is the errno of the failed exec.
int readExecErrno(int fd) {
  int e = 0;
  ssize_t n;
  do {
    n = read(fd, &e, sizeof(e));
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(sizeof(e)) ? e : 0;
}

}  // namespace

Result<SpawnedRank> spawnRank(const RankCommand& command, const SignalChannel& signals) {
  LOOM_ENFORCE(!command.argv.empty(), Code::kInvalidArgument, "empty command for a rank");
  Pipe out, err, report;
  Status s = openPipe(out);
  if (s.isOk()) s = openPipe(err);
  if (s.isOk()) s = openPipe(report);
  std::vector<char*> argv = pointerArray(command.argv);
  std::vector<char*> envp = pointerArray(command.env);
  CpuMask mask(command.cpus);
  pid_t parent = getpid();
  pid_t pid = s.isOk() ? fork() : -1;
  if (s.isOk() && pid < 0) s = makeSystemError(errno, "fork for a rank failed");
  if (pid == 0) execRank(argv.data(), envp.data(), parent, out, err, report, signals, mask);
  closeFd(out.write);
  closeFd(err.write);
  closeFd(report.write);
  int execErrno = s.isOk() ? readExecErrno(report.read) : 0;
  closeFd(report.read);
  if (s.isOk() && execErrno == 0) return SpawnedRank{pid, out.read, err.read};
  closeFd(out.read);
  closeFd(err.read);
  if (!s.isOk()) return s;
  waitpid(pid, nullptr, 0);  // exiting right after reporting: no real wait
  return makeError(Code::kInvalidArgument, "cannot execute '%s': %s", command.argv[0].c_str(),
                   strerror(execErrno));
}

}  // namespace loom::launcher
