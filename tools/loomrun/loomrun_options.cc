#include "tools/loomrun/loomrun_options.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>

namespace loom::launcher {
namespace {

using Apply = Status (*)(LaunchOptions& opts, std::string_view name, std::string_view value);

struct OptionSpec {
  std::string_view names[3];  // spellings; empty entries unused
  bool takesValue;
  Apply apply;
  bool valueOptional = false;  // only as --name=value; a bare --name applies ""
};

Result<long> parseInteger(std::string_view name, std::string_view text, long lo, long hi) {
  long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return makeError(Code::kInvalidArgument, "option '%.*s' expects an integer, got '%.*s'",
                     static_cast<int>(name.size()), name.data(), static_cast<int>(text.size()),
                     text.data());
  }
  if (value < lo || value > hi) {
    return makeError(Code::kInvalidArgument, "option '%.*s' value %ld out of range [%ld, %ld]",
                     static_cast<int>(name.size()), name.data(), value, lo, hi);
  }
  return value;
}

Status applyLocalRanks(LaunchOptions& opts, std::string_view name, std::string_view value) {
  Result<long> n = parseInteger(name, value, 1, kMaxLocalRanks);
  if (!n.isOk()) return n.status();
  opts.localRanks = static_cast<int>(n.value());
  return Status::ok();
}

Status applyNodes(LaunchOptions& opts, std::string_view name, std::string_view value) {
  Result<long> n = parseInteger(name, value, 1, kMaxNodes);
  if (!n.isOk()) return n.status();
  opts.nodes = static_cast<int>(n.value());
  return Status::ok();
}

Status applyNodeRank(LaunchOptions& opts, std::string_view name, std::string_view value) {
  Result<long> n = parseInteger(name, value, 0, kMaxNodes - 1);
  if (!n.isOk()) return n.status();
  opts.nodeRank = static_cast<int>(n.value());
  return Status::ok();
}

Status applyMasterAddr(LaunchOptions& opts, std::string_view name, std::string_view value) {
  LOOM_ENFORCE(!value.empty(), Code::kInvalidArgument, "option '%.*s' needs a non-empty address",
               static_cast<int>(name.size()), name.data());
  opts.masterAddr = std::string(value);
  return Status::ok();
}

Status applyMasterPort(LaunchOptions& opts, std::string_view name, std::string_view value) {
  Result<long> port = parseInteger(name, value, 1, 65535);
  if (!port.isOk()) return port.status();
  opts.masterPort = static_cast<int>(port.value());
  return Status::ok();
}

Status applyKillTimeout(LaunchOptions& opts, std::string_view name, std::string_view value) {
  std::string text(value);
  char* end = nullptr;
  double seconds = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  bool valid = !text.empty() && end == text.c_str() + text.size() && std::isfinite(seconds);
  LOOM_ENFORCE(valid && seconds >= 0 && seconds <= 86400, Code::kInvalidArgument,
               "option '%.*s' expects seconds in [0, 86400], got '%s'",
               static_cast<int>(name.size()), name.data(), text.c_str());
  opts.killTimeoutSeconds = seconds;
  return Status::ok();
}

Status applyMaxRestarts(LaunchOptions& opts, std::string_view name, std::string_view value) {
  Result<long> n = parseInteger(name, value, 0, kMaxRestarts);
  if (!n.isOk()) return n.status();
  opts.maxRestarts = static_cast<int>(n.value());
  return Status::ok();
}

Status applyBind(LaunchOptions& opts, std::string_view name, std::string_view value) {
  std::optional<topology::BindMode> mode = topology::parseBindMode(value);
  LOOM_ENFORCE(mode.has_value(), Code::kInvalidArgument, "option '%.*s' expects none, core or numa, got '%.*s'",
               static_cast<int>(name.size()), name.data(), static_cast<int>(value.size()), value.data());
  opts.bind = *mode;
  return Status::ok();
}

Status applyBindVerbose(LaunchOptions& opts, std::string_view, std::string_view) {
  opts.bindVerbose = true;
  return Status::ok();
}

Status applyTag(LaunchOptions& opts, std::string_view, std::string_view) {
  opts.tagOutput = true;
  return Status::ok();
}

Status applyNoTag(LaunchOptions& opts, std::string_view, std::string_view) {
  opts.tagOutput = false;
  return Status::ok();
}

Status applyHelp(LaunchOptions& opts, std::string_view, std::string_view) {
  opts.showHelp = true;
  return Status::ok();
}

Status applyVersion(LaunchOptions& opts, std::string_view, std::string_view) {
  opts.showVersion = true;
  return Status::ok();
}

Status applyHelpEnv(LaunchOptions& opts, std::string_view name, std::string_view value) {
  if (value.empty() || value == "text") opts.envHelp = EnvHelpFormat::kText;
  else if (value == "markdown") opts.envHelp = EnvHelpFormat::kMarkdown;
  else
    return makeError(Code::kInvalidArgument, "option '%.*s' expects text or markdown, got '%.*s'",
                     static_cast<int>(name.size()), name.data(), static_cast<int>(value.size()), value.data());
  return Status::ok();
}

// Underscore spellings match torchrun's, so existing scripts keep working.
constexpr OptionSpec kOptions[] = {
    {{"-n", "--nproc-per-node", "--nproc_per_node"}, true, applyLocalRanks},
    {{"--nnodes"}, true, applyNodes},
    {{"--node-rank", "--node_rank"}, true, applyNodeRank},
    {{"--master-addr", "--master_addr"}, true, applyMasterAddr},
    {{"--master-port", "--master_port"}, true, applyMasterPort},
    {{"--kill-timeout"}, true, applyKillTimeout},
    {{"--max-restarts", "--max_restarts"}, true, applyMaxRestarts},
    {{"--bind", "--cpu-bind"}, true, applyBind},
    {{"--bind-verbose"}, false, applyBindVerbose},
    {{"--tag-output"}, false, applyTag},
    {{"--no-tag-output"}, false, applyNoTag},
    {{"-h", "--help"}, false, applyHelp},
    {{"--version"}, false, applyVersion},
    {{"--help-env"}, false, applyHelpEnv, true},
};

const OptionSpec* findOption(std::string_view name) {
  for (const OptionSpec& spec : kOptions) {
    for (std::string_view spelling : spec.names) {
      if (!spelling.empty() && spelling == name) return &spec;
    }
  }
  return nullptr;
}

// Splits "--name=value" and "-nVALUE" into name and inline value.
void splitArgument(std::string_view arg, std::string_view& name,
                   std::optional<std::string_view>& inlineValue) {
  name = arg;
  inlineValue.reset();
  if (arg.starts_with("--")) {
    size_t eq = arg.find('=');
    if (eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      inlineValue = arg.substr(eq + 1);
    }
  } else if (arg.size() > 2) {
    name = arg.substr(0, 2);
    inlineValue = arg.substr(2);
  }
}

Status checkComplete(const LaunchOptions& opts) {
  LOOM_ENFORCE(opts.localRanks > 0, Code::kInvalidUsage,
               "missing required option -n/--nproc-per-node (ranks to start on this node)");
  LOOM_ENFORCE(!opts.command.empty(), Code::kInvalidUsage, "missing the program to run");
  LOOM_ENFORCE(opts.nodeRank < opts.nodes, Code::kInvalidArgument,
               "option '--node-rank' value %d out of range [0, %d) for --nnodes %d",
               opts.nodeRank, opts.nodes, opts.nodes);
  LOOM_ENFORCE(opts.nodes == 1 || opts.masterPort.has_value(), Code::kInvalidUsage,
               "option '--master-port' is required when --nnodes > 1 "
               "(every node must meet at the same MASTER_ADDR:MASTER_PORT)");
  return Status::ok();
}

}  // namespace

Result<LaunchOptions> parseOptions(int argc, const char* const* argv) {
  LaunchOptions opts;
  int i = 1;
  for (; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // PROG: the rest is its command line
    std::string_view name;
    std::optional<std::string_view> value;
    splitArgument(arg, name, value);
    const OptionSpec* spec = findOption(name);
    if (spec == nullptr) {
      std::string_view shown = arg.starts_with("--") ? name : arg;
      return makeError(Code::kInvalidUsage, "unknown option '%.*s'",
                       static_cast<int>(shown.size()), shown.data());
    }
    if (spec->takesValue && !value) {
      LOOM_ENFORCE(i + 1 < argc, Code::kInvalidUsage, "option '%.*s' needs a value",
                   static_cast<int>(name.size()), name.data());
      value = argv[++i];
    } else if (!spec->takesValue && value && !spec->valueOptional) {
      return makeError(Code::kInvalidUsage, "option '%.*s' takes no value",
                       static_cast<int>(name.size()), name.data());
    }
    LOOM_TRY(spec->apply(opts, name, value.value_or("")));
    if (opts.showHelp || opts.showVersion || opts.envHelp != EnvHelpFormat::kNone) return opts;
  }
  for (; i < argc; ++i) opts.command.emplace_back(argv[i]);
  LOOM_TRY(checkComplete(opts));
  return opts;
}

std::string usageText() {
  return R"(Usage: loomrun -n N [options] [--] PROG [ARGS...]

Starts N processes of PROG on this node, one per local rank, with the
environment of a torchrun worker (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, LOOM_JOB_SECRET,
TORCHELASTIC_*). If one rank fails, the others are stopped and loomrun exits
with the failing rank's status (128+signal when it was killed by a signal).

Options:
  -n, --nproc-per-node N   ranks to start on this node (1..1024, required)
  --nnodes K               nodes in the job (default 1)
  --node-rank R            index of this node, 0..K-1 (default 0)
  --master-addr A          address of the rendezvous root (default 127.0.0.1)
  --master-port P          its port; default: a free port when K == 1,
                           required when K > 1
  --tag-output             prefix every output line with "[<rank>] "
                           (default when the job has more than one rank)
  --no-tag-output          pass the ranks' output through unchanged
  --kill-timeout S         seconds between SIGTERM and SIGKILL when stopping
                           ranks (default 5)
  --max-restarts N         when a rank fails, stop all ranks and start them
                           all again, up to N times (default 0), with a fresh
                           rendezvous; ranks see the attempt number (0 first)
                           in LOOM_RESTART_COUNT and TORCHELASTIC_RESTART_COUNT.
                           A signal to loomrun stops the job without restart.
  --bind MODE              pin each local rank's CPUs (sched_setaffinity
                           before exec): none (default), core (one core per
                           rank, spread over NUMA nodes and cores; ranks share
                           cores round-robin when there are more ranks than
                           cores) or numa (one NUMA node's CPUs per rank)
  --bind-verbose           print each rank's CPUs (also with LOOM_DEBUG=INFO)
  -h, --help               print this help
  --version                print loomrun's version ("loomrun (Loom) X.Y.Z")
  --help-env[=markdown]    print the environment variables Loom reads, with
                           defaults and meanings (markdown: as a document)

Every node of a multi-node job must run loomrun with the same
LOOM_JOB_SECRET (32 hex digits) in its environment; a single-node job
generates one when it is unset.

Exit status: 0 when all ranks succeed (in the last attempt), the first
failing rank's status otherwise, 2 for bad options, 127 when PROG cannot be
executed (never restarted).
)";
}

}  // namespace loom::launcher
