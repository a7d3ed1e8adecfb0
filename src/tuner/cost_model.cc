#include "src/tuner/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace loom::tuner {
namespace {

using algo::CollType;

// Pieces of at most `chunk` bytes needed to move `bytes` (at least one: an
// empty call still synchronizes).
double pieces(double bytes, double chunk) { return std::max(1.0, std::ceil(bytes / std::max(chunk, 1.0))); }

bool is(const char* name, const char* what) { return std::strcmp(name, what) == 0; }

int floorPow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// Ring reduce-scatter + all-gather: rounds of n blocks of <= chunk bytes,
// 2(n-1) hops per round; each rank sends 2(n-1)/n of the buffer.
Shape ringAllReduce(int n, double S, double C) {
  return {2.0 * (n - 1) * pieces(S / n, C), 2.0 * (n - 1) / n * S, 1.0 * (n - 1) / n * S};
}

// Recursive doubling in one chunk: log2(p) exchanges of the whole vector, plus
// a fold and an unfold of the whole vector when n is not a power of two.
Shape recursiveDoubling(int n, double S) {
  const int p = floorPow2(n);
  const double exchanges = ceilLog2(p);
  const double fold = n > p ? 2.0 : 0.0;
  return {exchanges + fold, (exchanges + fold) * S, (exchanges + (fold > 0 ? 1.0 : 0.0)) * S};
}

// Halving-doubling (Rabenseifner): reduce-scatter by recursive halving
// (exchange S/2, S/4, ...) then all-gather by doubling; each exchange is cut
// into chunks. Non-powers of two fold the extra ranks in and out first.
Shape halvingDoubling(int n, double S, double C) {
  const int p = floorPow2(n);
  const int levels = ceilLog2(p);
  Shape s;
  for (int k = 1; k <= levels; ++k) s.steps += 2.0 * pieces(S / std::ldexp(1.0, k), C);
  s.wireBytes = 2.0 * (p - 1) / p * S;
  s.reducedBytes = 1.0 * (p - 1) / p * S;
  if (n > p) {
    s.steps += 2.0 * pieces(S, C);
    s.wireBytes += 2.0 * S;
    s.reducedBytes += S;
  }
  return s;
}

// NCCL's double binary tree: each tree carries half the buffer, pipelined in
// chunks up (reduce) then down (broadcast) ~log2(n) levels. An interior node
// receives from two children and sends to two, so ~2S cross its links, and
// it reduces both children's halves (S). With two ranks each rank is the root
// of one tree with a single child: it moves S in all, like the ring, and
// reduces only its own tree's half.
Shape doubleBinaryTree(int n, double S, double C) {
  const double depth = ceilLog2(n);
  return {2.0 * depth + pieces(S / 2, C) - 1.0, (n > 2 ? 2.0 : 1.0) * S, (n > 2 ? 1.0 : 0.5) * S};
}

// One shot: every rank sends its whole input to each peer at once and
// reduces the n-1 copies it receives; the sends overlap, so one chunk round
// of latency, but (n-1) S bytes in and out.
Shape oneShot(int n, double S, double C) {
  return {pieces(S, C), (n - 1.0) * S, (n - 1.0) * S};
}

// The deterministic schedule: per round of n pieces, every rank sends piece
// p of its input to rank p, folds its own slice in rank order, and (all-reduce,
// reduce) sends the folded piece on: one or two hops per round.
Shape deterministic(CollType type, int n, double S, double C) {
  const double rounds = pieces(S / n, C), slice = 1.0 * (n - 1) / n * S;
  if (type == CollType::kReduceScatter) return {rounds, slice, slice};
  return {2.0 * rounds, 2.0 * slice, slice};
}

// Pipelined chain root -> ... (broadcast) or ... -> root (reduce): n-1 hops
// of latency plus one step per piece; every link carries S.
Shape chain(int n, double S, double C, bool reduces) {
  return {(n - 1.0) + pieces(S, C) - 1.0, S, reduces ? S : 0.0};
}

// Pipelined binary tree: log2(n) levels plus one step per piece; an interior
// node serves two children, so 2S cross its links.
Shape binaryTree(int n, double S, double C, bool reduces) {
  const double fanout = n > 2 ? 2.0 : 1.0;
  return {static_cast<double>(ceilLog2(n)) + pieces(S, C) - 1.0, fanout * S, reduces ? fanout * S : 0.0};
}

// Ring reduce-scatter / all-gather over the whole buffer S (n blocks):
// (n-1) hops per round of n chunks; each rank sends (n-1)/n of S.
Shape ringHalf(int n, double S, double C, bool reduces) {
  const double moved = 1.0 * (n - 1) / n * S;
  return {(n - 1.0) * pieces(S / n, C), moved, reduces ? moved : 0.0};
}

}  // namespace

int ceilLog2(int n) {
  int l = 0;
  while ((1 << l) < n) ++l;
  return l;
}

double collectiveBytes(const algo::CollArgs& args, int nranks) {
  const double bytes = static_cast<double>(args.count) * static_cast<double>(dataTypeSize(args.dtype));
  const bool perRank = args.type == CollType::kReduceScatter || args.type == CollType::kAllGather;
  return perRank ? bytes * nranks : bytes;
}

Shape shapeOf(CollType type, const char* name, int n, double S, double C) {
  if (n <= 1) return {0, 0, 0};
  switch (type) {
    case CollType::kAllReduce:
      if (is(name, "ring")) return ringAllReduce(n, S, C);
      if (is(name, "deterministic")) return deterministic(type, n, S, C);
      if (is(name, "rd")) return recursiveDoubling(n, S);
      if (is(name, "hd")) return halvingDoubling(n, S, C);
      if (is(name, "tree")) return doubleBinaryTree(n, S, C);
      if (is(name, "oneshot")) return oneShot(n, S, C);
      break;
    case CollType::kBroadcast:
    case CollType::kReduce: {
      const bool reduces = type == CollType::kReduce;
      if (is(name, "chain")) return chain(n, S, C, reduces);
      if (is(name, "deterministic") && reduces) return deterministic(type, n, S, C);
      if (is(name, "tree")) return binaryTree(n, S, C, reduces);
      break;
    }
    case CollType::kReduceScatter:
    case CollType::kAllGather: {
      const bool reduces = type == CollType::kReduceScatter;
      if (is(name, "ring")) return ringHalf(n, S, C, reduces);
      if (is(name, "deterministic") && reduces) return deterministic(type, n, S, C);
      break;
    }
  }
  // An algorithm without a formula: assume the cost of a ring all-reduce, so
  // it is neither favoured nor ruled out.
  Shape s = ringAllReduce(n, S, C);
  s.known = false;
  return s;
}

double predictMicros(const Shape& shape, const CostParams& p) {
  return shape.steps * p.alphaMicros + shape.wireBytes * p.betaMicrosPerByte +
         shape.reducedBytes * p.gammaMicrosPerByte;
}

}  // namespace loom::tuner
