// Pipelined binary-tree broadcast and reduce, rooted at args.root.
//
// The basic tree of tree_topology.h is placed with the shift that puts
// args.root at its root position. Every rank handles the pieces in order:
//   broadcast: the root sends each piece to its children (from sendbuf, then
//              copies it to recvbuf); every other rank stores it in recvbuf
//              and forwards it (recvCopySend).
//   reduce:    leaves send their pieces up; every other rank adds its own and
//              its children's (recvReduceSend / recv2ReduceSend) and passes
//              the sum up; the root finalizes into recvbuf. Non-root ranks
//              never touch recvbuf: a node with two children reduces both
//              straight from their receive slots into its parent's slot.
// Deadlock freedom: in the global order "piece by piece, and within a piece
// the wave order (down: root first; up: deepest first)" every piece sent on a
// connection is received in the same wave, before the next piece is sent on
// it, so a FIFO never needs more than one slot, and the earliest unfinished
// operation always finds its input at the head of its FIFO (as argued in
// tree_allreduce.cc). Each rank follows that order, handling its pieces one
// by one.
#include <cstring>

#include "algorithms/primitives.h"
#include "algorithms/tree.h"
#include "algorithms/tree_steps.h"
#include "kernels/stream_copy.h"

namespace loom::algo {
namespace {

Status checkRoot(const CollArgs& args, const AlgoContext& ctx) {
  LOOM_ENFORCE(args.root >= 0 && args.root < ctx.nranks, Code::kInvalidArgument,
               "root %d out of range [0, %d) on rank %d", args.root, ctx.nranks, ctx.rank);
  return Status::ok();
}

TreeNode rootedNode(const CollArgs& args, const AlgoContext& ctx) {
  return binaryTreeNode(ctx.nranks, ctx.rank, shiftForRoot(ctx.nranks, args.root));
}

}  // namespace

Status treeBroadcast(const CollArgs& args, const AlgoContext& ctx) {
  LOOM_TRY(checkRoot(args, ctx));
  if (args.count == 0) return Status::ok();
  const size_t es = dataTypeSize(args.dtype);
  const auto* in = static_cast<const std::byte*>(args.sendbuf);
  auto* out = static_cast<std::byte*>(args.recvbuf);
  const bool isRoot = ctx.rank == args.root;
  if (ctx.nranks == 1) {
    if (in != out) std::memmove(out, in, args.count * es);
    return Status::ok();
  }
  size_t chunkElems = 0;
  LOOM_TRY(chunkElemsOf(args, ctx, &chunkElems));
  const TreeNode node = rootedNode(args, ctx);
  const TreeRange range{0, args.count, chunkElems};
  Steps steps(ctx, {args.dtype, args.op, ctx.nranks});
  // Nobody reads recvbuf back: a large one is written non-temporally.
  const bool streaming = args.count * es >= kernels::kStreamingOutputBytes;
  steps.streamOutputs(streaming);
  for (size_t i = 0; i < range.pieces(); ++i) {
    const Piece p = range.piece(i);
    if (isRoot) {
      LOOM_TRY(sendToChildren(steps, node, in + p.offset * es, p.count));
      // After the sends: the children's copies leave first, and an in-place
      // call has nothing to copy.
      if (in != out && streaming) kernels::copyStreaming(out + p.offset * es, in + p.offset * es, p.count * es);
      else if (in != out) std::memcpy(out + p.offset * es, in + p.offset * es, p.count * es);
    } else {
      LOOM_TRY(forwardDown(steps, node, out + p.offset * es, p.count));
    }
  }
  return Status::ok();
}

Status treeReduce(const CollArgs& args, const AlgoContext& ctx) {
  LOOM_TRY(checkRoot(args, ctx));
  if (args.count == 0) return Status::ok();
  if (ctx.nranks == 1) return reduceOnOneRank(args);
  size_t chunkElems = 0;
  LOOM_TRY(chunkElemsOf(args, ctx, &chunkElems));
  const size_t es = dataTypeSize(args.dtype);
  const auto* in = static_cast<const std::byte*>(args.sendbuf);
  auto* out = static_cast<std::byte*>(args.recvbuf);
  const TreeNode node = rootedNode(args, ctx);
  const TreeRange range{0, args.count, chunkElems};
  Steps steps(ctx, {args.dtype, args.op, ctx.nranks});
  // The root's result is not read back: a large one is written non-temporally.
  steps.streamReducedOutputs(args.count * es >= kernels::kStreamingOutputBytes);
  for (size_t i = 0; i < range.pieces(); ++i) {
    const Piece p = range.piece(i);
    const std::byte* mine = in + p.offset * es;
    if (node.parent >= 0) {
      LOOM_TRY(reduceUpToParent(steps, node, mine, p.count));
    } else if (node.nchildren == 1) {
      LOOM_TRY(steps.recvReduceFinal(node.children[0], mine, out + p.offset * es, p.count));
    } else {
      LOOM_TRY(steps.recv2ReduceFinal(node.children[0], node.children[1], mine, out + p.offset * es, p.count));
    }
  }
  return Status::ok();
}

}  // namespace loom::algo
