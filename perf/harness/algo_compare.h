// --algos: compares Loom's algorithms with each other and with Loom's own
// choice in ONE run, so that every series sees the same state of a shared,
// noisy machine.
//
// Each rank creates one communicator per listed name, with LOOM_ALGO set to
// that name in the environment while it is created ("auto": LOOM_ALGO unset,
// Loom's tuner chooses), plus a control communicator (barriers, combining
// times, broadcasting the unique ids). At each size every communicator gets -w
// warm-up calls, then --reps rounds follow; in round r the communicators take
// turns in an order rotated by r, each timing -n calls after a barrier. Each
// communicator's time at that size is the median over rounds of the per-round
// time combined over ranks as -a says. loomCommGetLastAlgorithm after each
// round says what really ran: a forced algorithm that does not apply at a
// size (oneshot above its limit, rd above one chunk) shows n/a. Only rank 0
// prints (algo_table.h); out-of-place calls only; -c checks one call per
// communicator and size.
#pragma once

#include <loom/loom.h>

#include "perf/harness/loom_main.h"
#include "perf/harness/perf_options.h"

namespace loom::perf {

// Runs the comparison on this process's ranks firstRank .. firstRank +
// threads - 1 (one thread each) of a job of nranks; `id` is the job's id for
// the control communicator. Returns the process's exit status: 0, or 1 when
// a value was wrong (a failed Loom call ends the process with status 1).
int runAlgoComparison(const PerfOptions& options, const LoomCollective& collective, const loomUniqueId& id,
                      int firstRank, int threads, int nranks);

}  // namespace loom::perf
