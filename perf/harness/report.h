// nccl-tests' output format (header, device lines, one row per size, footer)
// and the same results as JSON. Only the printing rank calls these.
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
  double streamBw = 0;  // GB/s; 0: not measured (-M 0 or no traffic defined)
  int64_t outOfBounds = 0;
  int64_t wrong = 0;
  double avgBusBw = 0;
};

void printHeader(FILE* out, const PerfOptions& options);
// One line per rank, ending with its RankInfo::where.
void printDevices(FILE* out, const std::vector<RankInfo>& ranks);
// The stream bandwidth and the bound's formula, as "#" lines.
void printMemoryBound(FILE* out, const StreamBandwidth& stream, double trafficFactor, int nranks);
// Which of the columns added after nccl-tests' a table has.
struct ExtraColumns {
  bool memoryBound = false;  // -M: %mem out of place and in place
  bool copy = false;         // --memcpy-baseline: copy time, copy bandwidth, %copy
};

// nccl-tests' columns, then (memoryBound) the out-of-place and in-place
// shares of the memory-traffic bound in percent, then (copy) the time and
// bandwidth of a device-to-device copy of the size and the out-of-place
// algbw in percent of that bandwidth, then the algorithm that ran (out of
// place; "oop|ip" when in place ran another). The added columns come last so
// that parsers of nccl-tests' columns keep working.
void printTableHeader(FILE* out, ExtraColumns extra = {});
void printRow(FILE* out, const ResultRow& row, ExtraColumns extra = {});
// The %copy column: out-of-place algbw / copy bandwidth; < 0 when not measured.
double copyShare(const ResultRow& row);
// What the algorithm column shows for one row.
std::string algorithmColumn(const ResultRow& row);
void printFooter(FILE* out, const RunSummary& summary);

// Writes options, rows and summary to `path`; false (with a message on
// stderr) when the file cannot be written.
bool writeJson(const std::string& path, const PerfOptions& options, const std::vector<ResultRow>& rows,
               const RunSummary& summary);

}  // namespace loom::perf
