// Command-line options of loomrun, the launcher that starts one process per
// local rank (like torchrun / mpirun for a single node, or one node of many).
//
//   loomrun -n N [--nnodes K --node-rank R --master-addr A --master-port P]
//           [--tag-output|--no-tag-output] [--kill-timeout S] [--max-restarts N]
//           [--bind none|core|numa] [--bind-verbose]
//   loomrun --help | --version | --help-env[=text|markdown]
//           [--] PROG ARGS...
//
// Parsing stops at PROG: everything after it belongs to the program, so
// `loomrun -n 2 prog -n 5` passes `-n 5` to prog.
#pragma once

#include <optional>
#include <string>
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

// --help-env prints the environment table as aligned text or as Markdown.
enum class EnvHelpFormat { kNone, kText, kMarkdown };

struct LaunchOptions {
  bool showHelp = false;
  bool showVersion = false;  // --version
  EnvHelpFormat envHelp = EnvHelpFormat::kNone;
  int localRanks = 0;  // -n / --nproc-per-node; required
  int nodes = 1;       // --nnodes
  int nodeRank = 0;    // --node-rank, in [0, nodes)
  std::string masterAddr = "127.0.0.1";
  std::optional<int> masterPort;  // unset: pick a free port (single node only)
  // Unset: tag when the job has more than one rank in total.
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
  bool shouldTagOutput() const { return tagOutput.value_or(worldSize() > 1); }
};

// Parses argv (argv[0] is loomrun itself). A failed Result carries a message
// that names the offending option; callers print it and exit kExitUsage.
// `--help` yields showHelp = true, `--version` showVersion, `--help-env`
// envHelp, without checking the other options.
Result<LaunchOptions> parseOptions(int argc, const char* const* argv);

// The text printed by `loomrun --help`.
std::string usageText();

}  // namespace loom::launcher
