// Command-line options of the perf tools, spelled as nccl-tests spells them
// (see perf/README.md for the table).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <loom/loom.h>

namespace loom::perf {

// -a: how the per-rank times of one measurement become the printed time.
enum class TimeCombine { kRank0 = 0, kAverage = 1, kMin = 2, kMax = 3 };

struct PerfOptions {
  int threads = 1;                      // -t: threads of this process
  int gpus = 1;                         // -g: ranks (GPUs) per thread; device buffers only
  size_t minBytes = 32u << 20;          // -b
  size_t maxBytes = 32u << 20;          // -e
  size_t stepBytes = 1u << 20;          // -i: additive step, used when stepFactor == 1
  long stepFactor = 1;                  // -f: multiplicative step
  int iters = 20;                       // -n: timed iterations
  int warmupIters = 5;                  // -w: untimed iterations before each measurement
  int aggIters = 1;                     // -m: operations per iteration, grouped
  // -c: checked calls per size and placement, each on fresh inputs after the
  // timed ones (nccl-tests' check iteration count); 0: no check (#wrong N/A).
  int check = 1;
  std::vector<loomRedOp_t> ops{loomSum};        // -o
  std::vector<loomDataType_t> types{loomFloat32};  // -d
  int root = 0;                         // -r
  // -z: blocking collectives (NULL stream); 1 and 2 (nccl-tests' "no barrier"
  // form, which is what Loom does for both) are the same here.
  bool blocking = false;
  TimeCombine combine = TimeCombine::kAverage;  // -a
  double timeoutSeconds = 0;            // -T: exported as LOOM_TIMEOUT when > 0
  std::string jsonPath;                 // -J: nccl-tests' JSON (nccl_json.h)
  std::string loomJsonPath;             // --loom-json: Loom's own JSON (report.h)
  bool memoryReport = false;            // -M: nccl-tests' memory-usage line after the footer
  // --mem-bound: measure the stream bandwidth and print each size's share of
  // the memory-traffic bound (memory_bound.h) in two added columns. 0: off,
  // 1: on (all-reduce on host buffers only; elsewhere a note says why not).
  int memoryBound = 0;
  // --algo-column: add the column naming the algorithm that ran. Off by
  // default so that the table is nccl-tests' own, byte for byte.
  bool algoColumn = false;
  // --algos: compare these algorithms in one run (algo_compare.h) instead of
  // the nccl-tests table; "auto" is Loom's own choice. Empty: the normal sweep.
  std::vector<std::string> algos;
  int algoReps = 5;                     // --reps: interleaved rounds per size (--algos)
  // -G: capture the -n timed iterations as a CUDA graph and launch it this
  // many times (nccl-tests' cudaGraphLaunches); 0: launch the calls directly.
  int graphLaunches = 0;
  // --host-mem: host buffers even where a CUDA device could hold them.
  bool hostMemory = false;
  // --memcpy-baseline: time a device-to-device cudaMemcpyAsync of each size
  // in the same run and print the collective's bandwidth as a share of it.
  bool memcpyBaseline = false;
  // argv as given (nccl-tests' JSON records it).
  std::vector<std::string> commandLine;
};

enum class ParseOutcome { kRun, kHelp, kError };

// Parses argv into *options. Errors print one line naming the flag and value
// (and a pointer to -h) to stderr and return kError; callers exit with 2.
// -h prints the usage, --version "<tool> (Loom) X.Y.Z", to stdout; both return
// kHelp (the caller exits 0). With quiet set nothing is
// printed (for the ranks of a job other than the first).
ParseOutcome parseOptions(int argc, char** argv, PerfOptions* options, bool quiet = false);

// "8", "64K", "32M", "1G" (powers of 1024, either case); nullopt-like false on garbage.
bool parseSize(const char* text, size_t* bytes);

// "ring,tree/ll,auto" -> {"ring", "tree/ll", "auto"}: names Loom's LOOM_ALGO
// knows (kAlgoNames) or "auto", each optionally followed by "/simple" or
// "/ll" (the protocol forced too, LOOM_PROTO), each at most once,
// case-insensitive (stored lower case). False, with the reason in *why, on an
// empty list, an empty item, an unknown name or protocol, or a repeated item.
bool parseAlgoList(const char* text, std::vector<std::string>* algos, std::string* why);
inline constexpr const char* kAlgoNames[] = {"ring", "tree", "hd", "rd", "oneshot", "window", "direct", "chain", "deterministic", "auto"};

// The sizes of the sweep: minBytes, then * stepFactor or + stepBytes, up to maxBytes.
std::vector<size_t> sweepSizes(const PerfOptions& options);

}  // namespace loom::perf
