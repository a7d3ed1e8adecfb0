// -M's memory-usage line for tools that have no CUDA allocator to ask: the
// process's resident memory (VmRSS) at the points nccl-tests measures a GPU's
// free memory, so that the three parts it reports have the same meaning on
// host memory.
#pragma once

#include <cstdint>

namespace loom::perf {

// This process's resident bytes now; 0 where /proc/self/statm cannot be read.
int64_t residentBytes();

// Called once before any communicator exists: the "Initialization" part is
// measured from here. Later calls keep the first value.
void noteStartOfRun();
// residentBytes() at noteStartOfRun(); 0 when it was never called.
int64_t residentAtStartOfRun();

}  // namespace loom::perf
