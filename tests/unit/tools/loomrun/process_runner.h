// Test helper: runs a program (loomrun, or a shell around it) with captured
// stdout/stderr and a deadline, and watches processes of the job by pid.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loom::launcher::testing {

using Seconds = std::chrono::duration<double>;

// Changes to the inherited environment: a value sets, nullopt unsets.
using EnvChanges = std::vector<std::pair<std::string, std::optional<std::string>>>;

struct ProcessResult {
  bool finished = false;  // false: the deadline passed and the process was killed
  int exitCode = -1;      // when it exited normally
  int termSignal = 0;     // when a signal ended it
  std::string out;
  std::string err;
  double seconds = 0;
};

// One child process whose stdout and stderr are captured (stdin is /dev/null).
class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, const EnvChanges& env = {});
  ~ChildProcess();  // kills and reaps the process if still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Collects output until the process exits, or kills it once `timeout` passed.
  ProcessResult wait(Seconds timeout);

 private:
  pid_t pid_ = -1;
  int outFd_ = -1;
  int errFd_ = -1;
  std::chrono::steady_clock::time_point start_;
};

// The loomrun under test (path from the build) with `args`.
std::vector<std::string> loomrunCommand(const std::vector<std::string>& args);
ProcessResult runLoomrun(const std::vector<std::string>& args, const EnvChanges& env = {},
                         Seconds timeout = Seconds(10));

// Waits for `path` to hold a pid (written as "<pid>\n" and renamed into place).
std::optional<pid_t> waitForPidFile(const std::string& path, Seconds timeout);

// True once `pid` no longer exists (kill(pid, 0) fails with ESRCH); zombies
// re-parented to this process (a child subreaper) are reaped on the way.
bool waitUntilGone(pid_t pid, Seconds timeout);

// Makes orphans of the job re-parent to the test process so waitUntilGone can
// reap them, whatever the container's init does.
void becomeSubreaper();

// A fresh directory under $TMPDIR (or /tmp), removed with its files on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::vector<std::string> splitLines(const std::string& text);

}  // namespace loom::launcher::testing
