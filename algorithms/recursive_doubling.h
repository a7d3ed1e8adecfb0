// Recursive-doubling all-reduce for small messages: log2(n) exchange steps
// instead of the ring's 2(n-1), which is what matters when every step may
// wait for a peer to be scheduled (4-8 ranks on 2 cores).
#pragma once

#include "algorithms/algorithm.h"

namespace loom::algo {

// Requires count * sizeof(dtype) <= ctx.chunkBytes (one chunk per exchange).
// Every rank ends with bit-identical results: partners combine the same two
// values in the same order (lower rank's first).
Status recursiveDoublingAllReduce(const CollArgs& args, const AlgoContext& ctx);
// The same in two parts (algorithm.h) at two ranks (one exchange).
extern const SplitRun kRecursiveDoublingSplit;

}  // namespace loom::algo
