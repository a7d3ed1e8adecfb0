// The main() of every Loom perf tool: parses the flags, creates this
// process's ranks (one thread and one communicator each), runs the sweep on
// each and returns the process's exit status.
#pragma once

#include <loom/loom.h>

#include "perf/harness/collective.h"

namespace loom::perf {

// What a Loom tool adds to its shape: the call that runs it.
struct LoomCollective {
  CollectiveShape shape;
  const char* callName;  // "loomAllReduce", for error messages
  loomResult_t (*run)(const CollArgs& args, loomComm_t comm, loomStream_t stream);
};

// Ranks: the launcher's processes (loomrun, torchrun, mpirun, srun; else 1)
// x -t threads x -g; process p drives global ranks p*t*g .. (p+1)*t*g-1.
// Under mpirun, with MPI linked, rank 0's unique id reaches the others by
// MPI_Bcast as in nccl-tests; under the other launchers it comes from
// loomGetUniqueIdFromEnv, and without a launcher from loomGetUniqueId
// (docs/launching.md). Returns 0 when every check passed, 1 when a value was
// wrong or out of bounds (or a Loom call failed), 2 for bad flags.
int loomPerfMain(int argc, char** argv, const LoomCollective& collective);

}  // namespace loom::perf
