// loomrun: starts the local ranks of a Loom (or PyTorch) job. See options.h
// for the command line and supervisor.h for how the job is run and stopped.
// With --max-restarts N the job is run again, all ranks with a fresh
// rendezvous, after a rank failure, at most N times (torchrun's elastic
// agent does the same for one node; across nodes each loomrun restarts its
// own ranks when they fail, which a peer's death makes them do). With
// --nnodes MIN:MAX the nodes meet in rounds instead (elastic_agent.h).
#include <fcntl.h>
#include <unistd.h>

#include <signal.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "tools/loomrun/elastic_agent.h"
#include "tools/loomrun/env_help.h"
#include "tools/loomrun/job_environment.h"
#include "tools/loomrun/log_files.h"
#include "tools/loomrun/loomrun_options.h"
#include "tools/loomrun/rank_binding.h"
#include "tools/loomrun/signal_channel.h"
#include "tools/loomrun/supervisor.h"

namespace {

// A closed stdin/stdout/stderr would make the next pipe take its number, and
// the dup2 onto it in the child would then clobber the pipe itself.
void openStandardDescriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) < 0) open("/dev/null", O_RDWR);
  }
}

// True when SIGINT/SIGTERM/SIGHUP arrived after the last attempt ended: the
// user wants the job stopped, so it must not be restarted.
bool stopRequestedBetweenAttempts(loom::launcher::SignalChannel& signals) {
  for (int signo : signals.drain()) {
    if (signo == SIGCHLD) continue;  // the ranks of the attempt that just ended
    std::fprintf(stderr, "loomrun: got signal %d (%s) between attempts; not restarting\n", signo,
                 strsignal(signo));
    return true;
  }
  return false;
}

// Runs attempt 0, 1, ... until one is not restartable or the restarts are
// used up; returns the last attempt's exit status.
int runAttempts(const loom::launcher::LaunchOptions& opts, const std::vector<std::vector<int>>& rankCpus,
                loom::launcher::SignalChannel& signals) {
  using namespace loom::launcher;
  std::string logRunDir;  // one for the whole run; attempt_<n> below it
  for (int attempt = 0;; ++attempt) {
    // Fresh port (and secret, unless inherited) for every attempt, as for a
    // new job: ranks of the failed attempt can never join the new one.
    loom::Result<JobSettings> job = resolveJobSettings(opts);
    if (!job.isOk()) {
      std::fprintf(stderr, "loomrun: %s\n", job.status().message().c_str());
      return job.status().code() == loom::Code::kSystemError ? 1 : kExitUsage;
    }
    job->restartCount = attempt;
    job->rankCpus = rankCpus;
    if (opts.logDir && opts.wantsLogFiles() && logRunDir.empty()) {
      loom::Result<std::string> dir = createRunLogDir(*opts.logDir, job->runId);
      if (!dir.isOk()) {
        std::fprintf(stderr, "loomrun: %s\n", dir.status().message().c_str());
        return 1;
      }
      logRunDir = dir.value();
      std::fprintf(stderr, "loomrun: rank logs in %s\n", logRunDir.c_str());
    }
    job->logRunDir = logRunDir;
    Supervisor supervisor(opts, job.value(), signals);
    int status = supervisor.run();
    if (!supervisor.restartable()) return status;
    if (attempt >= opts.maxRestarts) {
      if (opts.maxRestarts > 0) {
        std::fprintf(stderr, "loomrun: attempt %d failed with status %d; no restarts left (--max-restarts %d)\n",
                     attempt, status, opts.maxRestarts);
      }
      return status;
    }
    if (stopRequestedBetweenAttempts(signals)) return status;
    std::fprintf(stderr,
                 "loomrun: attempt %d failed with status %d; restarting all %d local ranks "
                 "(restart %d of %d)\n",
                 attempt, status, opts.localRanks, attempt + 1, opts.maxRestarts);
  }
}

int launch(int argc, const char* const* argv) {
  using namespace loom::launcher;
  loom::Result<LaunchOptions> opts = parseOptions(argc, argv);
  if (!opts.isOk()) {
    std::fprintf(stderr, "loomrun: %s\nTry 'loomrun --help' for usage.\n",
                 opts.status().message().c_str());
    return kExitUsage;
  }
  if (opts->showHelp) {
    std::fputs(usageText().c_str(), stdout);
    return 0;
  }
  if (opts->showVersion) {
    std::printf("loomrun (Loom) %s\n", LOOM_TOOL_VERSION);
    return 0;
  }
  if (opts->envHelp != EnvHelpFormat::kNone) {
    const std::string text = opts->envHelp == EnvHelpFormat::kMarkdown ? envHelpMarkdown() : envHelpText();
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  // --standalone: a run id of its own, like torchrun's random one, kept
  // across restarts so every attempt's logs share one directory.
  if (opts->standalone && !opts->runId) {
    loom::Result<std::string> id = randomSecretHex();
    if (!id.isOk()) {
      std::fprintf(stderr, "loomrun: %s\n", id.status().message().c_str());
      return 1;
    }
    opts->runId = id.value().substr(0, 12);
  }
  auto signals = SignalChannel::open();
  if (!signals.isOk()) {
    std::fprintf(stderr, "loomrun: %s\n", signals.status().message().c_str());
    return 1;
  }
  // --bind: planned once; every attempt binds its ranks the same way.
  loom::Result<std::vector<std::vector<int>>> rankCpus = planRankCpus(opts.value());
  if (!rankCpus.isOk()) {
    std::fprintf(stderr, "loomrun: %s\n", rankCpus.status().message().c_str());
    return 1;
  }
  if (opts->elastic) return runElastic(opts.value(), rankCpus.value(), *signals.value());
  return runAttempts(opts.value(), rankCpus.value(), *signals.value());
}

}  // namespace

int main(int argc, char** argv) {
  openStandardDescriptors();
  return launch(argc, argv);
}
