#include "tests/unit/diagnostics/diagnostics_harness.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace loom::diagtest {

ScopedEnv::ScopedEnv(std::vector<std::pair<std::string, std::string>> vars) {
  for (auto& [name, value] : vars) {
    const char* old = std::getenv(name.c_str());
    saved_.push_back({name, {old != nullptr, old ? old : ""}});
    ::setenv(name.c_str(), value.c_str(), 1);
  }
}

ScopedEnv::~ScopedEnv() {
  for (auto& [name, old] : saved_) {
    if (old.first) ::setenv(name.c_str(), old.second.c_str(), 1);
    else ::unsetenv(name.c_str());
  }
}

std::string makeTempDir() {
  char templ[] = "/tmp/loom-diag-XXXXXX";
  const char* dir = ::mkdtemp(templ);
  return dir ? dir : "/tmp";
}

void removeTree(const std::string& dir) {
  for (const auto& name : listFiles(dir, "")) ::unlink((dir + "/" + name).c_str());
  ::rmdir(dir.c_str());
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool fileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::vector<std::string> listFiles(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != ".." && name.rfind(prefix, 0) == 0) out.push_back(name);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string dumpOfRank(const std::string& dir, int rank) {
  const std::string suffix = "-rank" + std::to_string(rank) + ".txt";
  for (const auto& name : listFiles(dir, "loom-flight-"))
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return readFile(dir + "/" + name);
  return "";
}

void runThreads(int n, const std::function<void(int, loomComm_t)>& body, bool destroy) {
  std::vector<loomComm_t> comms(static_cast<size_t>(n), nullptr);
  if (loomCommInitAll(comms.data(), n, nullptr) != loomSuccess) {
    std::fprintf(stderr, "loomCommInitAll: %s\n", loomGetLastError(nullptr));
    std::abort();
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { body(r, comms[static_cast<size_t>(r)]); });
  for (auto& t : threads) t.join();
  if (destroy)
    for (auto* c : comms) loomCommDestroy(c);
}

namespace {
volatile int inForkedRank = 0;
}  // namespace

// LeakSanitizer asks this (when the program is built with it) before its
// check at exit. A rank forked from this threaded test process holds copies
// of the parent's other threads' live allocations, which no thread of the
// child can reach, so the check would report them as leaks: skip it in the
// children (the parent, and the ranks of the thread-mode tests, are checked).
extern "C" int __lsan_is_turned_off() { return inForkedRank; }

namespace {
// Threads of this process other than the caller (from /proc/self/task).
int otherThreads() {
  int tasks = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++tasks;
    ::closedir(d);
  }
  return tasks > 0 ? tasks - 1 : 0;
}
}  // namespace

// Rank 0 makes the unique id after the fork and hands it to the others
// through pipes, as a launcher's rank 0 would: if this process made it, the
// bootstrap root thread would be running here while the children are forked,
// and a child copies whatever that thread holds at that instant (a malloc or
// sanitizer lock, half-built state) with no thread left to release it.
std::vector<pid_t> forkRanks(int n, const std::function<int(int, loomComm_t)>& body) {
  if (const int others = otherThreads(); others > 0)
    std::fprintf(stderr, "forkRanks: %d other thread(s) running in the test process at fork\n", others);
  std::vector<std::array<int, 2>> idPipes(static_cast<size_t>(n), {-1, -1});
  for (int r = 1; r < n; ++r)
    if (::pipe(idPipes[static_cast<size_t>(r)].data()) != 0) std::abort();
  std::vector<pid_t> pids;
  std::fflush(nullptr);
  for (int r = 0; r < n; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      inForkedRank = 1;
      // Keep only this rank's ends, so that a rank waiting for its id reads
      // end of file if rank 0 dies first.
      for (int peer = 1; peer < n; ++peer) {
        auto& ends = idPipes[static_cast<size_t>(peer)];
        ::close(r == 0 ? ends[0] : ends[1]);
        if (r != 0 && peer != r) ::close(ends[0]);
      }
      loomUniqueId id;
      if (r == 0) {
        if (loomGetUniqueId(&id) != loomSuccess) {
          std::fprintf(stderr, "rank 0: loomGetUniqueId: %s\n", loomGetLastError(nullptr));
          ::_exit(91);
        }
        for (int peer = 1; peer < n; ++peer) {
          const int fd = idPipes[static_cast<size_t>(peer)][1];
          if (::write(fd, &id, sizeof id) != static_cast<ssize_t>(sizeof id)) ::_exit(92);
          ::close(fd);
        }
      } else {
        const int fd = idPipes[static_cast<size_t>(r)][0];
        if (::read(fd, &id, sizeof id) != static_cast<ssize_t>(sizeof id)) {
          std::fprintf(stderr, "rank %d: no unique id from rank 0\n", r);
          ::_exit(93);
        }
        ::close(fd);
      }
      loomComm_t comm = nullptr;
      if (loomCommInitRank(&comm, n, id, r) != loomSuccess) {
        std::fprintf(stderr, "rank %d: loomCommInitRank: %s\n", r, loomGetLastError(nullptr));
        ::_exit(90);
      }
      std::exit(body(r, comm));
    }
    pids.push_back(pid);
  }
  // Closing the parent's write ends lets a rank waiting for its id see end of
  // file (and exit) if rank 0 dies before writing it.
  for (auto& ends : idPipes)
    for (int fd : ends)
      if (fd >= 0) ::close(fd);
  return pids;
}

std::vector<int> waitRanks(const std::vector<pid_t>& pids, double seconds) {
  std::vector<int> codes(pids.size(), -1);
  std::vector<bool> done(pids.size(), false);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      if (::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        done[i] = true;
        --left;
        codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > end) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (!done[i]) {
          ::kill(pids[i], SIGKILL);
          ::waitpid(pids[i], nullptr, 0);
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return codes;
}

std::string checkTraceJson(const std::string& path, std::vector<std::string>* names, bool* skipped) {
  *skipped = std::system("python3 -c 'import json' >/dev/null 2>&1") != 0;
  if (*skipped) return "";
  const std::string out = path + ".names";
  const std::string cmd =
      "python3 -c 'import json,sys\n"
      "d = json.load(open(sys.argv[1]))\n"
      "assert isinstance(d, dict) and isinstance(d[\"traceEvents\"], list)\n"
      "for e in d[\"traceEvents\"]:\n"
      "    assert e[\"ph\"] in (\"X\", \"M\") and isinstance(e[\"pid\"], int)\n"
      "    if e[\"ph\"] == \"X\": assert e[\"dur\"] >= 0 and e[\"ts\"] > 0\n"
      "open(sys.argv[2], \"w\").write(\"\\n\".join(e[\"name\"] for e in d[\"traceEvents\"]))\n' '" +
      path + "' '" + out + "' 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return "popen failed";
  std::string errors;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) errors += buf;
  const int rc = ::pclose(p);
  if (rc != 0) return "python3 rejected " + path + ": " + errors;
  std::stringstream ss(readFile(out));
  for (std::string line; std::getline(ss, line);) names->push_back(line);
  ::unlink(out.c_str());
  return "";
}

}  // namespace loom::diagtest
