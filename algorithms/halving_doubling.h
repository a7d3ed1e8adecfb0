// Halving-doubling (Rabenseifner) all-reduce: reduce-scatter by recursive
// halving, then all-gather by recursive doubling. 2*log2(p) exchange steps
// (+2 when n is not a power of two) moving 2*(p-1)/p * S bytes per rank, so
// it keeps recursive doubling's few steps without its log2(p) * S traffic:
// the middle ground between "rd" (small) and "ring" (large messages).
#pragma once

#include "algorithms/algorithm.h"

namespace loom::algo {

// Any count and chunk size (exchanges are chunked by ctx.chunkBytes). Every
// rank ends with bit-identical results: each element is reduced and
// finalized by exactly one owner and copied to everybody else.
Status halvingDoublingAllReduce(const CollArgs& args, const AlgoContext& ctx);

}  // namespace loom::algo
