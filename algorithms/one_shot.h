// One-shot all-reduce for tiny messages on one host: every rank sends its
// whole input to every peer and reduces all n inputs itself, in rank order
// 0..n-1, so every rank computes the same bits. One step of latency instead
// of the ring's 2(n-1) or recursive doubling's log2(n), at the price of
// moving (n-1) * S bytes per rank (the ring moves 2(n-1)/n * S) and n-1
// reductions of the whole vector per rank.
#pragma once

#include <cstddef>

#include "algorithms/algorithm.h"

namespace loom::algo {

// The largest payload per rank one-shot takes. Its traffic grows as (n-1) * S
// against the ring's ~2S, and its reduction work as (n-1) * S against ~S;
// above a few tens of KiB the bandwidth terms dominate and ring/hd win, so
// the cap keeps it to the latency-bound sizes it is for.
constexpr size_t kOneShotMaxBytes = 64 * 1024;
// The largest message sent in one bulletin round (AlgoContext::bulletin)
// instead of through the per-peer FIFOs.
constexpr size_t kOneShotBulletinMaxBytes = 4096;

// The most ranks whose one-shot runs split (SplitRun), with its slots on the stack.
constexpr int kMaxInlineRanks = 64;

Status oneShotAllReduce(const CollArgs& args, const AlgoContext& ctx);
// The same in two parts (algorithm.h), for a message of one chunk or one
// bulletin round: post sends the input to every peer, finish folds.
extern const SplitRun kOneShotSplit;
// Shared memory only (ctx.singleHost: copies to n-1 peers are cheap there,
// not over a network) and at most kOneShotMaxBytes per rank.
bool oneShotApplies(const CollArgs& args, const AlgoContext& ctx);

}  // namespace loom::algo
