// Where this process sits in a job, read from whichever launcher started it:
// loomrun, torchrun, mpirun (Open MPI, MPICH/Hydra, Intel MPI), a PMIx
// launcher, or Slurm's srun. docs/launching.md describes each.
//
// Pure functions over a name -> value lookup, so every launcher's
// environment can be tested without setting it.
//
// Precedence, innermost launcher first (a launcher started inside another
// one, e.g. torchrun or mpirun inside an srun allocation, wins over it):
//   1. RANK / WORLD_SIZE             loomrun, torchrun, or set by hand
//   2. OMPI_COMM_WORLD_RANK / _SIZE  Open MPI's mpirun
//   3. PMI_RANK / PMI_SIZE           MPICH/Hydra, Intel MPI
//   4. PMIX_RANK                     a PMIx launcher (size from Slurm)
//   5. SLURM_PROCID / SLURM_STEP_NUM_TASKS   srun (a batch script's own
//      process, SLURM_PROCID=0 outside any step, is no launcher's rank)
// Within one launcher, a rank without a size (or the reverse), a value that is
// not a number, or rank >= size is an error naming the variable: a job must
// never fall apart into N single-rank jobs.
#pragma once

#include <functional>
#include <string>

#include "common/status.h"

namespace loom::bootstrap {

// Returns the variable's value, or nullptr when it is unset.
using EnvLookup = std::function<const char*(const char* name)>;

enum class Launcher { kNone, kLoomrun, kTorchrun, kOpenMpi, kPmi, kPmix, kSlurm };

const char* launcherName(Launcher l);  // "loomrun", "torchrun", "Open MPI", ...

struct LaunchEnv {
  Launcher launcher = Launcher::kNone;  // kNone: no launcher; rank 0 of 1
  int rank = 0;
  int size = 1;
  int localRank = 0;
  int localSize = -1;  // ranks on this host; -1 when the launcher does not say
  // The rendezvous the environment names: set together by loomrun (or by a
  // user) as MASTER_ADDR/MASTER_PORT/LOOM_JOB_SECRET. Empty secret: none is
  // named, and the job meets through a rendezvous file (rendezvous_file.h).
  std::string masterAddr;  // MASTER_ADDR, may be empty
  int masterPort = 0;      // MASTER_PORT, 0 when unset
  std::string secretHex;   // LOOM_JOB_SECRET
  // What identifies this job to all of its ranks (launcher job/step ids),
  // to name the rendezvous file; jobKeyUnique: it holds an id no other
  // running job has (false: e.g. MPICH's Hydra, which exports none).
  std::string jobKey;
  bool jobKeyUnique = false;

  bool singleHost() const { return localSize == size; }
  bool namesRendezvous() const { return !secretHex.empty(); }
};

// Reads the launcher's variables; an error names the variable at fault.
Result<LaunchEnv> readLaunchEnv(const EnvLookup& env);

}  // namespace loom::bootstrap
