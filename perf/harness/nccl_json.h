// -J: the results in nccl-tests' JSON (its file version 3), so that the
// scripts written for nccl-tests' -J read Loom's runs: the command line and
// environment, the configuration with the devices, one record per row (size,
// count, type, redop, root, out_of_place and in_place with time in us, alg_bw
// and bus_bw in GB/s and nwrong), the out-of-bounds and average-bandwidth
// verdicts, the errors, and the start and end times. Loom's additions (the
// algorithm, the bound share) are only in --loom-json.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "perf/harness/collective.h"
#include "perf/harness/perf_options.h"
#include "perf/harness/report.h"

namespace loom::perf {

inline constexpr int kNcclJsonVersion = 3;

struct NcclJsonReport {
  const PerfOptions* options = nullptr;
  std::string startTime;  // localTimeNow() when the run began
  int libraryVersion = 0;  // where nccl-tests puts NCCL's version code
  std::vector<RankInfo> devices;
  std::vector<ResultRow> rows;
  RunSummary summary;
};

// "YYYY-MM-DD HH:MM:SS", local time, as nccl-tests stamps its JSON.
std::string localTimeNow();

// Creates `path`, never overwriting a file: when it exists, path.0, path.1,
// ... up to the first free name. Says on `log` which file it writes ("#
// Writing JSON output to ...") or why none ("# skipping json output; ...").
// Null when no file could be created.
FILE* createNcclJson(const std::string& path, FILE* log);

// Writes the report into `file` and closes it; false (with a message on
// stderr) when a write fails.
bool writeNcclJson(FILE* file, const NcclJsonReport& report);

// "NAME=value" as the JSON's "env" records it: the value replaced by
// "<redacted>" when the name says it holds a secret (SECRET, TOKEN, PASSWORD,
// PASSWD, CREDENTIAL, KEY; LOOM_JOB_SECRET among them), so that a results
// file can be shared. nccl-tests records every value.
std::string redactedVariable(const std::string& entry);

// `text` as a JSON string literal, quotes included (control characters and
// non-ASCII bytes escaped, so that any environment stays valid JSON).
std::string jsonString(const std::string& text);

}  // namespace loom::perf
