#include "algorithms/patterns/tree_topology.h"

namespace loom::algo {
namespace {

int lowestBit(int p) { return p & -p; }

int largestPowerOfTwoAtMost(int n) {
  int p = 1;
  while (p <= n / 2) p *= 2;
  return p;
}

// Positions are 1..n; 0 means "none".
int parentPosition(int n, int p) {
  const int b = lowestBit(p);
  int up = (p ^ b) | (b << 1);
  if (up > n) up = p ^ b;  // the right edge is ragged: skip the missing level
  return up;
}

int rankAt(int n, int shift, int position) { return (position - 1 + shift) % n; }

}  // namespace

int shiftForRoot(int nranks, int root) {
  const int rootPosition = largestPowerOfTwoAtMost(nranks);
  return ((root - (rootPosition - 1)) % nranks + nranks) % nranks;
}

int binaryTreeRoot(int nranks, int shift) { return rankAt(nranks, shift, largestPowerOfTwoAtMost(nranks)); }

int binaryTreeDepth(int nranks) {
  int depth = 0;
  for (int p = largestPowerOfTwoAtMost(nranks); p > 1; p /= 2) ++depth;
  return depth;
}

TreeNode binaryTreeNode(int nranks, int rank, int shift) {
  const int n = nranks;
  const int p = ((rank - shift) % n + n) % n + 1;
  TreeNode node;
  const int up = parentPosition(n, p);
  if (up != 0) node.parent = rankAt(n, shift, up);
  for (int q = up; q != 0; q = parentPosition(n, q)) ++node.depth;

  const int half = lowestBit(p) >> 1;
  if (half == 0) return node;  // odd position: a leaf
  node.children[node.nchildren++] = rankAt(n, shift, p - half);
  for (int l = half; l >= 1; l >>= 1) {
    if (p + l <= n) {
      node.children[node.nchildren++] = rankAt(n, shift, p + l);
      break;
    }
  }
  return node;
}

}  // namespace loom::algo
