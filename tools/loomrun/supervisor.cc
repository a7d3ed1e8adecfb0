#include "tools/loomrun/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "tools/loomrun/rank_spawner.h"

extern char** environ;

namespace loom::launcher {
namespace {

// How long the killing phase waits for pipes to close, and the final reap
// for SIGKILLed ranks to exit, before loomrun gives up on them.
constexpr auto kKillGrace = std::chrono::seconds(2);

std::string describeExit(int code, int status) {
  if (code == CLD_EXITED) return strprintf("exited with status %d", status);
  return strprintf("was killed by signal %d (%s%s)", status, strsignal(status),
                   code == CLD_DUMPED ? ", core dumped" : "");
}

const char* plural(int n) { return n == 1 ? "" : "s"; }

}  // namespace

Supervisor::Supervisor(const LaunchOptions& opts, const JobSettings& job, SignalChannel& signals)
    : opts_(opts), job_(job), signals_(signals), stdout_(STDOUT_FILENO), stderr_(STDERR_FILENO) {}

Supervisor::~Supervisor() = default;

int Supervisor::run() {
  startRanks();
  supervise();
  finishOutput();
  reapAll();
  if (failureStatus_) return *failureStatus_;
  if (receivedSignal_) return 128 + *receivedSignal_;
  return 0;
}

void Supervisor::startRanks() {
  const bool tag = opts_.shouldTagOutput();
  const std::vector<std::string> argv = opts_.execCommand();
  for (int local = 0; local < opts_.localRanks; ++local) {
    Rank rank;
    rank.rank = opts_.nodeRank * opts_.localRanks + local;
    Status files = openLogFiles(rank, local);
    if (!files.isOk()) {
      reportStartFailure(files, 1);
      return;
    }
    RankCommand command{argv, rankEnvironment(environ, opts_, job_, local), {}};
    if (static_cast<size_t>(local) < job_.rankCpus.size()) command.cpus = job_.rankCpus[static_cast<size_t>(local)];
    Result<SpawnedRank> spawned = spawnRank(command, signals_);
    if (!spawned.isOk()) {
      bool cannotExecute = spawned.status().code() == Code::kInvalidArgument;
      reportStartFailure(spawned.status(), cannotExecute ? kExitCannotExecute : 1);
      return;
    }
    rank.pid = spawned->pid;
    std::string prefix = !tag ? "" : strprintf("[%d] ", rank.rank);
    const bool whole = opts_.keepLinesWhole();
    // A redirected stream goes to its file only; a teed one to both; a rank
    // left out by --local-ranks-filter shows nothing.
    const unsigned fileOnly =
        opts_.showsOnTerminal(local) ? opts_.redirectsOf(local) & ~opts_.teeOf(local) : kBothStreams;
    OutputSink* out = (fileOnly & kStdout) ? nullptr : &stdout_;
    OutputSink* err = (fileOnly & kStderr) ? nullptr : &stderr_;
    rank.out = std::make_unique<StreamForwarder>(spawned->stdoutFd, out,
                                                 rank.outFile ? &rank.outFile->sink() : nullptr, prefix, whole);
    rank.err = std::make_unique<StreamForwarder>(spawned->stderrFd, err,
                                                 rank.errFile ? &rank.errFile->sink() : nullptr, prefix, whole);
    ranks_.push_back(std::move(rank));
  }
}

Status Supervisor::openLogFiles(Rank& rank, int localRank) {
  const unsigned streams = opts_.redirectsOf(localRank) | opts_.teeOf(localRank);
  if (job_.logRunDir.empty() || streams == kNoStreams) return Status::ok();
  Result<std::string> dir = createRankLogDir(job_.logRunDir, job_.restartCount, localRank);
  if (!dir.isOk()) return dir.status();
  if (streams & kStdout) {
    Result<std::unique_ptr<LogFile>> f = LogFile::open(dir.value() + "/stdout.log");
    if (!f.isOk()) return f.status();
    rank.outFile = std::move(f).value();
  }
  if (streams & kStderr) {
    Result<std::unique_ptr<LogFile>> f = LogFile::open(dir.value() + "/stderr.log");
    if (!f.isOk()) return f.status();
    rank.errFile = std::move(f).value();
  }
  return Status::ok();
}

void Supervisor::reportStartFailure(const Status& status, int exitStatus) {
  failureStatus_ = exitStatus;
  int started = static_cast<int>(ranks_.size());
  std::string stopping =
      started == 0 ? "" : strprintf("; stopping the %d started rank%s", started, plural(started));
  stderr_.write(strprintf("loomrun: %s%s\n", status.message().c_str(), stopping.c_str()));
  if (!ranks_.empty()) beginStopping(SIGTERM);
}

void Supervisor::supervise() {
  while (!gaveUp_ && !(allExited() && !outputOpen())) {
    // Every rank is gone yet a pipe is open: something a rank started holds
    // it. Stop it like a rank, or loomrun would wait for it forever.
    if (phase_ == Phase::kRunning && allExited()) beginStopping(SIGTERM);
    pollOnce();
    if (deadline_ && Clock::now() >= *deadline_) escalate();
  }
}

void Supervisor::watchControl(int fd, std::function<ControlEvent()> onReadable) {
  controlFd_ = fd;
  onControl_ = std::move(onReadable);
}

void Supervisor::pollOnce() {
  std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
  std::vector<StreamForwarder*> forwarders;
  // Last, so the rank streams' indices stay 1.. as below.
  const bool watching = controlFd_ >= 0 && phase_ == Phase::kRunning;
  for (Rank& rank : ranks_) {
    for (StreamForwarder* f : {rank.out.get(), rank.err.get()}) {
      if (!f->isOpen()) continue;
      fds.push_back({f->fd(), POLLIN, 0});
      forwarders.push_back(f);
    }
  }
  if (watching) fds.push_back({controlFd_, POLLIN, 0});
  if (poll(fds.data(), fds.size(), pollTimeoutMs()) <= 0) return;  // timeout or EINTR
  // Output first, so a rank's last words precede loomrun's report of its exit.
  for (size_t i = 1; i <= forwarders.size(); ++i) {
    if (fds[i].revents != 0) forwarders[i - 1]->pump();
  }
  if (fds[0].revents != 0) handleSignals();
  if (watching && fds.back().revents != 0 && phase_ == Phase::kRunning) {
    if (onControl_() == ControlEvent::kStop) {
      controlStop_ = true;
      beginStopping(SIGTERM);
    }
  }
}

void Supervisor::handleSignals() {
  for (int signo : signals_.drain()) {
    if (signo == SIGCHLD) {
      collectExits();
    } else if (phase_ == Phase::kRunning) {
      receivedSignal_ = signo;
      int running = runningRanks();
      stderr_.write(
          strprintf("loomrun: got signal %d (%s); forwarding it to the %d running rank%s\n",
                    signo, strsignal(signo), running, plural(running)));
      beginStopping(signo);
    } else if (phase_ == Phase::kStopping) {
      if (!receivedSignal_) receivedSignal_ = signo;
      stderr_.write(strprintf("loomrun: got signal %d (%s) while stopping; killing the ranks\n",
                              signo, strsignal(signo)));
      escalate();
    }
  }
}

void Supervisor::collectExits() {
  for (Rank& rank : ranks_) {
    if (rank.exited) continue;
    siginfo_t info{};
    // WNOWAIT leaves the rank a zombie: its pid keeps naming its process group.
    int flags = WEXITED | WNOHANG | WNOWAIT;
    if (waitid(P_PID, static_cast<id_t>(rank.pid), &info, flags) != 0) continue;
    if (info.si_pid == 0) continue;  // still running
    rank.exited = true;
    onRankExit(rank, info.si_code, info.si_status);
  }
}

void Supervisor::onRankExit(const Rank& rank, int code, int status) {
  bool failed = code != CLD_EXITED || status != 0;
  // Ranks dying while loomrun stops the job are consequences, not causes.
  if (!failed || phase_ != Phase::kRunning) return;
  failureStatus_ = code == CLD_EXITED ? status : 128 + status;
  rankFailed_ = true;
  int others = runningRanks();
  std::string stopping =
      others > 0 ? strprintf("; stopping the other %d rank%s", others, plural(others)) : "";
  stderr_.write(strprintf("loomrun: rank %d (pid %d) %s%s\n", rank.rank, static_cast<int>(rank.pid),
                          describeExit(code, status).c_str(), stopping.c_str()));
  beginStopping(SIGTERM);
}

void Supervisor::beginStopping(int signo) {
  signalGroups(signo);
  phase_ = Phase::kStopping;
  deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(opts_.killTimeoutSeconds));
}

void Supervisor::escalate() {
  if (phase_ == Phase::kKilling) {
    gaveUp_ = true;  // a process outside the ranks' groups holds a pipe
    return;
  }
  signalGroups(SIGKILL);
  phase_ = Phase::kKilling;
  deadline_ = Clock::now() + kKillGrace;
}

void Supervisor::signalGroups(int signo) {
  // Safe even for exited ranks: an unreaped zombie leader keeps the group id.
  for (const Rank& rank : ranks_) kill(-rank.pid, signo);
}

void Supervisor::finishOutput() {
  for (Rank& rank : ranks_) {
    rank.out->finish();
    rank.err->finish();
  }
}

void Supervisor::reapAll() {
  // Whatever is left in the groups (processes holding no pipe) ends with the job.
  signalGroups(SIGKILL);
  auto until = Clock::now() + kKillGrace;
  for (const Rank& rank : ranks_) {
    while (true) {
      pid_t r = waitpid(rank.pid, nullptr, WNOHANG);
      if (r == rank.pid || (r < 0 && errno != EINTR)) break;
      if (Clock::now() >= until) {
        stderr_.write(strprintf("loomrun: rank %d (pid %d) survived SIGKILL; not waiting for it\n",
                                rank.rank, static_cast<int>(rank.pid)));
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

bool Supervisor::outputOpen() const {
  for (const Rank& rank : ranks_) {
    if (rank.out->isOpen() || rank.err->isOpen()) return true;
  }
  return false;
}

bool Supervisor::allExited() const { return runningRanks() == 0; }

int Supervisor::runningRanks() const {
  int n = 0;
  for (const Rank& rank : ranks_) n += rank.exited ? 0 : 1;
  return n;
}

int Supervisor::pollTimeoutMs() const {
  if (!deadline_) return -1;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline_ - Clock::now());
  return static_cast<int>(std::max<long long>(0, left.count()));
}

}  // namespace loom::launcher
