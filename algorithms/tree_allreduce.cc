// Double binary tree all-reduce (NCCL's tree algorithm).
//
// The buffer is split in two halves; half t moves over tree t of the double
// binary tree (tree_topology.h), in pieces of at most chunkBytes. In each tree
// a piece is reduced up to the root (recvReduceSend, or recv2ReduceSend at a
// node with two children), the root finalizes it into recvbuf (avg divides
// there) and sends it back down (recvCopySend), so every rank ends with the
// root's bits and results are identical on all ranks.
//
// One thread drives all of a rank's connections, and a directed connection is
// one FIFO (as few as 2 slots) shared by both trees and both directions. So
// every rank performs its operations in one global order, a systolic
// schedule in which every piece crosses one link per step (D = depth of the
// trees, d = this rank's depth in tree t):
//
//   for step s = 0, 1, 2, ...
//     for tree t = 0, 1
//       up phase:   piece s - (D - d) moves up: receive from the children,
//                   add own, send to the parent; the root instead finalizes
//                   into recvbuf
//       down phase: piece s - (D + d) moves down: receive from the parent
//                   into recvbuf and forward to the children; the root sends
//                   the piece it finalized in this step's up phase
//
// So a piece climbs one level per step, reaches the root D steps after it
// left the deepest leaves, and descends one level per step: 2D steps of
// latency, while the reduce of later pieces overlaps the broadcast of earlier
// ones (a rank handles up to four pieces per step).
//
// Why every FIFO delivers what its receiver expects: every message is sent in
// some step s and received in step s + 1. In a given tree a directed
// connection u->v is either a down link (u parent of v) or an up link (u
// child of v), so it carries at most one message per step and tree; the
// message of tree t is sent and received in the phases of tree t, which come
// in the same order (tree 0 first) on both ends. So messages are received in
// the order they were sent.
//
// Why it cannot deadlock: within a step no operation needs a message of the
// same step, so the global order may list the ranks of one phase in any
// order: receivers first (down phases deepest first, up phases shallowest
// first). Take the earliest operation in that order that has not finished;
// its rank has finished all its earlier operations, so it is executing it.
//   - What it receives was sent in the previous step by a finished operation,
//     and everything sent before on that connection was received by earlier,
//     finished operations of this rank, so it is at the head of the FIFO.
//   - What it sends finds a free slot. A FIFO holds at most the messages sent
//     but not yet received in the global order. u->v carries at most one
//     message per step and tree, each received in its phase of the next step
//     before u sends the next one of that phase (receivers first; the root
//     sends in the down phase, not the up phase, for this reason). So at most
//     2 are ever in flight: 2 slots suffice.
// So that operation completes, and by induction all of them do.
#include <algorithm>
#include <cstddef>

#include "algorithms/primitives.h"
#include "algorithms/tree.h"
#include "algorithms/tree_steps.h"
#include "kernels/stream_copy.h"

namespace loom::algo {
namespace {

// One tree's part of the all-reduce as this rank sees it.
struct TreeShare {
  TreeNode node;
  TreeRange range;
};

// The root's part of the up phase: the final reduction into recvbuf.
Status finalizeAtRoot(Steps& steps, const TreeNode& node, const std::byte* mine, std::byte* result, size_t count) {
  if (node.nchildren == 1) return steps.recvReduceFinal(node.children[0], mine, result, count);
  return steps.recv2ReduceFinal(node.children[0], node.children[1], mine, result, count);
}

}  // namespace

Status treeAllReduce(const CollArgs& args, const AlgoContext& ctx) {
  if (args.count == 0) return Status::ok();
  if (ctx.nranks == 1) return reduceOnOneRank(args);
  size_t chunkElems = 0;
  LOOM_TRY(chunkElemsOf(args, ctx, &chunkElems));
  const size_t es = dataTypeSize(args.dtype);
  const auto* in = static_cast<const std::byte*>(args.sendbuf);
  auto* out = static_cast<std::byte*>(args.recvbuf);

  const size_t firstHalf = args.count - args.count / 2;
  TreeShare trees[2];
  trees[0] = {doubleTreeNode(ctx.nranks, ctx.rank, 0), {0, firstHalf, chunkElems}};
  trees[1] = {doubleTreeNode(ctx.nranks, ctx.rank, 1), {firstHalf, args.count - firstHalf, chunkElems}};

  // In step s, tree t moves piece s - (D - d) up and piece s - (D + d) down.
  const size_t depthOfTrees = static_cast<size_t>(binaryTreeDepth(ctx.nranks));
  size_t stepCount = 0;
  for (const auto& tree : trees)
    if (tree.range.pieces() > 0)
      stepCount = std::max(stepCount, tree.range.pieces() + depthOfTrees + static_cast<size_t>(tree.node.depth));

  Steps steps(ctx, {args.dtype, args.op, ctx.nranks});
  // Non-root nodes never read back what the broadcast-down wave stores.
  steps.streamOutputs(args.count * es >= kernels::kStreamingOutputBytes);
  for (size_t s = 0; s < stepCount; ++s) {
    for (const auto& tree : trees) {
      const TreeNode& node = tree.node;
      const size_t pieces = tree.range.pieces();
      const size_t depth = static_cast<size_t>(node.depth);
      const size_t upDelay = depthOfTrees - depth, downDelay = depthOfTrees + depth;
      if (s >= upDelay && s - upDelay < pieces) {
        const Piece p = tree.range.piece(s - upDelay);
        if (node.parent < 0) LOOM_TRY(finalizeAtRoot(steps, node, in + p.offset * es, out + p.offset * es, p.count));
        else LOOM_TRY(reduceUpToParent(steps, node, in + p.offset * es, p.count));
      }
      if (s >= downDelay && s - downDelay < pieces) {
        const Piece p = tree.range.piece(s - downDelay);
        if (node.parent < 0) LOOM_TRY(sendToChildren(steps, node, out + p.offset * es, p.count));
        else LOOM_TRY(forwardDown(steps, node, out + p.offset * es, p.count));
      }
    }
  }
  return Status::ok();
}

}  // namespace loom::algo
