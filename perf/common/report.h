// nccl-tests' output format (header, device lines, one row per size, footer)
// and the same results as JSON. Only the printing rank calls these.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "collective.h"
#include "options.h"

namespace loom::perf {

struct PlacementResult {
  double timeUs = 0;
  double algBw = 0;  // GB/s, 1e9 bytes
  double busBw = 0;
  int64_t wrong = -1;  // -1: not checked (prints N/A)
};

struct ResultRow {
  size_t bytes = 0;
  size_t count = 0;
  loomDataType_t type = loomFloat32;
  const char* redop = "none";
  int root = -1;
  PlacementResult outOfPlace;
  PlacementResult inPlace;
};

struct RunSummary {
  std::string toolName;
  std::string library;  // "loom" or "openmpi"
  int nranks = 0;
  int64_t outOfBounds = 0;
  int64_t wrong = 0;
  double avgBusBw = 0;
};

void printHeader(FILE* out, const PerfOptions& options);
void printDevices(FILE* out, const std::vector<RankInfo>& ranks, const char* deviceText);
void printTableHeader(FILE* out);
void printRow(FILE* out, const ResultRow& row);
void printFooter(FILE* out, const RunSummary& summary);

// Writes options, rows and summary to `path`; false (with a message on
// stderr) when the file cannot be written.
bool writeJson(const std::string& path, const PerfOptions& options, const std::vector<ResultRow>& rows,
               const RunSummary& summary);

}  // namespace loom::perf
