// Direct all-reduce on one host: a reduce-scatter and an all-gather straight
// between the ranks' own buffers (SharedWindows::readPeer and writePeer,
// process_vm_readv/writev between processes), so each byte that crosses
// between ranks is copied once, where the windowed all-reduce copies it into
// a window and out again. Every rank
//   1. publishes where its input and output lie, in its window;
//   2. after the first phase end, folds its slice of all n inputs in rank
//      order, a chunk at a time: each peer's piece read straight from that
//      peer's input into scratch (its window), the result written into its
//      own output and into every peer's;
//   3. ends a second phase: every slice of its output is then written, and
//      no peer touches its buffers any more.
// Two phase ends per call, whatever the size. The copies cost a system call
// per chunk and peer, so it pays for large vectors only. The fold is rank
// order 0..n-1, so results are the same bits as the windowed all-reduce's.
#pragma once

#include "algorithms/algorithm.h"

namespace loom::algo {

Status directAllReduce(const CollArgs& args, const AlgoContext& ctx);
// Needs the shared windows and direct copies between every pair of ranks.
bool directAllReduceApplies(const CollArgs& args, const AlgoContext& ctx);

}  // namespace loom::algo
