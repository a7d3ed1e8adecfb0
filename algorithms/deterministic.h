// Deterministic all-reduce, reduce and reduce-scatter: every element is
// reduced in ONE canonical order, the left fold over ranks
//   acc = x_0; acc = acc (op) x_1; ...; acc = acc (op) x_{n-1}; finalize(acc)
// so floating-point results are bit-identical whatever the chunk size,
// protocol or transport, run to run, and equal to that fold computed by any
// reference. (IEEE sum and product are commutative but not associative:
// "order" here is the association, which is what changes the bits.)
//
// Schedule: a direct reduce-scatter, rank r owning slice r of the buffer
// (every rank sends slice p of its input to rank p; the owner folds the n
// contributions in rank order, its own at position r); then, for all-reduce,
// a direct all-gather of the slices; for reduce, a gather of the slices to
// the root; for reduce-scatter nothing more. Per rank it moves the same
// bytes as a ring (2(n-1)/n * S for all-reduce) in n-1 messages per piece.
//
// Slices: all-reduce and reduce split count into n contiguous slices, the
// first count % n one element longer than the rest (slice s starts at
// s * (count / n) + min(s, count % n)); reduce-scatter's slices are given,
// recvcount elements each.
#pragma once

#include "algorithms/algorithm.h"

namespace loom::algo {

Status deterministicAllReduce(const CollArgs& args, const AlgoContext& ctx);
Status deterministicReduce(const CollArgs& args, const AlgoContext& ctx);
Status deterministicReduceScatter(const CollArgs& args, const AlgoContext& ctx);

}  // namespace loom::algo
