// How the ranks of a job whose launcher names no Loom rendezvous (torchrun,
// srun, mpirun without MPI in the program) learn rank 0's bootstrap root:
// rank 0 starts the root on a free port with a fresh random secret and writes
// "host port secret" to a file that only this user can read; the other ranks
// wait for that file. docs/launching.md explains why this is safe:
//   - the file is created 0600 inside a directory that must be the user's
//     own and closed to everyone else (0700), and a reader refuses a file
//     that is a link, is not the user's, or is open to others;
//   - ranks all on one host use the per-user runtime directory
//     ($XDG_RUNTIME_DIR/loom, else /tmp/loom-<uid>); when the launcher
//     exports no job id, their common parent's pid (the launcher's agent)
//     names the job; ranks on several hosts use $HOME/.loom/rendezvous,
//     which must be shared between them, and need the launcher's job id.
#pragma once

#include <string>
#include <sys/types.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/launch_env.h"

namespace loom::bootstrap {

// The file for this job: <dir>/<hash of the launcher's job key>[-<parent pid>].
// `runtimeDir` is $XDG_RUNTIME_DIR (may be empty), `home` is $HOME.
Result<std::string> rendezvousFilePath(const LaunchEnv& place, const std::string& runtimeDir,
                                       const std::string& home, uid_t uid, pid_t parent);

// Rank 0: writes the id to `path` (0600, all at once) and removes it when
// the process exits. Creates the directory (0700) if it is missing.
Status publishRendezvous(const std::string& path, const UniqueId& id);

// Other ranks: waits up to `timeoutSeconds` for the file and reads the id.
// A file older than `timeoutSeconds` is one a killed job left behind (its
// root has given up by then) and is waited past, not read.
Result<UniqueId> awaitRendezvous(const std::string& path, double timeoutSeconds);

}  // namespace loom::bootstrap
