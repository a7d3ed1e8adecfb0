// Starting one rank: fork, then exec PROG with the rank's environment.
//
// The child
//  - starts a new session (so its process group is its pid): loomrun can then
//    signal the rank together with everything it started, e.g. the `sleep`
//    under `sh -c 'sleep 1000; ...'`, which would otherwise outlive the shell;
//    like torchrun's start_new_session, this also means a terminal's Ctrl-C
//    reaches only loomrun, which forwards it once to every rank;
//  - asks for SIGKILL when loomrun dies (PR_SET_PDEATHSIG), checking getppid
//    afterwards in case loomrun died before the request;
//  - writes stdout and stderr into two pipes that loomrun forwards;
//  - with RankCommand::cpus, binds itself to them (a failure is printed on the
//    rank's stderr and the rank runs unbound);
//  - reports an exec failure through a close-on-exec pipe, so loomrun can
//    tell "PROG not found" (127) from a program that exits 127 itself.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/status.h"
#include "tools/loomrun/signal_channel.h"

namespace loom::launcher {

struct RankCommand {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH (execvpe)
  std::vector<std::string> env;   // NAME=VALUE entries
  std::vector<int> cpus;          // sched_setaffinity before exec; empty: inherit loomrun's
};

struct SpawnedRank {
  pid_t pid = -1;    // also the id of the rank's process group and session
  int stdoutFd = -1;  // read ends, close-on-exec, owned by the caller
  int stderrFd = -1;
};

// Starts the rank and returns once it has exec'ed. Errors:
//  - kInvalidArgument "cannot execute 'PROG': <strerror>" when exec failed
//    (the child has exited and is reaped; loomrun exits 127 for this);
//  - kSystemError when pipes or fork failed.
Result<SpawnedRank> spawnRank(const RankCommand& command, const SignalChannel& signals);

}  // namespace loom::launcher
