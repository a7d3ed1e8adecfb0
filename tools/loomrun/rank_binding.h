// loomrun --bind: plans each local rank's CPUs from this machine's topology
// (topology/binding_plan.h) and says what it chose.
#pragma once

#include <vector>

#include "common/status.h"
#include "tools/loomrun/loomrun_options.h"

namespace loom::launcher {

// The CPUs of local ranks 0..localRanks-1; empty when --bind none. Prints one
// line per rank on stderr with --bind-verbose or LOOM_DEBUG=INFO/TRACE:
//   loomrun: --bind core: local rank 1 (rank 1) -> cpus 1 (numa node 0)
// Errors: kSystemError when the topology cannot be read.
Result<std::vector<std::vector<int>>> planRankCpus(const LaunchOptions& opts);

}  // namespace loom::launcher
