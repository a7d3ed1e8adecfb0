#include "perf/harness/perf_options.h"

#include <getopt.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>

#include "perf/harness/datatypes.h"

namespace loom::perf {
namespace {

constexpr const char* kUsage =
    "usage: %s [options]\n"
    "  -t,--nthreads <n>       threads of this process (default 1); total ranks =\n"
    "                          WORLD_SIZE (from loomrun/torchrun, else 1) x n x -g\n"
    "  -g,--ngpus <n>          ranks per thread, one GPU each, devices taken round-robin (several\n"
    "                          ranks may share one GPU); device buffers only (default 1)\n"
    "  -b,--minbytes <size>    smallest size, K/M/G suffixes (default 32M)\n"
    "  -e,--maxbytes <size>    largest size (default 32M)\n"
    "  -i,--stepbytes <size>   additive step when -f is 1 (default 1M)\n"
    "  -f,--stepfactor <n>     multiplicative step (default 1: use -i)\n"
    "  -n,--iters <n>          timed iterations (default 20)\n"
    "  -w,--warmup_iters <n>   warm-up iterations before each measurement (default 5)\n"
    "  -m,--agg_iters <n>      operations aggregated per iteration in a group (default 1)\n"
    "  -c,--check <n>          check n calls per size and placement, each on fresh inputs\n"
    "                          (default 1; 0: no check, #wrong shows N/A)\n"
    "  -o,--op <op>            sum|prod|min|max|avg|all (default sum)\n"
    "  -d,--datatype <type>    int8|uint8|int32|uint32|int64|uint64|half|float|double|bfloat16|all\n"
    "                          (default float)\n"
    "  -r,--root <rank>        root of broadcast and reduce (default 0)\n"
    "  -z,--blocking <0|1|2>   blocking collectives: host buffers: NULL stream, each call returns when\n"
    "                          done; device buffers: a stream synchronize after each call; no barrier,\n"
    "                          so 1 and 2 are the same (default 0)\n"
    "  -a,--average <0..3>     time reported: 0 rank 0, 1 average, 2 min, 3 max (default 1)\n"
    "  -T,--timeout <seconds>  fail any wait longer than this (sets LOOM_TIMEOUT)\n"
    "  -J,--output_file <file> also write the results as nccl-tests' JSON (a free name: file.0,\n"
    "                          file.1, ... when file exists)\n"
    "  -M,--memory <0|1>       print the memory-usage line after the footer (default 0)\n"
    "  --loom-json <file>      also write the results as Loom's own JSON (algorithm, bound share)\n"
    "  --mem-bound <0|1>       measure the host's stream bandwidth and print each size's share of\n"
    "                          the memory-traffic bound in two added columns (all-reduce, host\n"
    "                          buffers; default 0)\n"
    "  --algo-column           add a last column naming the algorithm that ran (as Loom reports it)\n"
    "  --algos <list>          compare algorithms in one run instead of the table above: one\n"
    "                          communicator per name (LOOM_ALGO set to it; auto: unset), measured\n"
    "                          interleaved at each size (names: ring,tree,hd,rd,oneshot,window,\n"
    "                          direct,chain,deterministic,auto; /simple or /ll forces the protocol\n"
    "                          too, as LOOM_PROTO; e.g. --algos ring,tree,hd,rd,oneshot,auto or\n"
    "                          ring/ll,auto)\n"
    "  --reps <n>              --algos: rounds per size, each timing -n iterations of every\n"
    "                          communicator in a rotated order; the median counts (default 5)\n"
    "  -G,--cudagraph <n>      capture the -n timed iterations as a CUDA graph and launch it n times\n"
    "                          (device buffers; default 0: no graph)\n"
    "  --host-mem              host buffers even when a CUDA device is usable (the default without one)\n"
    "  --memcpy-baseline       device buffers: also time a device-to-device cudaMemcpyAsync of each\n"
    "                          size (rank 0's GPU, alone) and print the out-of-place algbw as a share\n"
    "                          of that copy's bandwidth\n"
    "  -N -p -y -C -S -R -D -u -I -K  nccl-tests' flags for what Loom's tools do not have:\n"
    "                          accepted with the value that leaves it off (-N 1, the others 0)\n"
    "  -h,--help               this text\n"
    "  --version               print the tool's version\n";

bool parseLong(const char* text, long low, long high, long* value) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < low || v > high) return false;
  *value = v;
  return true;
}

bool parseInt(const char* text, int low, int high, int* value) {
  long v = 0;
  if (!parseLong(text, low, high, &v)) return false;
  *value = static_cast<int>(v);
  return true;
}

bool parseOps(std::string_view text, std::vector<loomRedOp_t>* ops) {
  if (text == "all") {
    *ops = {loomSum, loomProd, loomMax, loomMin, loomAvg};
    return true;
  }
  const auto op = parseOpName(text);
  if (!op) return false;
  *ops = {*op};
  return true;
}

bool parseTypes(std::string_view text, std::vector<loomDataType_t>* types) {
  if (text == "all") {
    types->clear();
    for (int t = 0; t < loomNumTypes; ++t) types->push_back(static_cast<loomDataType_t>(t));
    return true;
  }
  const auto type = parseTypeName(text);
  if (!type) return false;
  *types = {*type};
  return true;
}

// Long-only flags: getopt_long returns these codes (beyond any char).
constexpr int kAlgosFlag = 256;
constexpr int kRepsFlag = 257;
constexpr int kHostMemFlag = 258;
constexpr int kMemcpyBaselineFlag = 259;
constexpr int kVersionFlag = 260;
constexpr int kMemBoundFlag = 261;
constexpr int kLoomJsonFlag = 262;
constexpr int kAlgoColumnFlag = 263;

// nccl-tests' flags for features Loom's tools do not have: accepted with the
// value that leaves the feature off (so that scripts passing it run), refused
// with any other.
struct UnsupportedFlag {
  char letter;
  const char* name;
  const char* offValue;
};
constexpr UnsupportedFlag kUnsupported[] = {
    {'N', "run_cycles", "1"},   {'p', "parallel_init", "0"},       {'y', "stream_null", "0"},
    {'C', "report_cputime", "0"}, {'S', "report_timestamps", "0"}, {'R', "local_register", "0"},
    {'D', "device_implementation", "0"}, {'u', "unalign", "0"},    {'I', "per_iter_timing", "0"},
    {'K', "per_iter_skip", "0"}};

const UnsupportedFlag* unsupportedFlag(int flag) {
  for (const UnsupportedFlag& u : kUnsupported)
    if (u.letter == flag) return &u;
  return nullptr;
}

// Applies one flag; false when its value is invalid.
bool applyFlag(int flag, const char* value, PerfOptions* o) {
  constexpr int kMaxInt = std::numeric_limits<int>::max();
  int v = 0;
  switch (flag) {
    case 't': return parseInt(value, 1, 1024, &o->threads);
    case 'g': return parseInt(value, 1, 1024, &o->gpus);
    case 'G': return parseInt(value, 0, 1 << 20, &o->graphLaunches);
    case 'b': return parseSize(value, &o->minBytes);
    case 'e': return parseSize(value, &o->maxBytes);
    case 'i': return parseSize(value, &o->stepBytes);
    case 'f': return parseLong(value, 1, 1L << 30, &o->stepFactor);
    case 'n': return parseInt(value, 1, kMaxInt, &o->iters);
    case 'w': return parseInt(value, 0, kMaxInt, &o->warmupIters);
    case 'm': return parseInt(value, 1, 1 << 20, &o->aggIters);
    case 'c': return parseInt(value, 0, 1 << 20, &o->check);
    case 'o': return parseOps(value, &o->ops);
    case 'd': return parseTypes(value, &o->types);
    case 'r': return parseInt(value, 0, kMaxInt, &o->root);
    case 'z': if (!parseInt(value, 0, 2, &v)) return false; o->blocking = v != 0; return true;
    case 'a': if (!parseInt(value, 0, 3, &v)) return false; o->combine = static_cast<TimeCombine>(v); return true;
    case 'T': {
      char* end = nullptr;
      o->timeoutSeconds = std::strtod(value, &end);
      return end != value && *end == '\0' && o->timeoutSeconds > 0;
    }
    case 'J': o->jsonPath = value; return !o->jsonPath.empty();
    case 'M': if (!parseInt(value, 0, 1, &v)) return false; o->memoryReport = v; return true;
    case kMemBoundFlag: return parseInt(value, 0, 1, &o->memoryBound);
    case kLoomJsonFlag: o->loomJsonPath = value; return !o->loomJsonPath.empty();
    case kRepsFlag: return parseInt(value, 1, 1 << 20, &o->algoReps);
    default: return false;
  }
}

// Why the flags contradict each other, or "" when they do not.
std::string inconsistency(const PerfOptions& o) {
  char text[160] = "";
  if (o.maxBytes < o.minBytes)
    std::snprintf(text, sizeof text, "-e (maxbytes %zu) is smaller than -b (minbytes %zu)", o.maxBytes, o.minBytes);
  else if (o.minBytes < o.maxBytes && o.stepFactor == 1 && o.stepBytes == 0)
    std::snprintf(text, sizeof text, "-i 0 with -f 1 would never reach -e; give a step");
  else if (o.minBytes == 0 && o.stepFactor > 1 && o.maxBytes > 0)
    std::snprintf(text, sizeof text, "-b 0 with -f %ld would never grow; start at -b 1 or more", o.stepFactor);
  else if (o.hostMemory && (o.gpus > 1 || o.graphLaunches > 0 || o.memcpyBaseline))
    std::snprintf(text, sizeof text, "--host-mem with %s: that needs device buffers",
                  o.gpus > 1 ? "-g > 1" : o.graphLaunches > 0 ? "-G" : "--memcpy-baseline");
  else if (!o.algos.empty() && (o.gpus > 1 || o.graphLaunches > 0 || o.memcpyBaseline))
    std::snprintf(text, sizeof text, "--algos with %s: --algos compares on host buffers, one rank per thread",
                  o.gpus > 1 ? "-g > 1" : o.graphLaunches > 0 ? "-G" : "--memcpy-baseline");
  return text;
}

}  // namespace

bool parseSize(const char* text, size_t* bytes) {
  errno = 0;
  char* end = nullptr;
  if (*text == '-' || *text == '\0') return false;
  const unsigned long long base = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text) return false;
  unsigned long long scale = 1;
  switch (*end) {
    case '\0': break;
    case 'K': case 'k': scale = 1ull << 10; ++end; break;
    case 'M': case 'm': scale = 1ull << 20; ++end; break;
    case 'G': case 'g': scale = 1ull << 30; ++end; break;
    default: return false;
  }
  if (*end != '\0' || base > std::numeric_limits<size_t>::max() / scale) return false;
  *bytes = static_cast<size_t>(base * scale);
  return true;
}

ParseOutcome parseOptions(int argc, char** argv, PerfOptions* options, bool quiet) {
  static const option kLong[] = {
      {"nthreads", required_argument, nullptr, 't'},  {"ngpus", required_argument, nullptr, 'g'},
      {"minbytes", required_argument, nullptr, 'b'},  {"maxbytes", required_argument, nullptr, 'e'},
      {"stepbytes", required_argument, nullptr, 'i'}, {"stepfactor", required_argument, nullptr, 'f'},
      {"iters", required_argument, nullptr, 'n'},     {"warmup_iters", required_argument, nullptr, 'w'},
      {"agg_iters", required_argument, nullptr, 'm'}, {"check", required_argument, nullptr, 'c'},
      {"op", required_argument, nullptr, 'o'},        {"datatype", required_argument, nullptr, 'd'},
      {"root", required_argument, nullptr, 'r'},      {"blocking", required_argument, nullptr, 'z'},
      {"average", required_argument, nullptr, 'a'},   {"timeout", required_argument, nullptr, 'T'},
      {"output_file", required_argument, nullptr, 'J'}, {"memory", required_argument, nullptr, 'M'},
      {"mem-bound", required_argument, nullptr, kMemBoundFlag},
      {"loom-json", required_argument, nullptr, kLoomJsonFlag},
      {"algo-column", no_argument, nullptr, kAlgoColumnFlag},
      {"algos", required_argument, nullptr, kAlgosFlag}, {"reps", required_argument, nullptr, kRepsFlag},
      {"cudagraph", required_argument, nullptr, 'G'}, {"host-mem", no_argument, nullptr, kHostMemFlag},
      {"memcpy-baseline", no_argument, nullptr, kMemcpyBaselineFlag},
      {"run_cycles", required_argument, nullptr, 'N'}, {"parallel_init", required_argument, nullptr, 'p'},
      {"stream_null", required_argument, nullptr, 'y'}, {"report_cputime", required_argument, nullptr, 'C'},
      {"report_timestamps", required_argument, nullptr, 'S'}, {"local_register", required_argument, nullptr, 'R'},
      {"device_implementation", required_argument, nullptr, 'D'}, {"unalign", required_argument, nullptr, 'u'},
      {"per_iter_timing", required_argument, nullptr, 'I'}, {"per_iter_skip", required_argument, nullptr, 'K'},
      {"help", no_argument, nullptr, 'h'},
      {"version", no_argument, nullptr, kVersionFlag},
      {nullptr, 0, nullptr, 0}};
  const char* tool = argc > 0 ? argv[0] : "perf";
  options->commandLine.assign(argv, argv + argc);
  auto reject = [&](const std::string& why) {
    if (!quiet) std::fprintf(stderr, "%s: %s (see -h)\n", tool, why.c_str());
    return ParseOutcome::kError;
  };
  opterr = 0;  // getopt's own messages would not name the value
  optind = 1;
  int flag = 0;
  constexpr const char* kShort = ":t:g:b:e:i:f:n:w:m:c:o:d:r:z:a:T:J:M:G:N:p:y:C:S:R:D:u:I:K:h";
  while ((flag = getopt_long(argc, argv, kShort, kLong, nullptr)) != -1) {
    if (flag == 'h') {
      if (!quiet) std::printf(kUsage, tool);
      return ParseOutcome::kHelp;
    }
    if (flag == kVersionFlag) {
      const char* slash = std::strrchr(tool, '/');
      if (!quiet) std::printf("%s (Loom) %s\n", slash ? slash + 1 : tool, LOOM_TOOL_VERSION);
      return ParseOutcome::kHelp;
    }
    if (flag == '?' || flag == ':') {
      const std::string what = flag == '?' ? "unknown option " : "missing value for option ";
      const bool shortFlag = optopt > 0 && optopt < 256;  // long-only flags report their code, not a char
      return reject(what + (shortFlag ? std::string("-") + static_cast<char>(optopt) : std::string(argv[optind - 1])));
    }
    if (const UnsupportedFlag* u = unsupportedFlag(flag)) {
      if (std::strcmp(optarg, u->offValue) == 0) continue;
      return reject(std::string("-") + u->letter + " " + optarg + ": nccl-tests' --" + u->name +
                    " is not available in Loom's perf tools (only -" + u->letter + " " + u->offValue + ", off)");
    }
    if (flag == kAlgosFlag) {
      std::string why;
      if (!parseAlgoList(optarg, &options->algos, &why)) return reject("--algos '" + std::string(optarg) + "': " + why);
      continue;
    }
    if (flag == kHostMemFlag || flag == kMemcpyBaselineFlag || flag == kAlgoColumnFlag) {
      (flag == kHostMemFlag ? options->hostMemory
       : flag == kMemcpyBaselineFlag ? options->memcpyBaseline : options->algoColumn) = true;
      continue;
    }
    if (!applyFlag(flag, optarg, options))
      return reject(std::string("invalid value '") + optarg + "' for " +
                    (flag == kRepsFlag ? std::string("--reps")
                     : flag == kMemBoundFlag ? std::string("--mem-bound")
                     : flag == kLoomJsonFlag ? std::string("--loom-json")
                     : std::string("-") + static_cast<char>(flag)));
  }
  if (optind < argc) return reject(std::string("unexpected argument '") + argv[optind] + "'");
  const std::string why = inconsistency(*options);
  return why.empty() ? ParseOutcome::kRun : reject(why);
}

bool parseAlgoList(const char* text, std::vector<std::string>* algos, std::string* why) {
  std::vector<std::string> names;
  std::string_view rest(text);
  while (true) {
    const size_t comma = rest.find(',');
    std::string name(rest.substr(0, comma));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name.empty()) {
      *why = "empty name (give a comma list such as ring,tree,auto)";
      return false;
    }
    const size_t slash = name.find('/');
    const std::string algo = name.substr(0, slash);
    bool known = false;
    for (const char* k : kAlgoNames) known = known || algo == k;
    if (!known) {
      std::string list;
      for (const char* k : kAlgoNames) list += std::string(list.empty() ? "" : ", ") + k;
      *why = "unknown algorithm '" + algo + "' (known: " + list + ")";
      return false;
    }
    if (slash != std::string::npos) {
      const std::string proto = name.substr(slash + 1);
      if (algo == "auto" || (proto != "simple" && proto != "ll")) {
        *why = "'" + name + "': a protocol goes after a forced algorithm, as ring/simple or ring/ll";
        return false;
      }
    }
    for (const std::string& seen : names)
      if (seen == name) {
        *why = "'" + name + "' is listed twice";
        return false;
      }
    names.push_back(std::move(name));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  *algos = std::move(names);
  return true;
}

std::vector<size_t> sweepSizes(const PerfOptions& o) {
  std::vector<size_t> sizes;
  for (size_t size = o.minBytes; size <= o.maxBytes;) {
    sizes.push_back(size);
    const size_t next = o.stepFactor > 1 ? size * static_cast<size_t>(o.stepFactor) : size + o.stepBytes;
    if (next <= size) break;  // overflow, or a zero step at minBytes == maxBytes
    size = next;
  }
  return sizes;
}

}  // namespace loom::perf
