// The dissemination barrier (Hensgen, Finkel and Manber): in round k
// (k = 1, 2, 4, ... < n) rank r sends a zero-byte message to r+k and waits for
// one from r-k (mod n). After ceil(log2 n) rounds every rank has heard,
// directly or through others, from every rank, so none returns before all
// have entered. Works for any n, not only powers of two.
#pragma once

#include "algorithms/algorithm.h"

namespace loom::algo {

// Returns once every rank of ctx has called it (or the wait's deadline/abort).
Status disseminationBarrier(const AlgoContext& ctx);

}  // namespace loom::algo
