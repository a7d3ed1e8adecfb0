#include "src/diagnostics/dump_signal.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

namespace loom {
namespace {

std::atomic<int> gPipeWrite{-1};  // read by the handler: lock-free, so async-signal-safe

extern "C" void onDumpSignal(int signo) {
  const int saved = errno;
  const int fd = gPipeWrite.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const unsigned char b = static_cast<unsigned char>(signo);
    (void)!::write(fd, &b, 1);
  }
  errno = saved;
}

struct Handler {
  int users = 0;
  struct sigaction previous;
};

struct State {
  std::mutex mu;  // held while dumping, so removal waits for a dump in progress
  std::map<int, std::pair<int, std::function<void(int)>>> dumps;  // token -> (signo, dump)
  std::map<int, Handler> handlers;                                 // signo -> installed handler
  int nextToken = 0;
  int pipeRead = -1, pipeWrite = -1;
  std::thread thread;
};
State& state() {
  static State* s = new State;  // never destroyed: a late signal must not find it gone
  return *s;
}

void dumperLoop(int readFd) {
  State& s = state();
  for (;;) {
    unsigned char b = 0;
    const ssize_t n = ::read(readFd, &b, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || b == 0) return;  // 0: stop
    std::lock_guard<std::mutex> lock(s.mu);
    for (auto& [token, entry] : s.dumps)
      if (entry.first == b) entry.second(b);
  }
}

}  // namespace

int parseSignal(const std::string& text) {
  static const std::pair<const char*, int> kNames[] = {
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP}, {"INT", SIGINT}, {"QUIT", SIGQUIT},
      {"TERM", SIGTERM}, {"PWR", SIGPWR},   {"WINCH", SIGWINCH}};
  std::string name = text;
  for (auto& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (name.rfind("SIG", 0) == 0) name = name.substr(3);
  for (const auto& [n, signo] : kNames)
    if (name == n) return signo;
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (end != text.c_str() && *end == '\0' && v > 0 && v < NSIG && v != SIGKILL && v != SIGSTOP) return static_cast<int>(v);
  return 0;
}

int addSignalDump(int signo, std::function<void(int)> dump, std::string* error) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.pipeWrite < 0) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      if (error) *error = std::string("pipe2: ") + std::strerror(errno);
      return -1;
    }
    // A full pipe must never block the handler; a dump already pending covers it.
    ::fcntl(fds[1], F_SETFL, O_NONBLOCK);
    s.pipeRead = fds[0];
    s.pipeWrite = fds[1];
    s.thread = std::thread(dumperLoop, fds[0]);
    gPipeWrite.store(fds[1]);
  }
  Handler& h = s.handlers[signo];
  if (h.users == 0) {
    struct sigaction action;
    std::memset(&action, 0, sizeof action);
    action.sa_handler = onDumpSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    if (::sigaction(signo, &action, &h.previous) != 0) {
      if (error) *error = std::string("sigaction: ") + std::strerror(errno);
      s.handlers.erase(signo);
      return -1;  // the thread stays until the next removal finds no users
    }
  }
  ++h.users;
  const int token = s.nextToken++;
  s.dumps[token] = {signo, std::move(dump)};
  return token;
}

void removeSignalDump(int token) {
  State& s = state();
  std::thread finished;
  int readFd = -1, writeFd = -1;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.dumps.find(token);
    if (it == s.dumps.end()) return;
    const int signo = it->second.first;
    s.dumps.erase(it);
    Handler& h = s.handlers[signo];
    if (--h.users == 0) {
      ::sigaction(signo, &h.previous, nullptr);
      s.handlers.erase(signo);
    }
    if (!s.dumps.empty()) return;
    gPipeWrite.store(-1);
    finished = std::move(s.thread);
    readFd = s.pipeRead;
    writeFd = s.pipeWrite;
    s.pipeRead = s.pipeWrite = -1;
  }
  // Outside the lock: the thread may be waiting for it to finish a dump.
  const unsigned char stop = 0;
  (void)!::write(writeFd, &stop, 1);
  if (finished.joinable()) finished.join();
  ::close(readFd);
  ::close(writeFd);
}

}  // namespace loom
