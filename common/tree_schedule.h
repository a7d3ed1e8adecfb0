// The pure rank arithmetic of binary trees, shared by the host tree
// algorithms (algorithms/patterns/tree_topology.h, which documents the
// shape) and the CUDA device engine (kernels/cuda/engine/), so both build
// the same trees. Everything is a LOOM_HOST_DEVICE function of plain numbers.
//
// Positions are 1..n in in-order; position p's height is its lowest set bit:
// odd positions are leaves, the root is the largest power of two <= n. A tree
// is placed on the ranks with a shift: position p holds rank (p - 1 + shift)
// mod n. Trees 0 and 1 of the double binary tree are the shifts 0 and 1.
#pragma once

#include "common/host_device.h"

namespace loom::tree {

LOOM_HOST_DEVICE constexpr int lowestBit(int p) { return p & -p; }

LOOM_HOST_DEVICE constexpr int largestPowerOfTwoAtMost(int n) {
  int p = 1;
  while (p <= n / 2) p *= 2;
  return p;
}

// The parent position of position p (1..n); 0 at the root. Where the right
// edge is ragged the missing level is skipped.
LOOM_HOST_DEVICE constexpr int parentPosition(int n, int p) {
  const int b = lowestBit(p);
  const int up = (p ^ b) | (b << 1);
  return up > n ? p ^ b : up;
}

LOOM_HOST_DEVICE constexpr int rankAt(int n, int shift, int position) { return (position - 1 + shift) % n; }
LOOM_HOST_DEVICE constexpr int positionOf(int n, int shift, int rank) { return ((rank - shift) % n + n) % n + 1; }

// The shift that puts rank `root` at the root position.
LOOM_HOST_DEVICE constexpr int shiftForRoot(int n, int root) {
  return ((root - (largestPowerOfTwoAtMost(n) - 1)) % n + n) % n;
}
LOOM_HOST_DEVICE constexpr int rootRank(int n, int shift) { return rankAt(n, shift, largestPowerOfTwoAtMost(n)); }

// Hops from the root to the deepest node: floor(log2 n).
LOOM_HOST_DEVICE constexpr int depthOf(int n) {
  int depth = 0;
  for (int p = largestPowerOfTwoAtMost(n); p > 1; p /= 2) ++depth;
  return depth;
}

// One rank's links in the tree over n ranks placed with `shift`.
struct Links {
  int parent = -1;             // rank; -1 at the root
  int children[2] = {-1, -1};  // ranks; the first nchildren are valid
  int nchildren = 0;
  int depth = 0;               // hops from the root
};

LOOM_HOST_DEVICE constexpr Links linksOf(int n, int rank, int shift) {
  Links links;
  const int p = positionOf(n, shift, rank);
  const int up = parentPosition(n, p);
  if (up != 0) links.parent = rankAt(n, shift, up);
  for (int q = up; q != 0; q = parentPosition(n, q)) ++links.depth;
  const int half = lowestBit(p) >> 1;
  if (half == 0) return links;  // odd position: a leaf
  links.children[links.nchildren++] = rankAt(n, shift, p - half);
  // The right child moves inward at the ragged right edge.
  for (int l = half; l >= 1; l >>= 1) {
    if (p + l <= n) {
      links.children[links.nchildren++] = rankAt(n, shift, p + l);
      break;
    }
  }
  return links;
}

}  // namespace loom::tree
