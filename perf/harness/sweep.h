// The measurement loop shared by every perf tool: for each type, op and size
// it times the out-of-place and in-place forms of the collective, checks
// their results, and (on rank 0) prints nccl-tests' table.
#pragma once

#include <cstdint>
#include <string>

#include "perf/harness/collective.h"
#include "perf/harness/device_buffers.h"
#include "perf/harness/perf_options.h"
#include "perf/harness/report.h"

namespace loom::perf {

struct SweepIdentity {
  const char* library;     // "loom" or "openmpi" (--loom-json)
  const char* deviceText;  // after "[cpu]" on the device lines (host buffers)
  int device;              // this rank's device column with host buffers (its thread index)
  HeaderVersions versions;  // the first header line's two version codes
  std::string note;        // printed after the device lines: which memory, and why ("" for none)
};

struct SweepOutcome {
  int64_t wrong = 0;        // wrong elements, summed over ranks, sizes and placements
  int64_t outOfBounds = 0;  // guard bytes past the buffers that changed, summed likewise
  bool reportWritten = true;  // false when -J or --loom-json could not be written (rank 0 only)
  bool belowMinBusBw = false;  // NCCL_TESTS_MIN_BW set and the average bus bandwidth under 90% of it
};

// Runs the whole sweep on one rank; every rank of the job must call it with
// the same options. Rank 0 prints to stdout (and writes -J); the others print
// nothing. Methods of `executor` end the process on library errors. With
// `gpu` the buffers are device memory on it (inputs written and results
// checked through host copies) and the executor's calls run on its stream;
// without, host memory.
SweepOutcome runSweep(const PerfOptions& options, const CollectiveShape& shape, RankExecutor& executor,
                      const SweepIdentity& identity, const RankDevice* gpu = nullptr);

}  // namespace loom::perf
