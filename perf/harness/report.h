// nccl-tests' output format (header, device lines, one row per size, footer,
// byte for byte) and Loom's own JSON. Only the printing rank calls these.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "perf/harness/collective.h"
#include "perf/harness/memory_bound.h"
#include "perf/harness/perf_options.h"

namespace loom::perf {

struct PlacementResult {
  double timeUs = 0;
  double algBw = 0;  // GB/s, 1e9 bytes
  double busBw = 0;
  int64_t wrong = -1;  // -1: not checked (prints N/A)
  double memShare = -1;  // share of the memory-traffic bound; < 0: not reported ("-")
  std::string algorithm = "-";  // what the library says ran the timed calls
};

// --memcpy-baseline: a device-to-device copy of the row's size, timed alone.
struct CopyBaseline {
  double timeUs = -1;  // < 0: not measured
  double bw = 0;       // GB/s: bytes copied / time
};

struct ResultRow {
  size_t bytes = 0;
  size_t count = 0;
  loomDataType_t type = loomFloat32;
  const char* redop = "none";
  int root = -1;
  PlacementResult outOfPlace;
  PlacementResult inPlace;
  CopyBaseline copy;
};

struct RunSummary {
  std::string toolName;
  std::string library;  // "loom" or "openmpi"
  int nranks = 0;
  double streamBw = 0;  // GB/s; 0: not measured (--mem-bound 0 or no traffic defined)
  int64_t outOfBounds = 0;
  int64_t wrong = 0;
  double avgBusBw = 0;
  // NCCL_TESTS_MIN_BW, as nccl-tests reads it: the footer says OK or FAILED
  // (below 90% of it); < 0: not set, the footer says neither.
  double minBusBw = -1;
};

// The release of nccl-tests whose flags and output format the tools follow;
// printed where nccl-tests prints its own version, so that scripts that key
// on it see the format they get.
inline constexpr const char* kNcclTestsFormatVersion = "2.19.6";

// What the first header line names besides the format: the version code of
// the library's headers the tool was built with, and of the library it runs
// on (nccl-tests prints NCCL's two there).
struct HeaderVersions {
  int headers = 0;
  int library = 0;
};

// nccl-tests' header: version, "Collective test starting", the parameters,
// the blocking line (-z), and "#".
void printHeader(FILE* out, const PerfOptions& options, const char* toolName, HeaderVersions versions);
// "# Using devices" and one line per rank, ending with its RankInfo::where.
void printDevices(FILE* out, const std::vector<RankInfo>& ranks);
// The stream bandwidth and the bound's formula, as "#" lines.
void printMemoryBound(FILE* out, const StreamBandwidth& stream, double trafficFactor, int nranks);
// Which of the columns added after nccl-tests' a table has (none by default).
struct ExtraColumns {
  bool memoryBound = false;  // --mem-bound: %mem out of place and in place
  bool copy = false;         // --memcpy-baseline: copy time, copy bandwidth, %copy
  bool algorithm = false;    // --algo-column: what ran
  bool any() const { return memoryBound || copy || algorithm; }
};

// "#" and nccl-tests' three title lines; then, when asked for, the out-of-place
// and in-place shares of the memory-traffic bound in percent, the time and
// bandwidth of a device-to-device copy of the size with the out-of-place
// algbw in percent of that bandwidth, and the algorithm that ran (out of
// place; "oop|ip" when in place ran another). The added columns come last so
// that parsers of nccl-tests' columns keep working.
void printTableHeader(FILE* out, ExtraColumns extra = {});
void printRow(FILE* out, const ResultRow& row, ExtraColumns extra = {});
// nccl-tests' number in a column of `width`: two decimals, or fewer, or an
// exponent, whichever first fits.
std::string fitNumber(double value, int width);
// The %copy column: out-of-place algbw / copy bandwidth; < 0 when not measured.
double copyShare(const ResultRow& row);
// What the algorithm column shows for one row.
std::string algorithmColumn(const ResultRow& row);
// Out-of-bounds and average bus bandwidth lines, "#", "Collective test concluded".
void printFooter(FILE* out, const RunSummary& summary);
// -M: nccl-tests' memory-usage line (bytes; see memory_usage.h).
void printMemoryUsage(FILE* out, int64_t initialization, int64_t userAllocated, int64_t collective);
// The last lines of a run: "#" and an empty line.
void printEnd(FILE* out);

// --loom-json: Loom's own JSON (options, rows with the algorithm and bound
// share, summary) to `path`; false (with a message on stderr) when the file
// cannot be written.
bool writeJson(const std::string& path, const PerfOptions& options, const std::vector<ResultRow>& rows,
               const RunSummary& summary);

}  // namespace loom::perf
