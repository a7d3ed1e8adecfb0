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

// Ranks: WORLD_SIZE processes (environment, else 1) x -t threads; the
// process with RANK=p drives global ranks p*t .. p*t+t-1. Under loomrun or
// torchrun the unique id comes from loomGetUniqueIdFromEnv, otherwise from
// loomGetUniqueId. Returns 0 when every check passed, 1 when a value was
// wrong or out of bounds (or a Loom call failed), 2 for bad flags.
int loomPerfMain(int argc, char** argv, const LoomCollective& collective);

}  // namespace loom::perf
