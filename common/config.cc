#include "common/config.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "common/format.h"

namespace loom {
namespace {

// Parses a size with an optional K/M/G suffix (powers of 1024).
bool parseBytes(const char* text, size_t* out) {
  // strtoull would accept "-1" (as 2^64-1) and leading blanks: digits only.
  if (*text < '0' || *text > '9') return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text) return false;
  unsigned long long mult = 1;
  if (*end == 'K' || *end == 'k') mult = 1ull << 10, ++end;
  else if (*end == 'M' || *end == 'm') mult = 1ull << 20, ++end;
  else if (*end == 'G' || *end == 'g') mult = 1ull << 30, ++end;
  if (*end != '\0') return false;
  // A product that wraps could land in range ("17592186044417M" is 1M mod 2^64).
  if (v > ~0ull / mult) return false;
  *out = static_cast<size_t>(v * mult);
  return true;
}

bool parseInt(const char* text, long lo, long hi, int* out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

// The contents of the settings files, one generation per (re)load; older
// generations stay alive because readKnob handed out pointers into them.
struct SettingsFiles {
  SettingsMap loomUser, loomSystem, ncclUser, ncclSystem;
};
std::mutex filesMutex;
// Sections whose variables come from the environment only (configKnobs()).
constexpr const char* kLauncherSection = "Set by the launcher (loomrun, torchrun, mpirun, srun) for each rank";
constexpr const char* kFilesSection = "Settings files";
std::vector<std::unique_ptr<SettingsFiles>> fileGenerations;

bool startsWith(const char* text, const char* prefix) { return std::strncmp(text, prefix, std::strlen(prefix)) == 0; }

const KnobDoc* declared(const char* env) {
  for (const auto& k : configKnobs())
    if (std::strcmp(k.env, env) == 0) return &k;
  return nullptr;
}

// The one place Loom reads the environment (check_env_reads.cmake).
const char* fromEnvironment(const char* env) { return std::getenv(env); }

void loadSettingsFilesLocked() {
  auto files = std::make_unique<SettingsFiles>();
  const char* systemDir = fromEnvironment("LOOM_SYSTEM_CONF_DIR");
  const SettingsFilePaths loom = loomSettingsFiles(systemDir);
  const SettingsFilePaths nccl = ncclSettingsFiles(systemDir, fromEnvironment("NCCL_CONF_FILE"));
  readSettingsFile(loom.user, &files->loomUser);
  readSettingsFile(loom.system, &files->loomSystem);
  readSettingsFile(nccl.user, &files->ncclUser);
  readSettingsFile(nccl.system, &files->ncclSystem);
  fileGenerations.push_back(std::move(files));
}

const char* fromFile(const SettingsMap& file, const char* env) {
  auto it = file.find(env);
  return it == file.end() ? nullptr : it->second.c_str();
}

}  // namespace

const std::vector<KnobDoc>& configKnobs() {
  static const char* const kWaits = "Waits and timeouts";
  static const char* const kData = "Data path";
  static const char* const kTransports = "Transport choice";
  static const char* const kTcp = "TCP transport";
  static const char* const kTuning = "Algorithms and tuning";
  static const char* const kKernels = "Reduction kernels";
  static const char* const kDevices = "Device (CUDA) buffers";
  static const char* const kDiagnostics = "Diagnostics";
  static const char* const kLogging = "Logging";
  static const char* const kBootstrap = "Bootstrap";
  static const char* const kLauncher = kLauncherSection;
  static const char* const kFiles = kFilesSection;
  static const char* const kNccl = "NCCL variables (Loom's libnccl.so.2 only)";
  static const std::vector<KnobDoc> knobs = {
      {"LOOM_TIMEOUT", kWaits, "300", "seconds any blocking wait may last before it fails with loomTimeout", "common/wait (every blocking wait)"},
      {"LOOM_SPIN_US", kWaits, "5 (0 when a host runs more ranks than it has cores)", "microseconds a wait busy-polls before it starts to yield the core", "common/wait"},
      {"LOOM_YIELD_US", kWaits, "200", "microseconds a wait polls with sched_yield before it sleeps on a futex", "common/wait"},
      {"LOOM_ASYNC_INLINE_US", kWaits, "20 (0 when a host runs more ranks than it has cores)", "a collective of at most 64 KiB on an idle host stream runs on the calling thread, as a blocking call does, when every peer has started it within this many microseconds (polled); otherwise the communicator's worker thread runs it and the call returns. Algorithms that can start without their peers (one-shot; recursive doubling at 2 ranks) post their input at once and poll for the peers' posts instead, and a late peer leaves only the rest to the worker. When earlier small calls still run on the worker, the call waits up to this long for them, asleep once more than two are queued (so the workers get the cores), and then runs inline. A communicator of one rank has no peer to wait for: its small calls on an idle stream always run inline. The call never waits for a peer longer than this, plus the kernel's timer slack (about 50 us) when it slept; 0: always the worker (0..1000). With more ranks than cores a peer is often not running, and the poll only delays it", "src/comm"},
      {"LOOM_PLACE_RANKS", kWaits, "1", "1: the thread that creates a rank's first communicator, when its ranks are processes of their own and its affinity mask has at least one core per local rank (no launcher bound it), moves once to the core loomrun --bind core would give it and gets its whole mask back, so ranks start on separate cores (two ranks woken onto one core pay a context switch per hand-off until the scheduler parts them) and the scheduler may still move them; 0: leave placement to the scheduler", "src/comm"},
      {"LOOM_STREAM_DEPTH", kWaits, "1024", "operations a host stream may hold unfinished: a call that would enqueue more (outside a group) waits until half of them have finished, as a launch waits on a full CUDA stream, so that a caller that enqueues faster than the operations run keeps its queue, and its memory, bounded (2..16777216); read once per process", "src/comm (stream)"},
      {"LOOM_CHUNK_SIZE", kData, "256K", "bytes per pipelined chunk (one FIFO slot); K/M suffixes; multiple of 64, 4K..64M; unset: 2M where only TCP serves pairs; loomConfig_t.chunkBytes replaces it for one communicator", "transports, algorithms"},
      {"LOOM_SHM_SLOTS", kData, "4", "chunks in flight per shared-memory connection (2..64)", "transports/shm"},
      {"LOOM_SHM_DIR", kData, "/dev/shm", "directory of shared-memory segments", "transports/shm"},
      {"LOOM_SHM_SINGLE_COPY", kData, "1", "1: ranks on one host copy straight between each other's buffers (process_vm_readv/writev; memcpy between ranks that are threads of one process) where the kernel allows it, checked once per communicator; the direct all-reduce needs it. 0: data between ranks goes through shared-memory segments only", "transports/shm"},
      {"LOOM_TRANSPORT", kTransports, "", "force one transport for every peer: shm, ib, ucx, tcp (e.g. tcp to test TCP on one host); empty: shared memory within a host; across hosts ib if a device exists, else ucx if built in, else tcp", "src/comm (transport policy)"},
      {"LOOM_SHM_DISABLE", kTransports, "0", "1: never use shared memory (peers on this host go over the network transports)", "src/comm (transport policy)"},
      {"LOOM_IB_DISABLE", kTransports, "0", "1: never use the verbs (InfiniBand/RoCE) transport", "src/comm (transport policy)"},
      {"LOOM_IB_HCA", kTransports, "", "RDMA devices (and ports) the verbs transport may use, in NCCL_IB_HCA's syntax: mlx5_0:1,mlx5_1 (a name matches every device it begins; =NAME exactly; a leading ^ excludes the list); empty: the first device with an active port", "transports/verbs"},
      {"LOOM_UCX_DISABLE", kTransports, "0", "1: never use the UCX transport", "src/comm (transport policy)"},
      {"LOOM_TCP_DISABLE", kTransports, "0", "1: never use the TCP transport", "src/comm (transport policy)"},
      {"LOOM_HOST_ID", kTransports, "", "this rank's host identity: ranks with the same id are on one host (shared memory between them); for emulated hosts (network namespaces) and tests that split one machine; empty: host name and boot id", "src/comm (peer table)"},
      {"LOOM_NSOCKS", kTcp, "2", "TCP sockets per peer that chunks are striped over (1..16)", "transports/tcp"},
      {"LOOM_SOCKET_IFNAME", kTcp, "", "interfaces TCP listens on, as NCCL_SOCKET_IFNAME: comma list of name prefixes, ^ excludes, = exact names (eth0, ^docker,lo, =eth0); empty: first interface up that is not docker* or lo, else lo", "transports/tcp"},
      {"LOOM_TCP_TEST_DELAY_US", kTcp, "0", "tests and benchmarks only: the TCP transport holds each chunk this many microseconds after commit before sending it (emulated link latency; 0..1000000)", "transports/tcp"},
      {"LOOM_ALGO", kTuning, "", "algorithms the tuner may pick: comma list (ring, rd, tree, hd, oneshot, window, direct, chain, deterministic), ^ excludes, per collective as allreduce:tree,ring;broadcast:chain; case-insensitive; empty lets Loom choose. The device engine follows it where it can (ring, tree)", "src/tuner"},
      {"LOOM_PROTO", kTuning, "", "protocols the tuner and the device engine may pick: simple, ll; same syntax as LOOM_ALGO; empty lets Loom choose", "src/tuner"},
      {"LOOM_TUNING_FILE", kTuning, "", "text file of cost-model parameters (alpha, bandwidth or measured points per collective, algorithm, protocol, nranks; format in src/tuner/tuning_table.h; written by perf/tune.sh) read after the built-in defaults", "src/tuner"},
      {"LOOM_DETERMINISTIC", kTuning, "0", "1: all-reduce, reduce and reduce-scatter of floating-point data use the deterministic algorithm (identical results run to run), whatever LOOM_ALGO says", "src/tuner"},
      {"LOOM_TUNER_ONLINE", kTuning, "1", "1: a call repeated with the same collective, count, type, op and root times the algorithms the cost model predicts within 1.5x of its pick (a few calls each, all ranks agreeing on the fastest by one small all-reduce) and keeps the fastest, re-checking now and then; 0: the cost model's pick only. Off whenever LOOM_ALGO or LOOM_PROTO is set; rank 0's setting applies to all", "src/tuner, src/comm"},
      {"LOOM_KERNEL_ISA", kKernels, "best", "cap the reduction kernels' instruction set (portable, avx2, avx512); read once per process since it describes the CPU", "kernels"},
      {"LOOM_CUDA_ENGINE", kDevices, "1", "1: on one host, collectives on device buffers run as CUDA kernels that move and reduce the data between the GPUs, enqueued on the caller's stream, when every rank's device reaches every other's; 0: stage them through pinned host memory. Set it alike on every rank (all join the setup at creation)", "src/device"},
      {"LOOM_CUDA_CHANNELS", kDevices, "32", "the most thread blocks per rank (channels) a device engine collective uses, 1..32: a call takes one per 256 KiB of its largest buffer, at least 8 (small LL messages: 8). The ranks of a communicator use the smallest value any of them set; ranks sharing a GPU need ranks x channels blocks resident at once", "src/device"},
      {"LOOM_CUDA_P2P", kDevices, "0", "1: same-host all-reduce of device buffers copies directly between the devices instead of staging through pinned host memory; set it alike on every rank", "src/device"},
      {"LOOM_NET_GDR", kDevices, "0", "1: across hosts, device buffers go through the RDMA NIC (GPUDirect RDMA) when every rank can; set it alike on every rank (all join an agreement at creation)", "src/device"},
      {"LOOM_CUDA_COPY_CHUNK", kDevices, "8M", "bytes per copy between a device buffer and its pinned host staging buffer; K/M/G suffixes; at least 4K", "src/device"},
      {"LOOM_CHECK", kDiagnostics, "0", "1: before moving data, every collective exchanges (sequence number, type, count, dtype, op, root) among all ranks and fails on every rank, naming each rank's call, if they differ; rank 0's setting applies to all", "src/diagnostics"},
      {"LOOM_FLIGHT_RECORDER_ENTRIES", kDiagnostics, "64", "operations each communicator keeps (state, progress, timestamps) for the dump on a timeout, loomCommAbort or LOOM_DUMP_ON_SIGNAL; 0 keeps none (0..1000000)", "src/diagnostics"},
      {"LOOM_DUMP_ON_SIGNAL", kDiagnostics, "", "signal (SIGUSR1, USR2, or a number) that makes every communicator dump its flight recorder to the log and LOOM_DUMP_DIR", "src/diagnostics"},
      {"LOOM_DUMP_DIR", kDiagnostics, "/tmp", "directory of flight-recorder dumps: loom-flight-<host>-<pid>-rank<R>.txt", "src/diagnostics"},
      {"LOOM_TRACE", kDiagnostics, "", "Chrome-trace JSON timeline of operations and their phases, one file per rank (%r: rank; else .rank<N> is inserted before the extension)", "src/diagnostics"},
      {"LOOM_DEBUG", kLogging, "WARN", "log level: NONE, VERSION, WARN, INFO, TRACE; logging outside any communicator reads it (and LOOM_DEBUG_SUBSYS, LOOM_DEBUG_FILE) once per process; INFO or TRACE also makes loomrun --bind print each rank's CPUs", "common/log, tools/loomrun"},
      {"LOOM_DEBUG_SUBSYS", kLogging, "ALL", "comma list of INIT,BOOTSTRAP,TRANSPORT,ALGO,COLL,KERNEL,ENV,PROGRESS,TUNER; ^ excludes", "common/log"},
      {"LOOM_DEBUG_FILE", kLogging, "", "log file instead of stderr; %h host, %p pid", "common/log"},
      {"LOOM_BOOTSTRAP_ADDR", kBootstrap, "127.0.0.1", "address the bootstrap root started by loomGetUniqueId listens on", "src/api (loomGetUniqueId)"},
      {"RANK", kLauncher, "set by loomrun", "this rank's index in the job, 0..WORLD_SIZE-1; read by loomGetUniqueIdFromEnv", "src/api (loomGetUniqueIdFromEnv)"},
      {"WORLD_SIZE", kLauncher, "set by loomrun", "ranks in the job; read by loomGetUniqueIdFromEnv", "src/api (loomGetUniqueIdFromEnv)"},
      {"MASTER_ADDR", kLauncher, "set by loomrun (127.0.0.1 when unset)", "address of the bootstrap root (rank 0 starts it there); read by loomGetUniqueIdFromEnv", "src/api (loomGetUniqueIdFromEnv)"},
      {"MASTER_PORT", kLauncher, "set by loomrun", "port of the bootstrap root (1..65535) when LOOM_JOB_SECRET is set too (loomrun); without it (torchrun, whose store holds this port) Loom does not bind it; read by loomGetUniqueIdFromEnv", "src/api (loomGetUniqueIdFromEnv)"},
      {"LOOM_JOB_SECRET", kLauncher, "set by loomrun", "32 hex digits shared by every rank of a job; the bootstrap root admits only ranks that know it. loomrun generates one for a single-node job, or passes on the one in its own environment (required, the same on every node, with --nnodes > 1)", "src/api (loomGetUniqueIdFromEnv), tools/loomrun"},
      {"LOCAL_RANK", kLauncher, "set by loomrun, torchrun", "this rank's index among the ranks on its host", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"LOCAL_WORLD_SIZE", kLauncher, "set by loomrun, torchrun", "ranks on this host; when it equals WORLD_SIZE, the ranks meet through a file in the per-user runtime directory", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"TORCHELASTIC_RUN_ID", kLauncher, "set by torchrun", "torchrun's job id (--rdzv-id); part of the name of the rendezvous file", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"OMPI_COMM_WORLD_RANK", kLauncher, "set by mpirun (Open MPI)", "this rank, when RANK is unset", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"OMPI_COMM_WORLD_SIZE", kLauncher, "set by mpirun (Open MPI)", "ranks in the job, when WORLD_SIZE is unset", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"OMPI_COMM_WORLD_LOCAL_RANK", kLauncher, "set by mpirun (Open MPI)", "this rank's index on its host", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"OMPI_COMM_WORLD_LOCAL_SIZE", kLauncher, "set by mpirun (Open MPI)", "ranks on this host", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"OMPI_MCA_ess_base_jobid", kLauncher, "set by mpirun (Open MPI)", "Open MPI's job id; part of the name of the rendezvous file", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"OMPI_MCA_orte_ess_jobid", kLauncher, "set by mpirun (Open MPI)", "Open MPI's job id (older releases); part of the name of the rendezvous file", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"PMIX_NAMESPACE", kLauncher, "set by mpirun (Open MPI), srun --mpi=pmix", "the PMIx job namespace; part of the name of the rendezvous file", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"PMIX_RANK", kLauncher, "set by a PMIx launcher", "this rank, when neither RANK, OMPI_COMM_WORLD_RANK nor PMI_RANK is set; the size comes from SLURM_STEP_NUM_TASKS or SLURM_NTASKS", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"PMI_RANK", kLauncher, "set by mpiexec (MPICH/Hydra, Intel MPI)", "this rank, when RANK and OMPI_COMM_WORLD_RANK are unset", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"PMI_SIZE", kLauncher, "set by mpiexec (MPICH/Hydra, Intel MPI)", "ranks in the job", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"MPI_LOCALRANKID", kLauncher, "set by mpiexec (MPICH/Hydra, Intel MPI)", "this rank's index on its host", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"MPI_LOCALNRANKS", kLauncher, "set by mpiexec (MPICH/Hydra, Intel MPI)", "ranks on this host", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"PMI_KVSNAME", kLauncher, "set by a PMI launcher", "the PMI job name; part of the name of the rendezvous file", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"PMI_PORT", kLauncher, "set by mpiexec (MPICH/Hydra)", "the PMI server's address; part of the name of the rendezvous file", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"I_MPI_JOB_ID", kLauncher, "set by mpiexec (Intel MPI)", "Intel MPI's job id; part of the name of the rendezvous file", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"SLURM_PROCID", kLauncher, "set by srun", "this rank, when no MPI or torchrun variable is set", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"SLURM_STEP_NUM_TASKS", kLauncher, "set by srun", "ranks in the srun step; SLURM_PROCID without it is a batch script's own process (a job of its own) when 0, else an error", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"SLURM_NTASKS", kLauncher, "set by srun, sbatch", "ranks in the job, for PMIX_RANK when SLURM_STEP_NUM_TASKS is unset", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"SLURM_LOCALID", kLauncher, "set by srun", "this rank's index on its node", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"SLURM_STEP_NUM_NODES", kLauncher, "set by srun", "nodes of the step; 1 means every rank is on this host", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"SLURM_NNODES", kLauncher, "set by srun, sbatch", "nodes of the job, when SLURM_STEP_NUM_NODES is unset", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"SLURM_JOB_ID", kLauncher, "set by srun, sbatch", "Slurm's job id; part of the name of the rendezvous file", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"SLURM_STEP_ID", kLauncher, "set by srun", "Slurm's step id; part of the name of the rendezvous file", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"XDG_RUNTIME_DIR", kLauncher, "set by the login session", "per-user directory of the rendezvous file of one-host jobs ($XDG_RUNTIME_DIR/loom, else /tmp/loom-<uid>)", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"HOME", kLauncher, "set by the login session", "$HOME/.loom/rendezvous holds the rendezvous file of jobs on several hosts (HOME must be shared by them)", "src/api (loomGetUniqueIdFromEnv, loomGetLaunchEnv)"},
      {"LOOM_RESTART_COUNT", kLauncher, "set by loomrun", "the attempt number under loomrun --max-restarts (0 first), for programs that resume from a checkpoint", "programs (examples/train_demo)"},
      {"LOOM_LOCAL_CORES", kLauncher, "set by loomrun --bind", "cores this host's ranks share between them (each rank's own mask holds only its cores); with more local ranks than these, waits do not spin", "src/comm"},
      {"LOOM_SYSTEM_CONF_DIR", kFiles, "/etc", "directory of the system-wide settings files loom.conf (LOOM_* variables) and nccl.conf (NCCL_* variables, read by Loom's libnccl.so.2). A LOOM_* variable comes from the environment, else ~/.loom.conf, else <dir>/loom.conf: KEY=VALUE lines, # starts a comment line. Meant for tests and relocated installs; environment only", "common/config (readKnob)"},
      {"NCCL_CONF_FILE", kFiles, "", "settings file read instead of ~/.nccl.conf by Loom's libnccl.so.2 (NCCL's format, KEY=VALUE); <LOOM_SYSTEM_CONF_DIR>/nccl.conf is read after it; environment only", "common/config (readKnob), shim/nccl"},
      {"NCCL_DEBUG", kNccl, "", "sets LOOM_DEBUG: NONE, VERSION, WARN, INFO, TRACE (ABORT has no Loom meaning: warned and ignored). Each NCCL_* variable here is read from the environment, NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf; a LOOM_* variable from the same source wins, and so does one from a higher source; one without a Loom meaning is logged once at WARN and ignored", "shim/nccl"},
      {"NCCL_DEBUG_SUBSYS", kNccl, "", "sets LOOM_DEBUG_SUBSYS: INIT, BOOTSTRAP, COLL, ENV and ALL as named; P2P, SHM and NET become TRANSPORT, GRAPH ALGO, TUNING TUNER, PROXY PROGRESS; a leading ^ excludes; others (ALLOC, CALL, NVLS, REG, PROFILE, RAS) warned and dropped", "shim/nccl"},
      {"NCCL_DEBUG_FILE", kNccl, "", "sets LOOM_DEBUG_FILE (the same %h and %p)", "shim/nccl"},
      {"NCCL_ALGO", kNccl, "", "sets LOOM_ALGO: Ring and Tree become ring and tree, with NCCL's list, ^ and per-collective syntax; NVLS, NVLSTree, CollnetDirect, CollnetChain and PAT have no Loom meaning: warned and dropped", "shim/nccl"},
      {"NCCL_PROTO", kNccl, "", "sets LOOM_PROTO: Simple and LL become simple and ll; LL128 has no Loom meaning: warned and dropped", "shim/nccl"},
      {"NCCL_SOCKET_IFNAME", kNccl, "", "sets LOOM_SOCKET_IFNAME (the same syntax)", "shim/nccl"},
      {"NCCL_IB_DISABLE", kNccl, "", "sets LOOM_IB_DISABLE (0 or 1)", "shim/nccl"},
      {"NCCL_IB_HCA", kNccl, "", "sets LOOM_IB_HCA (the same syntax)", "shim/nccl"},
      {"NCCL_SHM_DISABLE", kNccl, "", "sets LOOM_SHM_DISABLE (0 or 1)", "shim/nccl"},
      {"NCCL_P2P_DISABLE", kNccl, "", "1 sets LOOM_CUDA_ENGINE=0 and LOOM_CUDA_P2P=0 (device buffers stage through host memory); 0 keeps Loom's defaults", "shim/nccl"},
      {"NCCL_NET_GDR_LEVEL", kNccl, "", "sets LOOM_NET_GDR: LOC (or 0) turns GPUDirect RDMA off, PIX, PXB, PHB, SYS (or 1..5) on; Loom does not grade by PCI distance", "shim/nccl"},
      {"NCCL_BUFFSIZE", kNccl, "", "sets LOOM_CHUNK_SIZE to NCCL_BUFFSIZE divided by LOOM_SHM_SLOTS (4 unless set), rounded down to a multiple of 64; the result must lie in 4K..64M", "shim/nccl"},
      {"NCCL_NET", kNccl, "", "Socket sets LOOM_IB_DISABLE=1 and LOOM_UCX_DISABLE=1 (TCP between hosts); IB sets LOOM_TCP_DISABLE=1 and LOOM_UCX_DISABLE=1", "shim/nccl"},
  };
  return knobs;
}

void reloadSettingsFiles() {
  std::lock_guard<std::mutex> lock(filesMutex);
  loadSettingsFilesLocked();
}

const char* readKnobFrom(const char* env, SettingSource source) {
  const KnobDoc* knob = declared(env);
  if (!knob) {
    // A variable outside the table would be undocumented and missing from
    // `loomrun --help-env`: stop the developer who added it at once.
    std::fprintf(stderr, "loom: internal error: %s is read but not declared in configKnobs() (common/config.cc)\n", env);
    std::abort();
  }
  if (source == SettingSource::kEnvironment) return fromEnvironment(env);
  // Only the library's own settings live in files: not what a launcher
  // passes per rank (RANK, LOOM_JOB_SECRET), nor the variables that say
  // where the files are.
  if (std::strcmp(knob->section, kLauncherSection) == 0 || std::strcmp(knob->section, kFilesSection) == 0)
    return nullptr;
  const bool loomName = startsWith(env, "LOOM_");
  const bool ncclName = startsWith(env, "NCCL_");
  if (!loomName && !ncclName) return nullptr;
  std::lock_guard<std::mutex> lock(filesMutex);
  if (fileGenerations.empty()) loadSettingsFilesLocked();
  const SettingsFiles& files = *fileGenerations.back();
  if (source == SettingSource::kUserFile) return fromFile(loomName ? files.loomUser : files.ncclUser, env);
  return fromFile(loomName ? files.loomSystem : files.ncclSystem, env);
}

std::vector<std::string> namesInSettingsFiles() {
  std::lock_guard<std::mutex> lock(filesMutex);
  if (fileGenerations.empty()) loadSettingsFilesLocked();
  const SettingsFiles& files = *fileGenerations.back();
  std::vector<std::string> names;
  for (const SettingsMap* file : {&files.loomUser, &files.loomSystem, &files.ncclUser, &files.ncclSystem})
    for (const auto& entry : *file) names.push_back(entry.first);
  return names;
}

const char* readKnob(const char* env) {
  for (SettingSource source : {SettingSource::kEnvironment, SettingSource::kUserFile, SettingSource::kSystemFile})
    if (const char* value = readKnobFrom(env, source)) return value;
  return nullptr;
}

Config Config::fromEnv(std::vector<std::string>* warnings) {
  Config c;
  auto warn = [&](const char* name, const char* value, const char* why) {
    if (warnings) warnings->push_back(strprintf("ignoring %s=%s: %s", name, value, why));
  };
  if (const char* v = readKnob("LOOM_TIMEOUT"); v && *v) {
    char* end = nullptr;
    double t = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(t > 0)) warn("LOOM_TIMEOUT", v, "expected a positive number of seconds");
    else c.timeoutSeconds = t;
  }
  if (const char* v = readKnob("LOOM_CHUNK_SIZE"); v && *v) {
    size_t b = 0;
    if (!parseBytes(v, &b) || !isValidChunkBytes(b))
      warn("LOOM_CHUNK_SIZE", v, "expected a multiple of 64 between 4K and 64M");
    else {
      c.chunkBytes = b;
      c.chunkBytesSet = true;
    }
  }
  if (const char* v = readKnob("LOOM_SHM_SLOTS"); v && *v)
    if (!parseInt(v, 2, 64, &c.fifoSlots)) warn("LOOM_SHM_SLOTS", v, "expected an integer in [2, 64]");
  if (const char* v = readKnob("LOOM_SPIN_US"); v && *v) {
    if (!parseInt(v, 0, 10000000, &c.spinMicros)) warn("LOOM_SPIN_US", v, "expected microseconds in [0, 1e7]");
    else c.spinMicrosSet = true;
  }
  if (const char* v = readKnob("LOOM_YIELD_US"); v && *v)
    if (!parseInt(v, 0, 10000000, &c.yieldMicros)) warn("LOOM_YIELD_US", v, "expected microseconds in [0, 1e7]");
  if (const char* v = readKnob("LOOM_PLACE_RANKS"); v && *v) {
    int on = 1;
    if (!parseInt(v, 0, 1, &on)) warn("LOOM_PLACE_RANKS", v, "expected 0 or 1");
    else c.placeRanks = on == 1;
  }
  if (const char* v = readKnob("LOOM_SHM_DIR"); v && *v) c.shmDir = v;
  if (const char* v = readKnob("LOOM_SHM_SINGLE_COPY"); v && *v) {
    int on = 1;
    if (!parseInt(v, 0, 1, &on)) warn("LOOM_SHM_SINGLE_COPY", v, "expected 0 or 1");
    else c.shmSingleCopy = on == 1;
  }
  if (const char* v = readKnob("LOOM_TRANSPORT"); v && *v) {
    const std::string t = v;
    if (t != "shm" && t != "ib" && t != "ucx" && t != "tcp") warn("LOOM_TRANSPORT", v, "expected shm, ib, ucx or tcp");
    else c.transport = t;
  }
  for (const char* name : {"shm", "ib", "ucx", "tcp"}) {
    std::string var = "LOOM_" + std::string(name) + "_DISABLE";
    for (auto& ch : var) ch = static_cast<char>(ch >= 'a' && ch <= 'z' ? ch - 'a' + 'A' : ch);
    int off = 0;
    if (const char* v = readKnob(var.c_str()); v && *v) {
      if (!parseInt(v, 0, 1, &off)) warn(var.c_str(), v, "expected 0 or 1");
      else if (off == 1) c.disabledTransports.push_back(name);
    }
  }
  if (const char* v = readKnob("LOOM_TCP_TEST_DELAY_US"); v && *v)
    if (!parseInt(v, 0, 1000000, &c.tcpTestDelayMicros))
      warn("LOOM_TCP_TEST_DELAY_US", v, "expected microseconds in [0, 1000000]");
  if (const char* v = readKnob("LOOM_NSOCKS"); v && *v)
    if (!parseInt(v, 1, 16, &c.socketsPerPeer)) warn("LOOM_NSOCKS", v, "expected an integer in [1, 16]");
  if (const char* v = readKnob("LOOM_SOCKET_IFNAME"); v && *v) c.socketIfname = v;
  if (const char* v = readKnob("LOOM_ALGO"); v && *v) c.algo = v;
  if (const char* v = readKnob("LOOM_PROTO"); v && *v) c.proto = v;
  if (const char* v = readKnob("LOOM_TUNING_FILE"); v && *v) c.tuningFile = v;
  if (const char* v = readKnob("LOOM_DETERMINISTIC"); v && *v) {
    int on = 0;
    if (!parseInt(v, 0, 1, &on)) warn("LOOM_DETERMINISTIC", v, "expected 0 or 1");
    else c.deterministic = on == 1;
  }
  if (const char* v = readKnob("LOOM_TUNER_ONLINE"); v && *v) {
    int on = 1;
    if (!parseInt(v, 0, 1, &on)) warn("LOOM_TUNER_ONLINE", v, "expected 0 or 1");
    else c.onlineTuning = on == 1;
  }
  if (const char* v = readKnob("LOOM_ASYNC_INLINE_US"); v && *v) {
    if (!parseInt(v, 0, 1000, &c.asyncInlineMicros)) warn("LOOM_ASYNC_INLINE_US", v, "expected 0..1000");
    else c.asyncInlineMicrosSet = true;
  }
  if (const char* v = readKnob("LOOM_CHECK"); v && *v) {
    int on = 0;
    if (!parseInt(v, 0, 1, &on)) warn("LOOM_CHECK", v, "expected 0 or 1");
    else c.check = on == 1;
  }
  if (const char* v = readKnob("LOOM_FLIGHT_RECORDER_ENTRIES"); v && *v)
    if (!parseInt(v, 0, 1000000, &c.flightRecorderEntries))
      warn("LOOM_FLIGHT_RECORDER_ENTRIES", v, "expected an integer in [0, 1000000]");
  if (const char* v = readKnob("LOOM_DUMP_ON_SIGNAL"); v && *v) c.dumpOnSignal = v;
  if (const char* v = readKnob("LOOM_DUMP_DIR"); v && *v) c.dumpDir = v;
  if (const char* v = readKnob("LOOM_TRACE"); v && *v) c.tracePath = v;
  c.log = LogSettings::fromEnv();
  if (const char* v = readKnob("LOOM_HOST_ID"); v && *v) c.hostId = v;
  // No warning for a bad value: loomrun sets it, and a rank without it counts its own mask.
  if (const char* v = readKnob("LOOM_LOCAL_CORES"); v && std::atoi(v) > 0) c.localCores = std::atoi(v);
  if (const char* v = readKnob("LOOM_CUDA_ENGINE")) c.cudaEngine = v;
  if (const char* v = readKnob("LOOM_CUDA_P2P")) c.cudaP2P = v;
  if (const char* v = readKnob("LOOM_NET_GDR")) c.netGdr = v;
  if (const char* v = readKnob("LOOM_CUDA_COPY_CHUNK")) c.cudaCopyChunk = v;
  if (const char* v = readKnob("LOOM_CUDA_CHANNELS")) c.cudaChannels = v;
  return c;
}

}  // namespace loom
