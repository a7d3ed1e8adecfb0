#include "tools/loomrun/loomrun_options.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
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
  if (value == "auto" || value == "cpu") {
    opts.localRanks = std::min(value == "auto" ? autoLocalRanks() : availableCpus(), kMaxLocalRanks);
    return Status::ok();
  }
  if (value == "gpu") {
    const int gpus = visibleGpus();
    LOOM_ENFORCE(gpus > 0, Code::kInvalidArgument,
                 "option '%.*s' gpu: no NVIDIA GPU is visible (/proc/driver/nvidia/gpus, "
                 "CUDA_VISIBLE_DEVICES)", static_cast<int>(name.size()), name.data());
    opts.localRanks = std::min(gpus, kMaxLocalRanks);
    return Status::ok();
  }
  Result<long> n = parseInteger(name, value, 1, kMaxLocalRanks);
  if (!n.isOk()) return n.status();
  opts.localRanks = static_cast<int>(n.value());
  return Status::ok();
}

// K (a fixed number of nodes) or MIN:MAX (elastic membership).
Status applyNodes(LaunchOptions& opts, std::string_view name, std::string_view value) {
  size_t colon = value.find(':');
  if (colon == std::string_view::npos) {
    Result<long> n = parseInteger(name, value, 1, kMaxNodes);
    if (!n.isOk()) return n.status();
    opts.nodes = static_cast<int>(n.value());
    opts.minNodes = opts.nodes;
    opts.elastic = false;
    return Status::ok();
  }
  Result<long> lo = parseInteger(name, value.substr(0, colon), 1, kMaxNodes);
  if (!lo.isOk()) return lo.status();
  Result<long> hi = parseInteger(name, value.substr(colon + 1), 1, kMaxNodes);
  if (!hi.isOk()) return hi.status();
  LOOM_ENFORCE(lo.value() <= hi.value(), Code::kInvalidArgument,
               "option '%.*s' MIN:MAX needs MIN <= MAX, got %ld:%ld", static_cast<int>(name.size()),
               name.data(), lo.value(), hi.value());
  opts.minNodes = static_cast<int>(lo.value());
  opts.nodes = static_cast<int>(hi.value());
  opts.elastic = true;
  return Status::ok();
}

Result<double> parseSeconds(std::string_view name, std::string_view value, double lo, double hi) {
  std::string text(value);
  char* end = nullptr;
  double seconds = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  bool valid = !text.empty() && end == text.c_str() + text.size() && std::isfinite(seconds);
  LOOM_ENFORCE(valid && seconds >= lo && seconds <= hi, Code::kInvalidArgument,
               "option '%.*s' expects seconds in [%g, %g], got '%s'", static_cast<int>(name.size()),
               name.data(), lo, hi, text.c_str());
  return seconds;
}

Status applyRdzvTimeout(LaunchOptions& opts, std::string_view name, std::string_view value) {
  Result<double> s = parseSeconds(name, value, 0.1, 86400);
  if (!s.isOk()) return s.status();
  opts.joinTimeoutSeconds = s.value();
  return Status::ok();
}

// torchrun's KEY=VALUE,... list; the keys loomrun's rendezvous uses are
// join_timeout and last_call_timeout, others are rejected so typos show.
Status applyRdzvConf(LaunchOptions& opts, std::string_view name, std::string_view value) {
  while (!value.empty()) {
    size_t comma = value.find(',');
    std::string_view item = value.substr(0, comma);
    value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
    size_t eq = item.find('=');
    std::string_view key = item.substr(0, eq);
    std::string_view val = eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    double* target = key == "join_timeout" ? &opts.joinTimeoutSeconds
                     : key == "last_call_timeout" ? &opts.lastCallSeconds : nullptr;
    LOOM_ENFORCE(target != nullptr, Code::kInvalidArgument,
                 "option '%.*s' knows join_timeout and last_call_timeout, got '%.*s'",
                 static_cast<int>(name.size()), name.data(), static_cast<int>(item.size()), item.data());
    Result<double> s = parseSeconds(name, val, key == "join_timeout" ? 0.1 : 0.0, 86400);
    if (!s.isOk()) return s.status();
    *target = s.value();
  }
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

// HOST:PORT, [IPV6]:PORT, or HOST alone (torchrun's port 29400 then); port
// 0 asks for a free port, as torchrun's localhost:0 (single node only).
Status applyRdzvEndpoint(LaunchOptions& opts, std::string_view name, std::string_view value) {
  auto malformed = [&](const char* why) {
    return makeError(Code::kInvalidArgument, "option '%.*s' expects HOST:PORT, got '%.*s' (%s)",
                     static_cast<int>(name.size()), name.data(), static_cast<int>(value.size()),
                     value.data(), why);
  };
  std::string_view host = value;
  std::optional<std::string_view> port;
  if (value.starts_with("[")) {
    size_t close = value.find(']');
    if (close == std::string_view::npos) return malformed("no ']' after an IPv6 address");
    host = value.substr(1, close - 1);
    std::string_view rest = value.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return malformed("expected ':' after ']'");
      port = rest.substr(1);
    }
  } else {
    size_t colon = value.rfind(':');
    if (colon != std::string_view::npos) {
      if (value.find(':') != colon) return malformed("an IPv6 address needs [brackets]");
      host = value.substr(0, colon);
      port = value.substr(colon + 1);
    }
  }
  if (host.empty()) return malformed("empty host");
  int portNumber = kDefaultRendezvousPort;
  if (port) {
    Result<long> parsed = parseInteger(name, *port, 0, 65535);
    if (!parsed.isOk()) return malformed("the port must be 0..65535");
    portNumber = static_cast<int>(parsed.value());
  }
  opts.masterAddr = std::string(host);
  if (portNumber == 0) opts.masterPort.reset();
  else opts.masterPort = portNumber;
  opts.rdzvEndpointGiven = true;
  return Status::ok();
}

Status applyRdzvId(LaunchOptions& opts, std::string_view name, std::string_view value) {
  LOOM_ENFORCE(!value.empty(), Code::kInvalidArgument, "option '%.*s' needs a non-empty id",
               static_cast<int>(name.size()), name.data());
  opts.runId = std::string(value);
  return Status::ok();
}

// loomrun has one rendezvous (rank 0's bootstrap root at MASTER_ADDR:PORT);
// torchrun's two common backend names are accepted so that scripts run.
Status applyRdzvBackend(LaunchOptions&, std::string_view name, std::string_view value) {
  LOOM_ENFORCE(value == "c10d" || value == "static", Code::kInvalidArgument,
               "option '%.*s' supports c10d or static (both mean loomrun's own rendezvous), got '%.*s'",
               static_cast<int>(name.size()), name.data(), static_cast<int>(value.size()), value.data());
  return Status::ok();
}

Status applyStandalone(LaunchOptions& opts, std::string_view, std::string_view) {
  opts.standalone = true;
  return Status::ok();
}

Status applyModule(LaunchOptions& opts, std::string_view, std::string_view) {
  LOOM_ENFORCE(opts.programKind != ProgramKind::kNoPython, Code::kInvalidUsage,
               "options '-m/--module' and '--no-python' exclude each other");
  opts.programKind = ProgramKind::kModule;
  return Status::ok();
}

Status applyNoPython(LaunchOptions& opts, std::string_view, std::string_view) {
  LOOM_ENFORCE(opts.programKind != ProgramKind::kModule, Code::kInvalidUsage,
               "options '-m/--module' and '--no-python' exclude each other");
  opts.programKind = ProgramKind::kNoPython;
  return Status::ok();
}

Status applyLogDir(LaunchOptions& opts, std::string_view name, std::string_view value) {
  LOOM_ENFORCE(!value.empty(), Code::kInvalidArgument, "option '%.*s' needs a directory",
               static_cast<int>(name.size()), name.data());
  opts.logDir = std::string(value);
  return Status::ok();
}

Result<unsigned> parseStreamSet(std::string_view name, std::string_view text) {
  Result<long> v = parseInteger(name, text, 0, 3);
  if (!v.isOk()) {
    return makeError(Code::kInvalidArgument,
                     "option '%.*s' expects 0 (none), 1 (stdout), 2 (stderr), 3 (both) or "
                     "LOCAL_RANK:VALUE,..., got '%.*s'",
                     static_cast<int>(name.size()), name.data(), static_cast<int>(text.size()), text.data());
  }
  return static_cast<unsigned>(v.value());
}

// "3" for every local rank, or torchrun's map "0:3,1:1" (other ranks: 0).
Status parseStreamOption(std::string_view name, std::string_view value, unsigned& all,
                         std::vector<std::pair<int, unsigned>>& byRank) {
  all = kNoStreams;
  byRank.clear();
  if (value.find(':') == std::string_view::npos) {
    Result<unsigned> v = parseStreamSet(name, value);
    if (!v.isOk()) return v.status();
    all = v.value();
    return Status::ok();
  }
  while (true) {
    size_t comma = value.find(',');
    std::string_view item = value.substr(0, comma);
    size_t colon = item.find(':');
    LOOM_ENFORCE(colon != std::string_view::npos, Code::kInvalidArgument,
                 "option '%.*s': '%.*s' is not LOCAL_RANK:VALUE", static_cast<int>(name.size()),
                 name.data(), static_cast<int>(item.size()), item.data());
    Result<long> rank = parseInteger(name, item.substr(0, colon), 0, kMaxLocalRanks - 1);
    if (!rank.isOk()) return rank.status();
    Result<unsigned> v = parseStreamSet(name, item.substr(colon + 1));
    if (!v.isOk()) return v.status();
    byRank.emplace_back(static_cast<int>(rank.value()), v.value());
    if (comma == std::string_view::npos) return Status::ok();
    value.remove_prefix(comma + 1);
  }
}

Status applyRedirects(LaunchOptions& opts, std::string_view name, std::string_view value) {
  return parseStreamOption(name, value, opts.redirectsAll, opts.redirectsByRank);
}

Status applyTee(LaunchOptions& opts, std::string_view name, std::string_view value) {
  return parseStreamOption(name, value, opts.teeAll, opts.teeByRank);
}

// torchrun's form: local ranks separated by commas, e.g. "0" or "0,3".
Status applyLocalRanksFilter(LaunchOptions& opts, std::string_view name, std::string_view value) {
  opts.terminalRanks.clear();
  while (true) {
    size_t comma = value.find(',');
    Result<long> rank = parseInteger(name, value.substr(0, comma), 0, kMaxLocalRanks - 1);
    if (!rank.isOk()) return rank.status();
    opts.terminalRanks.push_back(static_cast<int>(rank.value()));
    if (comma == std::string_view::npos) return Status::ok();
    value.remove_prefix(comma + 1);
  }
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
    {{"--standalone"}, false, applyStandalone},
    {{"--rdzv-endpoint", "--rdzv_endpoint"}, true, applyRdzvEndpoint},
    {{"--rdzv-id", "--rdzv_id"}, true, applyRdzvId},
    {{"--rdzv-backend", "--rdzv_backend"}, true, applyRdzvBackend},
    {{"--rdzv-timeout", "--rdzv_timeout"}, true, applyRdzvTimeout},
    {{"--rdzv-conf", "--rdzv_conf"}, true, applyRdzvConf},
    {{"-m", "--module"}, false, applyModule},
    {{"--no-python", "--no_python"}, false, applyNoPython},
    {{"--log-dir", "--log_dir"}, true, applyLogDir},
    {{"-r", "--redirects"}, true, applyRedirects},
    {{"-t", "--tee"}, true, applyTee},
    {{"--local-ranks-filter", "--local_ranks_filter"}, true, applyLocalRanksFilter},
    {{"--node-rank", "--node_rank"}, true, applyNodeRank},
    {{"--master-addr", "--master_addr"}, true, applyMasterAddr},
    {{"--master-port", "--master_port"}, true, applyMasterPort},
    {{"--kill-timeout"}, true, applyKillTimeout},
    {{"--max-restarts", "--max_restarts"}, true, applyMaxRestarts},
    {{"--bind", "--cpu-bind"}, true, applyBind},
    {{"--bind-verbose"}, false, applyBindVerbose},
    {{"--tag-output", "--prefix-output"}, false, applyTag},
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
  LOOM_ENFORCE(!opts.elastic || (opts.rdzvEndpointGiven && opts.masterPort.has_value()), Code::kInvalidUsage,
               "option '--nnodes MIN:MAX' needs --rdzv-endpoint HOST:PORT (where the agents meet; "
               "the agent that can bind it hosts the rendezvous)");
  LOOM_ENFORCE(!opts.elastic || opts.nodeRank == 0, Code::kInvalidUsage,
               "option '--node-rank' cannot be combined with '--nnodes MIN:MAX': the rendezvous "
               "assigns node ranks");
  LOOM_ENFORCE(opts.nodeRank < opts.nodes, Code::kInvalidArgument,
               "option '--node-rank' value %d out of range [0, %d) for --nnodes %d",
               opts.nodeRank, opts.nodes, opts.nodes);
  LOOM_ENFORCE(!opts.standalone || (opts.nodes == 1 && !opts.rdzvEndpointGiven && !opts.masterPort),
               Code::kInvalidUsage,
               "option '--standalone' is a single-node job on a free local port; it cannot be "
               "combined with --nnodes > 1, --rdzv-endpoint or --master-port");
  LOOM_ENFORCE(opts.nodes == 1 || opts.masterPort.has_value(), Code::kInvalidUsage,
               "option '--master-port' (or --rdzv-endpoint HOST:PORT) is required when --nnodes > 1 "
               "(every node must meet at the same MASTER_ADDR:MASTER_PORT)");
  LOOM_ENFORCE(!opts.wantsLogFiles() || opts.logDir.has_value(), Code::kInvalidUsage,
               "options '--redirects' and '--tee' write files under --log-dir DIR, which is missing");
  return Status::ok();
}

unsigned streamsOf(int localRank, unsigned all, const std::vector<std::pair<int, unsigned>>& byRank) {
  if (byRank.empty()) return all;
  for (const auto& [rank, value] : byRank) {
    if (rank == localRank) return value;
  }
  return kNoStreams;
}

}  // namespace

bool LaunchOptions::keepLinesWhole() const {
  if (tagOutput.has_value()) return *tagOutput;
  int shown = 0;
  for (int local = 0; local < localRanks; ++local) shown += showsOnTerminal(local) ? 1 : 0;
  return shown > 1;
}

bool LaunchOptions::showsOnTerminal(int localRank) const {
  return terminalRanks.empty() ||
         std::find(terminalRanks.begin(), terminalRanks.end(), localRank) != terminalRanks.end();
}

unsigned LaunchOptions::redirectsOf(int localRank) const {
  return streamsOf(localRank, redirectsAll, redirectsByRank);
}

unsigned LaunchOptions::teeOf(int localRank) const { return streamsOf(localRank, teeAll, teeByRank); }

bool LaunchOptions::wantsLogFiles() const {
  return redirectsAll != kNoStreams || teeAll != kNoStreams || !redirectsByRank.empty() ||
         !teeByRank.empty();
}

std::string pythonInterpreter() {
  // torchrun's variable (kPythonExecVariable), not Loom's: read as a literal.
  const char* exec = std::getenv("PYTHON_EXEC");
  return exec != nullptr && *exec != '\0' ? exec : kPythonInterpreter;
}

std::vector<std::string> LaunchOptions::execCommand() const {
  if (command.empty()) return command;
  std::vector<std::string> argv;
  // -u: unbuffered, so a rank's prints reach loomrun (and the terminal) as
  // they happen, as torchrun runs its workers.
  if (programKind == ProgramKind::kModule) {
    argv = {pythonInterpreter(), "-u", "-m"};
  } else if (programKind == ProgramKind::kAuto && command[0].ends_with(".py")) {
    argv = {pythonInterpreter(), "-u"};
  }
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

int visibleGpus() {
  int gpus = 0;
  if (DIR* dir = opendir("/proc/driver/nvidia/gpus")) {
    while (dirent* e = readdir(dir)) gpus += e->d_name[0] == '.' ? 0 : 1;
    closedir(dir);
  }
  // CUDA numbers only the devices CUDA_VISIBLE_DEVICES lists ("" hides all).
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr && gpus > 0) {
    std::string_view list = visible;
    int listed = list.empty() ? 0 : 1 + static_cast<int>(std::count(list.begin(), list.end(), ','));
    gpus = std::min(gpus, listed);
  }
  return gpus;
}

int autoLocalRanks() {
  const int gpus = visibleGpus();
  return gpus > 0 ? gpus : availableCpus();
}

int availableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}

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
PROG ending in .py runs as `python3 -u PROG` (python3 from PATH, or
$PYTHON_EXEC when set).

Options (torchrun's underscore spellings, e.g. --nproc_per_node, work too):
  -n, --nproc-per-node N   ranks to start on this node (1..1024, required);
                           gpu: the GPUs visible (CUDA_VISIBLE_DEVICES
                           counts); cpu: the CPUs of loomrun's affinity
                           mask; auto: gpu when there are GPUs, else cpu
  --standalone             a single-node job on a free local port with a
                           random run id (torchrun's --standalone)
  --nnodes K               nodes in the job (default 1)
  --node-rank R            index of this node, 0..K-1 (default 0)
  --master-addr A          address of the rendezvous root (default 127.0.0.1)
  --master-port P          its port; default: a free port when K == 1,
                           required when K > 1
  --rdzv-endpoint H:P      the same as --master-addr H --master-port P
                           ([ADDR]:P for IPv6; H alone: port 29400;
                           port 0: a free port, single node only)
  --rdzv-id ID             the job's run id (TORCHELASTIC_RUN_ID; default
                           inherited, else "none")
  --rdzv-backend B         c10d or static, accepted for torchrun scripts;
                           loomrun always uses its own rendezvous
  --nnodes MIN:MAX         elastic membership: agents (one loomrun per node,
                           same -n and --rdzv-id) meet at --rdzv-endpoint
                           H:P, which the agent that can bind it hosts; a
                           round starts with MAX nodes, or with MIN once the
                           last call passed; a node that leaves or joins, or
                           a failed rank, restarts every node's ranks in a
                           new round (the program resumes from its
                           checkpoint); fewer than MIN within the join
                           timeout is an error
  --rdzv-timeout S         join timeout of a round (default 600)
  --rdzv-conf K=V,...      join_timeout=S (as --rdzv-timeout) and
                           last_call_timeout=S (default 30)
  -m, --module             PROG is a Python module: run `python3 -u -m PROG`
  --no-python              run PROG as an executable, even a .py file
  --log-dir DIR            write rank logs under DIR/<run id>_<random>/
                           attempt_<n>/<local rank>/stdout.log, stderr.log
  -r, --redirects V        streams that go to those files only: 0 none
                           (default), 1 stdout, 2 stderr, 3 both; or per
                           local rank, e.g. 0:3,1:1 (other ranks: 0)
  -t, --tee V              streams that go to the files and the terminal
                           (values as --redirects)
  --local-ranks-filter L   only these local ranks' output reaches the
                           terminal, e.g. 0 or 0,3 (files are unaffected)
  --tag-output             prefix every terminal line with "[<rank>] "
                           (also --prefix-output; default: no prefix, as
                           torchrun; lines of several ranks are kept whole,
                           a single rank's bytes pass through unchanged)
  --no-tag-output          pass the ranks' output through byte for byte
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
