// The files of `loomrun --log-dir DIR`, laid out as torchrun lays out its
// workers' logs:
//   DIR/<run id>_<random>/attempt_<n>/<local rank>/stdout.log, stderr.log
// The <random> part (mkdtemp) keeps two jobs with the same run id apart;
// attempt_<n> counts --max-restarts attempts from 0.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "tools/loomrun/output_forwarder.h"

namespace loom::launcher {

// Creates DIR (and its parents) when missing, then a fresh
// DIR/<runId>_XXXXXX; returns the latter. kSystemError names the path.
Result<std::string> createRunLogDir(const std::string& dir, const std::string& runId);

// The directory of one rank in one attempt (created when missing).
Result<std::string> createRankLogDir(const std::string& runDir, int attempt, int localRank);

// One log file, truncated on open and closed on destruction.
class LogFile {
 public:
  static Result<std::unique_ptr<LogFile>> open(const std::string& path);
  ~LogFile();
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;
  OutputSink& sink() { return sink_; }

 private:
  explicit LogFile(int fd) : fd_(fd), sink_(fd) {}
  int fd_;
  OutputSink sink_;
};

}  // namespace loom::launcher
