#include "tests/unit/tools/loomrun/process_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace loom::launcher::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> buildEnvironment(const EnvChanges& changes) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    bool changed = false;
    for (const auto& [key, value] : changes) changed = changed || key == name;
    if (!changed) env.push_back(entry);
  }
  for (const auto& [key, value] : changes) {
    if (value) env.push_back(key + "=" + *value);
  }
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> p;
  for (std::string& s : strings) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

// Reads what is available from `fd` into `sink`; closes it at end of file.
void drainOnce(int& fd, std::string& sink) {
  char buf[65536];
  ssize_t n = read(fd, buf, sizeof(buf));
  if (n > 0) {
    sink.append(buf, static_cast<size_t>(n));
  } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
    close(fd);
    fd = -1;
  }
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const EnvChanges& envChanges) {
  std::vector<std::string> args = argv;
  std::vector<std::string> env = buildEnvironment(envChanges);
  std::vector<char*> argp = pointers(args);
  std::vector<char*> envp = pointers(env);
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe2 failed");
  }
  start_ = Clock::now();
  pid_ = fork();
  if (pid_ == 0) {
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    execve(argp[0], argp.data(), envp.data());
    _exit(126);
  }
  close(out[1]);
  close(err[1]);
  outFd_ = out[0];
  errFd_ = err[0];
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (outFd_ >= 0) close(outFd_);
  if (errFd_ >= 0) close(errFd_);
}

ProcessResult ChildProcess::wait(Seconds timeout) {
  ProcessResult result;
  auto deadline = start_ + std::chrono::duration_cast<Clock::duration>(timeout);
  int status = 0;
  bool reaped = false;
  // Until the process is reaped and both pipes reached end of file.
  while (!reaped || outFd_ >= 0 || errFd_ >= 0) {
    if (Clock::now() >= deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      pid_ = -1;
      result.finished = false;
      return result;
    }
    pollfd fds[2] = {{outFd_, POLLIN, 0}, {errFd_, POLLIN, 0}};
    poll(fds, 2, 10);
    if (outFd_ >= 0 && fds[0].revents != 0) drainOnce(outFd_, result.out);
    if (errFd_ >= 0 && fds[1].revents != 0) drainOnce(errFd_, result.err);
    if (!reaped && waitpid(pid_, &status, WNOHANG) == pid_) reaped = true;
  }
  pid_ = -1;
  result.seconds = Seconds(Clock::now() - start_).count();
  result.finished = true;
  if (WIFEXITED(status)) result.exitCode = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.termSignal = WTERMSIG(status);
  return result;
}

std::vector<std::string> loomrunCommand(const std::vector<std::string>& args) {
  std::vector<std::string> argv{LOOMRUN_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

ProcessResult runLoomrun(const std::vector<std::string>& args, const EnvChanges& env,
                         Seconds timeout) {
  ChildProcess child(loomrunCommand(args), env);
  return child.wait(timeout);
}

std::optional<pid_t> waitForPidFile(const std::string& path, Seconds timeout) {
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout);
  while (Clock::now() < deadline) {
    std::ifstream in(path);
    long pid = 0;
    if (in >> pid && pid > 0) return static_cast<pid_t>(pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return std::nullopt;
}

bool waitUntilGone(pid_t pid, Seconds timeout) {
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout);
  while (true) {
    waitpid(pid, nullptr, WNOHANG);  // only succeeds for orphans re-parented to us
    if (kill(pid, 0) != 0 && errno == ESRCH) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void becomeSubreaper() { prctl(PR_SET_CHILD_SUBREAPER, 1); }

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base != nullptr && *base != '\0' ? base : "/tmp") +
                      "/loomrun_test.XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = templ;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

}  // namespace loom::launcher::testing
