// What the tree algorithms share: how a range of the buffer is cut into
// pieces, and a node's part in one piece's reduce-up or broadcast-down wave.
#pragma once

#include <algorithm>
#include <cstddef>

#include "algorithms/primitives.h"
#include "algorithms/patterns/tree_topology.h"

namespace loom::algo {

struct Piece {
  size_t offset;  // elements from the start of the buffer
  size_t count;
};

// A range of the buffer that moves over one tree, in pieces of chunkElems.
struct TreeRange {
  size_t offset = 0;
  size_t count = 0;
  size_t chunkElems = 1;

  size_t pieces() const { return divUp(count, chunkElems); }
  Piece piece(size_t index) const {
    const size_t start = index * chunkElems;
    return {offset + start, std::min(chunkElems, count - start)};
  }
};

// Elements per piece, or an error when chunkBytes cannot hold one element
// (pieces of zero elements would never advance).
inline Status chunkElemsOf(const CollArgs& args, const AlgoContext& ctx, size_t* elems) {
  return chunkElemsFor(args, ctx, "tree", elems);
}

// A non-root node's part of the reduce-up wave: adds its own `mine` to what
// its children send and passes the sum to its parent.
inline Status reduceUpToParent(Steps& steps, const TreeNode& node, const void* mine, size_t count) {
  switch (node.nchildren) {
    case 0: return steps.send(node.parent, mine, count);
    case 1: return steps.recvReduceSend(node.children[0], node.parent, mine, count);
    default: return steps.recv2ReduceSend(node.children[0], node.children[1], node.parent, mine, count);
  }
}

// Sends `data` to every child (the root's part of the broadcast-down wave).
inline Status sendToChildren(Steps& steps, const TreeNode& node, const void* data, size_t count) {
  for (int i = 0; i < node.nchildren; ++i) LOOM_TRY(steps.send(node.children[i], data, count));
  return Status::ok();
}

// A non-root node's part of the broadcast-down wave: stores what its parent
// sends into `result` and forwards it to its children.
inline Status forwardDown(Steps& steps, const TreeNode& node, void* result, size_t count) {
  if (node.nchildren == 0) return steps.recv(node.parent, result, count);
  if (node.nchildren == 1) return steps.recvCopySend(node.parent, node.children[0], result, count);
  return steps.recvCopySendTwo(node.parent, node.children[0], node.children[1], result, count);
}

}  // namespace loom::algo
