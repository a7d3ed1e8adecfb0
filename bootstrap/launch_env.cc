#include "bootstrap/launch_env.h"

#include <cerrno>
#include <cstdlib>

namespace loom::bootstrap {
namespace {

constexpr long kMaxRanks = 1L << 24;

bool isSet(const char* v) { return v != nullptr && *v != '\0'; }

// A launcher's integer variable: an error names it when it is not a
// number in [lo, hi].
Result<int> integer(const EnvLookup& env, const char* name, long lo, long hi, const char* launcher) {
  const char* v = env(name);
  if (!isSet(v)) return makeError(Code::kInvalidArgument, "%s: %s is not set", launcher, name);
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi)
    return makeError(Code::kInvalidArgument, "%s: %s=%s is not an integer in [%ld, %ld]", launcher, name, v, lo, hi);
  return static_cast<int>(x);
}

// The first of `names` that is set, or nullptr.
const char* firstSet(const EnvLookup& env, std::initializer_list<const char*> names, const char** which = nullptr) {
  for (const char* n : names)
    if (const char* v = env(n); isSet(v)) {
      if (which) *which = n;
      return v;
    }
  return nullptr;
}

std::string orEmpty(const char* v) { return v ? v : ""; }

// Rank, size and local rank from one launcher's variables. `rankVar` and
// `sizeVar` go together: either one alone is an error.
Status readPlace(const EnvLookup& env, Launcher launcher, const char* rankVar, const char* sizeVar,
                 const char* localRankVar, const char* localSizeVar, LaunchEnv* out) {
  const char* name = launcherName(launcher);
  if (!isSet(env(sizeVar)))
    return makeError(Code::kInvalidArgument, "%s: %s=%s is set but %s is not: the job size is unknown", name,
                     rankVar, env(rankVar), sizeVar);
  auto size = integer(env, sizeVar, 1, kMaxRanks, name);
  if (!size.isOk()) return size.status();
  auto rank = integer(env, rankVar, 0, size.value() - 1, name);
  if (!rank.isOk()) return rank.status();
  out->launcher = launcher;
  out->size = size.value();
  out->rank = rank.value();
  out->localRank = out->rank;
  out->localSize = -1;
  if (localSizeVar && isSet(env(localSizeVar))) {
    auto localSize = integer(env, localSizeVar, 1, out->size, name);
    if (!localSize.isOk()) return localSize.status();
    out->localSize = localSize.value();
  }
  if (localRankVar && isSet(env(localRankVar))) {
    const long hi = out->localSize > 0 ? out->localSize - 1 : out->size - 1;
    auto localRank = integer(env, localRankVar, 0, hi, name);
    if (!localRank.isOk()) return localRank.status();
    out->localRank = localRank.value();
  }
  return Status::ok();
}

// Slurm's step size: SLURM_STEP_NUM_TASKS is the srun step's own (a batch
// script's SLURM_NTASKS describes the allocation, not a step).
const char* slurmSizeVar(const EnvLookup& env) {
  return isSet(env("SLURM_STEP_NUM_TASKS")) ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
}

// One node: every rank is local.
void slurmLocalSize(const EnvLookup& env, LaunchEnv* out) {
  const char* nodes = firstSet(env, {"SLURM_STEP_NUM_NODES", "SLURM_NNODES"});
  if (nodes && std::string(nodes) == "1") out->localSize = out->size;
}

std::string slurmJobKey(const EnvLookup& env) {
  return "slurm:" + orEmpty(env("SLURM_JOB_ID")) + "." + orEmpty(env("SLURM_STEP_ID"));
}

}  // namespace

const char* launcherName(Launcher l) {
  switch (l) {
    case Launcher::kNone: return "no launcher";
    case Launcher::kLoomrun: return "loomrun";
    case Launcher::kTorchrun: return "torchrun";
    case Launcher::kOpenMpi: return "Open MPI";
    case Launcher::kPmi: return "MPICH/Intel MPI (PMI)";
    case Launcher::kPmix: return "PMIx";
    case Launcher::kSlurm: return "Slurm";
  }
  return "?";
}

Result<LaunchEnv> readLaunchEnv(const EnvLookup& env) {
  LaunchEnv out;
  Status s = Status::ok();
  if (isSet(env("RANK")) || isSet(env("WORLD_SIZE"))) {
    // loomrun names the rendezvous (LOOM_JOB_SECRET); torchrun does not, and
    // its MASTER_PORT is held by its own store.
    const Launcher l = isSet(env("LOOM_JOB_SECRET")) ? Launcher::kLoomrun : Launcher::kTorchrun;
    if (!isSet(env("RANK")))
      return makeError(Code::kInvalidArgument, "%s: WORLD_SIZE=%s is set but RANK is not: this rank is unknown",
                       launcherName(l), env("WORLD_SIZE"));
    s = readPlace(env, l, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", &out);
    out.jobKey = "torchrun:" + orEmpty(env("TORCHELASTIC_RUN_ID")) + ":" + orEmpty(env("MASTER_ADDR")) + ":" +
                 orEmpty(env("MASTER_PORT"));
    // torchrun's store holds MASTER_PORT on MASTER_ADDR while the job runs.
    out.jobKeyUnique = isSet(env("MASTER_PORT"));
  } else if (isSet(env("OMPI_COMM_WORLD_RANK")) || isSet(env("OMPI_COMM_WORLD_SIZE"))) {
    if (!isSet(env("OMPI_COMM_WORLD_RANK")))
      return makeError(Code::kInvalidArgument, "Open MPI: OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not");
    s = readPlace(env, Launcher::kOpenMpi, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                  "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", &out);
    const char* job = firstSet(env, {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid"});
    out.jobKey = "ompi:" + orEmpty(job);
    out.jobKeyUnique = job != nullptr;
  } else if (isSet(env("PMI_RANK")) || isSet(env("PMI_SIZE"))) {
    if (!isSet(env("PMI_RANK")))
      return makeError(Code::kInvalidArgument, "%s: PMI_SIZE is set but PMI_RANK is not", launcherName(Launcher::kPmi));
    s = readPlace(env, Launcher::kPmi, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", &out);
    const char* job = firstSet(env, {"PMI_KVSNAME", "I_MPI_JOB_ID"});
    out.jobKey = "pmi:" + orEmpty(job);
    out.jobKeyUnique = job != nullptr;
  } else if (isSet(env("PMIX_RANK"))) {
    // PMIx passes the size through its server, not the environment: take the
    // step size from Slurm (srun --mpi=pmix), the usual PMIx launcher.
    const char* sizeVar = slurmSizeVar(env);
    if (!isSet(env(sizeVar)))
      return makeError(Code::kInvalidArgument,
                       "PMIx: PMIX_RANK=%s is set but the job size is not (neither SLURM_STEP_NUM_TASKS nor "
                       "SLURM_NTASKS); launch with mpirun or srun, or set RANK and WORLD_SIZE",
                       env("PMIX_RANK"));
    s = readPlace(env, Launcher::kPmix, "PMIX_RANK", sizeVar, "SLURM_LOCALID", nullptr, &out);
    slurmLocalSize(env, &out);
    out.jobKey = "pmix:" + orEmpty(env("PMIX_NAMESPACE")) + ":" + slurmJobKey(env);
    out.jobKeyUnique = isSet(env("PMIX_NAMESPACE")) || isSet(env("SLURM_JOB_ID"));
  } else if (isSet(env("SLURM_PROCID")) &&
             (isSet(env("SLURM_STEP_NUM_TASKS")) || std::string(env("SLURM_PROCID")) != "0")) {
    // srun exports SLURM_STEP_NUM_TASKS to its tasks; a batch script's own
    // process (SLURM_PROCID=0, SLURM_NTASKS of the whole allocation) is not
    // a task of a step, and runs as a job of its own.
    s = readPlace(env, Launcher::kSlurm, "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", nullptr, &out);
    slurmLocalSize(env, &out);
    out.jobKey = slurmJobKey(env);
    out.jobKeyUnique = isSet(env("SLURM_JOB_ID"));
  }
  if (!s.isOk()) return s;
  if (out.launcher == Launcher::kNone) return out;

  // A rendezvous named by the environment (loomrun's, or a user's) applies
  // under any launcher; it needs both the port and the secret.
  out.masterAddr = orEmpty(env("MASTER_ADDR"));
  if (const char* secret = env("LOOM_JOB_SECRET"); isSet(secret)) {
    auto port = integer(env, "MASTER_PORT", 1, 65535, launcherName(out.launcher));
    if (!port.isOk())
      return port.status().withContext("LOOM_JOB_SECRET names a rendezvous, whose port MASTER_PORT is missing or wrong: ");
    out.masterPort = port.value();
    out.secretHex = secret;
  }
  return out;
}

}  // namespace loom::bootstrap
