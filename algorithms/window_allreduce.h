// Windowed all-reduce on one host: a reduce-scatter and an all-gather
// through memory every rank can read (AlgoContext::windows), in two phase
// ends per round where the ring takes 2(n-1) lockstep hand-offs. Per round
// of up to half a window of the vector, every rank
//   1. copies its input, except its own slice, into its window;
//   2. after the first phase end, folds its slice of all n inputs in rank
//      order (its own straight from its input, the others' from their
//      windows) into the same place of its window;
//   3. after the second, copies every rank's folded slice into its output.
// Each rank moves about the ring's bytes, but waits for its peers twice per
// round instead of once per step: what costs most when ranks outnumber
// cores, or a step is a cross-core hand-off worth several KiB of copying.
// The fold is rank order 0..n-1 (RankOrderFold's), so results are the same
// bits as one-shot's and the deterministic all-reduce's.
#pragma once

#include "algorithms/algorithm.h"

namespace loom::algo {

Status windowAllReduce(const CollArgs& args, const AlgoContext& ctx);
// Needs the shared windows (one host, every rank on shared memory).
bool windowAllReduceApplies(const CollArgs& args, const AlgoContext& ctx);

}  // namespace loom::algo
