#include "launcher/rank_spawner.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

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

// Runs in the forked child; only async-signal-safe calls until exec.
[[noreturn]] void execRank(char* const* argv, char* const* envp, pid_t parent, const Pipe& out,
                           const Pipe& err, const Pipe& report, const SignalChannel& signals) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(128 + SIGKILL);  // loomrun died before prctl
  setsid();
  // The pipes are close-on-exec; dup2 makes fresh, inheritable copies.
  if (dup2(out.write, STDOUT_FILENO) < 0 || dup2(err.write, STDERR_FILENO) < 0) {
    int e = errno;
    (void)!write(report.write, &e, sizeof(e));
    _exit(127);
  }
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
  pid_t parent = getpid();
  pid_t pid = s.isOk() ? fork() : -1;
  if (s.isOk() && pid < 0) s = makeSystemError(errno, "fork for a rank failed");
  if (pid == 0) execRank(argv.data(), envp.data(), parent, out, err, report, signals);
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
