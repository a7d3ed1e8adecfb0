// Command-line options of loomrun, the launcher that starts one process per
// local rank (like torchrun / mpirun for a single node, or one node of many).
//
//   loomrun -n N|auto|cpu|gpu [--standalone] [--nnodes K --node-rank R
//           --master-addr A --master-port P | --rdzv-endpoint HOST:PORT]
//           [--nnodes MIN:MAX --rdzv-endpoint HOST:PORT [--rdzv-timeout S]
//           [--rdzv-conf join_timeout=S,last_call_timeout=S]]
//           [--rdzv-id ID] [--rdzv-backend c10d|static]
//           [--tag-output|--no-tag-output] [--kill-timeout S] [--max-restarts N]
//           [--bind none|core|numa] [--bind-verbose]
//           [--log-dir DIR [--redirects V] [--tee V]] [--local-ranks-filter R,...]
//           [-m | --no-python] [--] PROG ARGS...
//   loomrun --help | --version | --help-env[=text|markdown]
//
// torchrun's spellings (--nproc_per_node, --rdzv_endpoint, ...) are accepted
// too. Parsing stops at PROG: everything after it belongs to the program, so
// `loomrun -n 2 prog -n 5` passes `-n 5` to prog.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "src/topology/binding_plan.h"

namespace loom::launcher {

// Exit statuses of loomrun itself (a rank's own status is passed through).
inline constexpr int kExitUsage = 2;           // bad option or configuration
inline constexpr int kExitCannotExecute = 127;  // PROG missing or not executable

// Bounds that keep the arithmetic (and the number of pipes) sane.
inline constexpr int kMaxLocalRanks = 1024;
inline constexpr int kMaxNodes = 1 << 20;
inline constexpr int kMaxRestarts = 1000000;
// torchrun's port when --rdzv-endpoint names only a host.
inline constexpr int kDefaultRendezvousPort = 29400;

// --redirects / --tee values, as torchrun's Std: which of a rank's streams go
// to DIR/.../stdout.log and stderr.log (redirect: file only; tee: file and
// terminal).
enum StreamSet : unsigned { kNoStreams = 0, kStdout = 1, kStderr = 2, kBothStreams = 3 };

// How PROG is started: as given, or with the Python interpreter.
enum class ProgramKind {
  kAuto,      // PROG ending in ".py" runs as `PYTHON -u PROG`, others as given
  kModule,    // -m: `PYTHON -u -m PROG` (PYTHON: pythonInterpreter() below)
  kNoPython,  // --no-python: PROG as given, even a .py file
};

// --help-env prints the environment table as aligned text or as Markdown.
enum class EnvHelpFormat { kNone, kText, kMarkdown };

struct LaunchOptions {
  bool showHelp = false;
  bool showVersion = false;  // --version
  EnvHelpFormat envHelp = EnvHelpFormat::kNone;
  int localRanks = 0;  // -n / --nproc-per-node (N, auto, cpu or gpu); required
  int nodes = 1;       // --nnodes K, or MAX of --nnodes MIN:MAX
  // --nnodes MIN:MAX: elastic membership (tools/loomrun/elastic_agent.h);
  // node ranks and the world size come from a rendezvous at --rdzv-endpoint.
  bool elastic = false;
  int minNodes = 1;
  // --rdzv-timeout S / --rdzv-conf join_timeout=S: how long a rendezvous
  // round may wait for MIN nodes (torchrun's default 600 s).
  double joinTimeoutSeconds = 600.0;
  // --rdzv-conf last_call_timeout=S: once MIN nodes joined, how long the
  // round stays open for more (torchrun's default 30 s).
  double lastCallSeconds = 30.0;
  int nodeRank = 0;    // --node-rank, in [0, nodes)
  std::string masterAddr = "127.0.0.1";
  std::optional<int> masterPort;  // unset: pick a free port (single node only)
  bool standalone = false;         // --standalone: one node, free local port, random run id
  bool rdzvEndpointGiven = false;  // --rdzv-endpoint set masterAddr (and masterPort)
  std::optional<std::string> runId;  // --rdzv-id: TORCHELASTIC_RUN_ID
  ProgramKind programKind = ProgramKind::kAuto;
  std::optional<std::string> logDir;  // --log-dir
  // Per local rank: nothing in the map means the default for every rank.
  unsigned redirectsAll = kNoStreams;  // --redirects V
  unsigned teeAll = kNoStreams;        // --tee V
  std::vector<std::pair<int, unsigned>> redirectsByRank;  // --redirects 0:3,1:1
  std::vector<std::pair<int, unsigned>> teeByRank;
  // --local-ranks-filter 0,2: only these local ranks' output reaches the
  // terminal (their log files are unaffected); empty: every rank's.
  std::vector<int> terminalRanks;
  // --tag-output (true) / --no-tag-output (false); unset: untagged, whole lines.
  std::optional<bool> tagOutput;
  double killTimeoutSeconds = 5.0;  // SIGTERM -> SIGKILL grace period
  // --max-restarts: how often all ranks are started again after a rank
  // failed (torchrun's --max-restarts); 0 runs the job once.
  int maxRestarts = 0;
  // --bind: pin each local rank to a core or NUMA node (topology/binding_plan.h);
  // --bind-verbose (or LOOM_DEBUG=INFO) prints each rank's CPUs.
  topology::BindMode bind = topology::BindMode::kNone;
  bool bindVerbose = false;
  std::vector<std::string> command;  // PROG and its arguments

  int worldSize() const { return nodes * localRanks; }
  // torchrun's default: no prefix; --tag-output asks for "[<rank>] ".
  bool shouldTagOutput() const { return tagOutput.value_or(false); }
  // --no-tag-output passes bytes through as they come; by default lines are
  // kept whole when several local ranks reach the terminal (a line is never
  // cut by another's), and a single rank's bytes pass through unchanged.
  bool keepLinesWhole() const;
  bool showsOnTerminal(int localRank) const;
  // The streams of `localRank` written to files / also shown on the terminal.
  unsigned redirectsOf(int localRank) const;
  unsigned teeOf(int localRank) const;
  // The command actually executed: PROG, or the interpreter running it.
  std::vector<std::string> execCommand() const;
  // --redirects or --tee asks for files (under --log-dir) for some rank.
  bool wantsLogFiles() const;
};

// The interpreter for .py programs and -m: $PYTHON_EXEC when set (torchrun's
// variable), else python3 looked up in PATH (so an activated virtual
// environment's python3 is the one used).
inline constexpr const char* kPythonExecVariable = "PYTHON_EXEC";
inline constexpr const char* kPythonInterpreter = "python3";
std::string pythonInterpreter();

// --nproc-per-node auto | gpu | cpu, as torchrun's: "gpu" is the NVIDIA GPUs
// this process may use (/proc/driver/nvidia/gpus, narrowed by
// CUDA_VISIBLE_DEVICES); "cpu" the CPUs of its affinity mask
// (sched_getaffinity; torchrun counts every CPU of the host); "auto" the GPUs
// when there are any, else the CPUs.
int visibleGpus();
int availableCpus();
int autoLocalRanks();

// Parses argv (argv[0] is loomrun itself). A failed Result carries a message
// that names the offending option; callers print it and exit kExitUsage.
// `--help` yields showHelp = true, `--version` showVersion, `--help-env`
// envHelp, without checking the other options.
Result<LaunchOptions> parseOptions(int argc, const char* const* argv);

// The text printed by `loomrun --help`.
std::string usageText();

}  // namespace loom::launcher
