// Supervision of the local ranks: start them, forward their output, and stop
// the job as a whole.
//
// Life of a job:
//   running   all ranks started; output forwarded as it comes.
//   stopping  a rank failed (non-zero exit or signal; reported once) or
//             loomrun got SIGINT/SIGTERM/SIGHUP: the signal (SIGTERM for a
//             failure) went to every rank's process group; SIGKILL follows
//             after --kill-timeout seconds, or at once on a second signal.
//   killing   SIGKILL sent; output is drained for at most a short grace.
// When every rank has exited but some pipe is still open, a process the rank
// started holds it: the job is stopped the same way, so nothing outlives it.
//
// Exited ranks stay zombies (waitid WNOWAIT) until the very end, so their pid,
// which names their process group, cannot be reused while loomrun may still
// signal the group. At the end every group gets SIGKILL and every rank is
// reaped: no orphans, no zombies.
//
// One Supervisor runs one attempt of the job; under --max-restarts main.cc
// runs a fresh one (fresh rendezvous) while restartable() says the attempt
// ended because a rank failed, not because loomrun was signalled.
//
// Exit status: the first failing rank's status (128+signal for a signal
// death), 127 when PROG could not be executed, 128+signal when loomrun itself
// was signalled, otherwise 0.
//
// Thread safety: single-threaded by design.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tools/loomrun/job_environment.h"
#include "tools/loomrun/log_files.h"
#include "tools/loomrun/loomrun_options.h"
#include "tools/loomrun/output_forwarder.h"
#include "tools/loomrun/signal_channel.h"

namespace loom::launcher {

class Supervisor {
 public:
  Supervisor(const LaunchOptions& opts, const JobSettings& job, SignalChannel& signals);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Runs the whole job and returns loomrun's exit status.
  int run();

  // Elastic agents (elastic_agent.h): while the ranks run, `fd` becoming
  // readable calls `onReadable`, which says whether the job must stop for a
  // new rendezvous round (kStop: the ranks are stopped as for a failure, but
  // the attempt counts as stoppedForRendezvous()). Call before run().
  enum class ControlEvent { kNone, kStop };
  void watchControl(int fd, std::function<ControlEvent()> onReadable);
  bool stoppedForRendezvous() const { return controlStop_; }

  // After run(): true when the attempt ended because a rank failed while
  // the job was running and loomrun itself got no stop signal. A program
  // that could not be started (127) is not restartable: it would fail again.
  bool restartable() const { return rankFailed_ && !receivedSignal_; }

 private:
  using Clock = std::chrono::steady_clock;
  enum class Phase { kRunning, kStopping, kKilling };

  struct Rank {
    int rank = 0;  // global rank
    pid_t pid = -1;
    bool exited = false;  // a zombie until the final reap
    std::unique_ptr<LogFile> outFile;  // --log-dir with --redirects/--tee
    std::unique_ptr<LogFile> errFile;
    std::unique_ptr<StreamForwarder> out;
    std::unique_ptr<StreamForwarder> err;
  };

  void startRanks();
  Status openLogFiles(Rank& rank, int localRank);
  void reportStartFailure(const Status& status, int exitStatus);
  void supervise();
  void pollOnce();
  void handleSignals();
  void collectExits();
  void onRankExit(const Rank& rank, int code, int status);
  void beginStopping(int signo);
  void escalate();
  void signalGroups(int signo);
  void finishOutput();
  void reapAll();
  bool outputOpen() const;
  bool allExited() const;
  int runningRanks() const;
  int pollTimeoutMs() const;

  const LaunchOptions& opts_;
  const JobSettings& job_;
  SignalChannel& signals_;
  OutputSink stdout_;
  OutputSink stderr_;
  std::vector<Rank> ranks_;
  Phase phase_ = Phase::kRunning;
  std::optional<Clock::time_point> deadline_;  // of the current phase
  std::optional<int> failureStatus_;  // the first failure decides the exit status
  std::optional<int> receivedSignal_;
  bool rankFailed_ = false;  // a started rank failed while running
  bool gaveUp_ = false;  // the killing grace ran out with pipes still open
  int controlFd_ = -1;
  std::function<ControlEvent()> onControl_;
  bool controlStop_ = false;
};

}  // namespace loom::launcher
