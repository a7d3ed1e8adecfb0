#include "algorithms/patterns/tree_topology.h"

#include "common/tree_schedule.h"

namespace loom::algo {

int shiftForRoot(int nranks, int root) { return tree::shiftForRoot(nranks, root); }

int binaryTreeRoot(int nranks, int shift) { return tree::rootRank(nranks, shift); }

int binaryTreeDepth(int nranks) { return tree::depthOf(nranks); }

TreeNode binaryTreeNode(int nranks, int rank, int shift) {
  const tree::Links links = tree::linksOf(nranks, rank, shift);
  TreeNode node;
  node.parent = links.parent;
  node.children[0] = links.children[0];
  node.children[1] = links.children[1];
  node.nchildren = links.nchildren;
  node.depth = links.depth;
  return node;
}

}  // namespace loom::algo
