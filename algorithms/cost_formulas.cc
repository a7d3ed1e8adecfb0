#include "algorithms/cost_formulas.h"

#include <algorithm>
#include <cmath>

namespace loom::algo {
namespace {

// Pieces of at most `chunk` bytes needed to move `bytes` (at least one: an
// empty call still synchronizes).
double pieces(double bytes, double chunk) { return std::max(1.0, std::ceil(bytes / std::max(chunk, 1.0))); }

int floorPow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// Ring reduce-scatter + all-gather: rounds of n blocks of <= chunk bytes,
// 2(n-1) hops per round; each rank sends 2(n-1)/n of the buffer.
CostShape ringAllReduce(int n, double S, double C) {
  return {2.0 * (n - 1) * pieces(S / n, C), 2.0 * (n - 1) / n * S, 1.0 * (n - 1) / n * S};
}

// Ring reduce-scatter / all-gather over the whole buffer S (n blocks):
// (n-1) hops per round of n chunks; each rank sends (n-1)/n of S.
CostShape ringPass(int n, double S, double C, bool reduces) {
  const double moved = 1.0 * (n - 1) / n * S;
  return {(n - 1.0) * pieces(S / n, C), moved, reduces ? moved : 0.0};
}

// Pipelined chain root -> ... (broadcast) or ... -> root (reduce): n-1 hops
// of latency plus one step per piece; every link carries S.
CostShape chain(int n, double S, double C, bool reduces) {
  return {(n - 1.0) + pieces(S, C) - 1.0, S, reduces ? S : 0.0};
}

// Pipelined binary tree: log2(n) levels plus one step per piece; an interior
// node serves two children, so 2S cross its links.
CostShape binaryTree(int n, double S, double C, bool reduces) {
  const double fanout = n > 2 ? 2.0 : 1.0;
  return {static_cast<double>(ceilLog2(n)) + pieces(S, C) - 1.0, fanout * S, reduces ? fanout * S : 0.0};
}

// The deterministic schedule: per round of n pieces, every rank sends piece
// p of its input to rank p, folds its own slice in rank order, and (all-reduce,
// reduce) sends the folded piece on: one or two hops per round.
CostShape deterministic(int n, double S, double C, bool secondHop) {
  const double rounds = pieces(S / n, C), slice = 1.0 * (n - 1) / n * S;
  if (!secondHop) return {rounds, slice, slice};
  return {2.0 * rounds, 2.0 * slice, slice};
}

}  // namespace

int ceilLog2(int n) {
  int l = 0;
  while ((1 << l) < n) ++l;
  return l;
}

Cost ringAllReduceCost(const CostQuery& q) { return Cost::of(ringAllReduce(q.nranks, q.bytes, q.chunkBytes)); }
Cost ringReduceScatterCost(const CostQuery& q) { return Cost::of(ringPass(q.nranks, q.bytes, q.chunkBytes, true)); }
Cost ringAllGatherCost(const CostQuery& q) { return Cost::of(ringPass(q.nranks, q.bytes, q.chunkBytes, false)); }

// Recursive doubling in one chunk: log2(p) exchanges of the whole vector, plus
// a fold and an unfold of the whole vector when n is not a power of two.
Cost recursiveDoublingCost(const CostQuery& q) {
  const int n = q.nranks, p = floorPow2(n);
  const double S = q.bytes;
  const double exchanges = ceilLog2(p);
  const double fold = n > p ? 2.0 : 0.0;
  return Cost::of({exchanges + fold, (exchanges + fold) * S, (exchanges + (fold > 0 ? 1.0 : 0.0)) * S});
}

// Halving-doubling (Rabenseifner): reduce-scatter by recursive halving
// (exchange S/2, S/4, ...) then all-gather by doubling; each exchange is cut
// into chunks. Non-powers of two fold the extra ranks in and out first.
Cost halvingDoublingCost(const CostQuery& q) {
  const int n = q.nranks, p = floorPow2(n);
  const double S = q.bytes, C = q.chunkBytes;
  const int levels = ceilLog2(p);
  CostShape s;
  for (int k = 1; k <= levels; ++k) s.steps += 2.0 * pieces(S / std::ldexp(1.0, k), C);
  s.wireBytes = 2.0 * (p - 1) / p * S;
  s.reducedBytes = 1.0 * (p - 1) / p * S;
  if (n > p) {
    s.steps += 2.0 * pieces(S, C);
    s.wireBytes += 2.0 * S;
    s.reducedBytes += S;
  }
  return Cost::of(s);
}

// NCCL's double binary tree: each tree carries half the buffer, pipelined in
// chunks up (reduce) then down (broadcast) ~log2(n) levels. An interior node
// receives from two children and sends to two, so ~2S cross its links, and
// it reduces both children's halves (S). With two ranks each rank is the root
// of one tree with a single child: it moves S in all, like the ring, and
// reduces only its own tree's half.
Cost doubleBinaryTreeCost(const CostQuery& q) {
  const int n = q.nranks;
  const double S = q.bytes;
  const double depth = ceilLog2(n);
  return Cost::of({2.0 * depth + pieces(S / 2, q.chunkBytes) - 1.0, (n > 2 ? 2.0 : 1.0) * S, (n > 2 ? 1.0 : 0.5) * S});
}

// One shot: every rank sends its whole input to each peer at once and
// reduces the n-1 copies it receives; the sends overlap, so one chunk round
// of latency, but (n-1) S bytes in and out. The round is not free of n,
// though: each rank waits for the last of n-1 peers and reads each one's
// lines, which every other rank reads too, so its coherence traffic grows
// as n^2. The step costs of the tuning table were measured with one-shot at
// 2 and 4 ranks and hold that part there; beyond 4 ranks (n-2)(n-4)/24
// extra steps fit the 8-byte times on a 16-core host with one rank per core
// (2.8 us at 4 ranks, 4.3 at 8, 28 at 16): one step more at 8 ranks, seven
// at 16, where recursive doubling's four exchanges win.
Cost oneShotCost(const CostQuery& q) {
  const double n = q.nranks;
  const double contention = n > 4 ? (n - 2.0) * (n - 4.0) / 24.0 : 0.0;
  return Cost::of({pieces(q.bytes, q.chunkBytes) + contention, (n - 1.0) * q.bytes, (n - 1.0) * q.bytes});
}

// Windowed all-reduce: two phase ends per round of up to half a window
// (1 MiB), whatever the rank count; each rank copies (n-1)/n of the vector
// in and out and folds its slice of all n inputs.
// A phase end of the shared windows waits for every peer's arrival, read
// one flag (one cache miss) each: up to 4 ranks it costs one step, beyond
// that it grows with the peers. On 16 cores (2026-11-27) a phase end at 8
// ranks took about 2.4 of recursive doubling's steps and at 16 about 2, so
// with rd's log2(n) steps the windowed and direct all-reduces must lose to
// it at small sizes from 8 ranks; (n - 1) / 3 steps gives 2.3 at 8 and 5 at
// 16 (rd: 3 and 4).
static double phaseEndSteps(int n) { return std::max(1.0, (n - 1) / 3.0); }

Cost windowAllReduceCost(const CostQuery& q) {
  const int n = q.nranks;
  const double moved = 1.0 * (n - 1) / n * q.bytes;
  return Cost::of({2.0 * phaseEndSteps(n) * pieces(q.bytes, 1024.0 * 1024.0), 2.0 * moved, moved});
}

// Direct all-reduce: two phase ends per call; each rank reads (n-1)/n of
// the vector from its peers, folds its slice and writes (n-1)/n to them.
// The tuning table prices its copies as system calls between processes
// (process_vm_readv/writev, which pin the peer's pages for every copy).
// Between threads of one process they are memcpy: with 2 and 4 ranks as
// threads (2026-11-28, all_reduce_perf -t, interleaved) direct took a
// third of its time between processes at 64 KiB-1 MiB (2 ranks, 1 MiB:
// 63 us against 180-212) and led every other algorithm by 10-40% up to
// 4 MiB; at 16 MiB, where memory bandwidth bounds both, the two kinds of
// copy were within 1.2-1.5x and the ring or the tree led again. Hence a
// quarter of the copy cost in one process, up to 4 MiB.
static constexpr double kInProcessCopyShare = 0.25;
static constexpr double kInProcessCopyMaxBytes = 4.0 * 1024 * 1024;

Cost directAllReduceCost(const CostQuery& q) {
  const int n = q.nranks;
  const double moved = 1.0 * (n - 1) / n * q.bytes;
  const double copyShare = q.copiesInProcess && q.bytes <= kInProcessCopyMaxBytes ? kInProcessCopyShare : 1.0;
  return Cost::of({2.0 * phaseEndSteps(n), 2.0 * moved * copyShare, moved});
}

Cost deterministicAllReduceCost(const CostQuery& q) {
  return Cost::of(deterministic(q.nranks, q.bytes, q.chunkBytes, true));
}
Cost deterministicReduceScatterCost(const CostQuery& q) {
  return Cost::of(deterministic(q.nranks, q.bytes, q.chunkBytes, false));
}

Cost chainBroadcastCost(const CostQuery& q) { return Cost::of(chain(q.nranks, q.bytes, q.chunkBytes, false)); }
Cost chainReduceCost(const CostQuery& q) { return Cost::of(chain(q.nranks, q.bytes, q.chunkBytes, true)); }
Cost treeBroadcastCost(const CostQuery& q) { return Cost::of(binaryTree(q.nranks, q.bytes, q.chunkBytes, false)); }
Cost treeReduceCost(const CostQuery& q) { return Cost::of(binaryTree(q.nranks, q.bytes, q.chunkBytes, true)); }

// Two levels (hierarchical.h), H hosts of L ranks, S bytes: intra-host ring
// reduce-scatter and all-gather over L ranks, plus a ring all-reduce of S/L
// bytes over the H hosts: the network carries only 2(H-1)/H x S/L per rank
// in 2(H-1) steps per round. On one host (H = 1) the inter-host part is
// empty and the two rings are a ring all-reduce.
Cost hierarchicalAllReduceCost(const CostQuery& q) {
  const int local = q.ranksPerHost;
  return Cost{}
      .add(CostLinks::kWithinHost, ringPass(local, q.bytes, q.chunkBytes, true))
      .add(CostLinks::kWithinHost, ringPass(local, q.bytes, q.chunkBytes, false))
      .add(CostLinks::kBetweenHosts, ringAllReduce(q.nHosts, q.bytes / local, q.chunkBytes));
}

}  // namespace loom::algo
