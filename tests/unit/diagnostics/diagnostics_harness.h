// Helpers of the diagnostics tests: environment overrides, temporary
// directories, files, ranks as threads (loomCommInitAll) and as forked
// processes, and a JSON check of trace files through python3.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <loom/loom.h>

namespace loom::diagtest {

// Sets variables for its lifetime (communicators read them when created).
class ScopedEnv {
 public:
  explicit ScopedEnv(std::vector<std::pair<std::string, std::string>> vars);
  ~ScopedEnv();

 private:
  std::vector<std::pair<std::string, std::pair<bool, std::string>>> saved_;
};

std::string makeTempDir();  // fresh directory under /tmp
void removeTree(const std::string& dir);
std::string readFile(const std::string& path);
bool fileExists(const std::string& path);
// Names in `dir` starting with `prefix`, sorted.
std::vector<std::string> listFiles(const std::string& dir, const std::string& prefix);
// The flight-recorder dump of `rank` in `dir` ("" if none).
std::string dumpOfRank(const std::string& dir, int rank);

// n communicators of this process; body(rank, comm) runs on one thread per rank.
void runThreads(int n, const std::function<void(int, loomComm_t)>& body, bool destroy = true);

// Forks n processes that join one communicator (comm created in the child);
// each runs body(rank, comm) and exits (exit(), so atexit handlers run) with
// its return value. Returns the pids.
std::vector<pid_t> forkRanks(int n, const std::function<int(int, loomComm_t)>& body);
// Waits for all; kills them after `seconds`. Exit codes (-1: killed or crashed).
std::vector<int> waitRanks(const std::vector<pid_t>& pids, double seconds);

// "" if `path` is valid Chrome-trace JSON (an object with a traceEvents list);
// otherwise why not. Fills `names` with every event's name. Sets *skipped if
// python3 is missing.
std::string checkTraceJson(const std::string& path, std::vector<std::string>* names, bool* skipped);

}  // namespace loom::diagtest
