// Binary trees over the ranks of a communicator, and NCCL's double binary
// tree: pure functions of (nranks, rank), no communication. The arithmetic
// is common/tree_schedule.h, which the device engine's kernels share.
//
// The basic tree numbers its nodes by position p = 1..n and links them in
// order (a position's in-order index is the position itself):
//   - the lowest set bit b of p says how high p sits: odd positions are leaves;
//   - p's children are p - b/2 and p + l, l the largest power of two <= b/2
//     with p + l <= n (the right child moves inward at the ragged right edge);
//   - p's parent is (p ^ b) | 2b, or p ^ b when that is beyond n;
//   - the root is the largest power of two <= n.
// Every step up at least doubles the lowest set bit, so the depth is at most
// floor(log2 n). The interior nodes (those with children) are exactly the even
// positions; all odd positions are leaves.
//
// A tree is placed on the ranks with a shift: position p holds rank
// (p - 1 + shift) mod n.
//   - Tree 0 of the double tree has shift 0: its interior ranks are the odd ranks.
//   - Tree 1 has shift 1: its interior ranks are (odd + 1) mod n, all even
//     (the odd rank n-1 of an even n wraps to rank 0).
// So every rank is interior in at most one of the two trees, as NCCL requires:
// in an all-reduce each rank forwards (receives from children and sends to a
// parent) the data of one tree only, which halves the load of the busiest
// link compared with one tree. (NCCL mirrors tree 0 for even n instead,
// rank -> n-1-rank; for odd n a mirror maps even ranks to even ranks and would
// make them interior in both trees, while the shift works for every n.)
// For a rooted collective the shift is chosen so that the root rank sits at
// the root position.
#pragma once

namespace loom::algo {

struct TreeNode {
  int parent = -1;              // rank; -1 at the root
  int children[2] = {-1, -1};   // ranks; the first nchildren are valid
  int nchildren = 0;
  int depth = 0;                // hops from the root
};

// Rank `rank`'s place in the basic tree over `nranks` ranks placed with `shift`.
TreeNode binaryTreeNode(int nranks, int rank, int shift);
// The rank at the root of that tree.
int binaryTreeRoot(int nranks, int shift);
// The shift that puts `root` at the root position.
int shiftForRoot(int nranks, int root);
// Depth of the deepest node (the same for every shift): floor(log2 nranks).
int binaryTreeDepth(int nranks);

// Rank `rank`'s place in tree 0 or 1 of the double binary tree.
inline TreeNode doubleTreeNode(int nranks, int rank, int tree) { return binaryTreeNode(nranks, rank, tree); }

}  // namespace loom::algo
