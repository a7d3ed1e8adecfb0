#include "tests/unit/bootstrap/test_helpers.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "common/format.h"

namespace loom::bootstrap::testing {

Logger quietLogger() {
  LogSettings s;
  s.level = LogLevel::kNone;
  return Logger(s, -1);
}

CapturedLog captureLog() {
  CapturedLog out;
  out.file = std::tmpfile();
  LogSettings s;
  s.level = LogLevel::kWarn;
  s.sink = out.file ? out.file : stderr;
  out.logger = Logger(s, -1);
  return out;
}

std::string CapturedLog::text() const {
  if (!file) return {};
  std::fflush(file);
  std::string all;
  char buf[4096];
  std::rewind(file);
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), file)) > 0) all.append(buf, n);
  std::fseek(file, 0, SEEK_END);
  return all;
}

uint8_t pattern(int rank, size_t index, int salt) {
  return static_cast<uint8_t>(rank * 131 + index * 7 + (index >> 8) + salt * 29 + 1);
}

namespace {

std::string checkGather(Bootstrap& b, size_t bytes, int salt, const WaitContext& wait) {
  const int n = b.nranks();
  std::vector<uint8_t> data(bytes * n, 0xEE);
  for (size_t i = 0; i < bytes; ++i) data[b.rank() * bytes + i] = pattern(b.rank(), i, salt);
  Status st = b.allGather(data.data(), bytes, wait);
  if (!st.isOk()) return "allGather: " + st.message();
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < bytes; ++i) {
      if (data[r * bytes + i] != pattern(r, i, salt)) {
        return strprintf("rank %d: slot %d byte %zu of %zu is %u, expected %u", b.rank(), r, i, bytes,
                         data[r * bytes + i], pattern(r, i, salt));
      }
    }
  }
  return {};
}

}  // namespace

std::string runRank(const UniqueId& id, int rank, int nranks, int salt, double waitSeconds) {
  WaitContext wait{Deadline::after(waitSeconds)};
  auto b = Bootstrap::connect(id, rank, nranks, wait, quietLogger());
  if (!b.isOk()) return "connect: " + b.status().message();
  if (b.value()->rank() != rank || b.value()->nranks() != nranks) {
    return strprintf("rank %d of %d reports rank %d of %d", rank, nranks, b.value()->rank(), b.value()->nranks());
  }
  // 1 MiB + 3 exceeds loopback socket buffers, so the ring must interleave.
  const size_t sizes[] = {1, 37, 0, (size_t{1} << 20) + 3};
  int call = 0;
  for (size_t bytes : sizes) {
    std::string err = checkGather(*b.value(), bytes, salt * 16 + call++, wait);
    if (!err.empty()) return err;
    Status st = b.value()->barrier(wait);
    if (!st.isOk()) return "barrier: " + st.message();
  }
  return {};
}

std::vector<int> runRankProcesses(int nranks, const std::function<int(int)>& body, double timeoutSeconds) {
  std::fflush(nullptr);  // no buffered output duplicated into the children
  std::vector<pid_t> pids(nranks, -1);
  std::vector<int> codes(nranks, -1);
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      int code = body(r);
      std::fflush(nullptr);
      _exit(code);
    }
    pids[r] = pid;
  }
  auto start = Clock::now();
  int left = 0;
  for (pid_t p : pids) left += p > 0;
  while (left > 0 && secondsSince(start) < timeoutSeconds) {
    for (int r = 0; r < nranks; ++r) {
      int status = 0;
      if (pids[r] <= 0 || waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      pids[r] = -1;
      --left;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int r = 0; r < nranks; ++r) {
    if (pids[r] <= 0) continue;
    kill(pids[r], SIGKILL);
    waitpid(pids[r], nullptr, 0);
  }
  return codes;
}

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace loom::bootstrap::testing
