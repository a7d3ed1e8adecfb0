#include "tools/loomrun/log_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace loom::launcher {
namespace {

Status makeDirectory(const std::string& path) {
  if (mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return Status::ok();
  return makeSystemError(errno, "cannot create the log directory '%s'", path.c_str());
}

// mkdir -p: every parent first.
Status makeDirectories(const std::string& path) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos; slash = path.find('/', slash + 1)) {
    LOOM_TRY(makeDirectory(path.substr(0, slash)));
  }
  return makeDirectory(path);
}

}  // namespace

Result<std::string> createRunLogDir(const std::string& dir, const std::string& runId) {
  LOOM_TRY(makeDirectories(dir));
  // A run id may hold characters a file name cannot.
  std::string name = runId;
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  std::string pattern = dir + "/" + name + "_XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    return makeSystemError(errno, "cannot create a directory like '%s' for --log-dir", pattern.c_str());
  }
  return std::string(buf.data());
}

Result<std::string> createRankLogDir(const std::string& runDir, int attempt, int localRank) {
  std::string attemptDir = runDir + "/attempt_" + std::to_string(attempt);
  LOOM_TRY(makeDirectory(attemptDir));
  std::string rankDir = attemptDir + "/" + std::to_string(localRank);
  LOOM_TRY(makeDirectory(rankDir));
  return rankDir;
}

Result<std::unique_ptr<LogFile>> LogFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return makeSystemError(errno, "cannot open the log file '%s'", path.c_str());
  return std::unique_ptr<LogFile>(new LogFile(fd));
}

LogFile::~LogFile() { close(fd_); }

}  // namespace loom::launcher
