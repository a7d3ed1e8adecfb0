// Which bytes a collective on device memory copies through pinned host
// staging memory, and where the host algorithm then finds its buffers: a
// pure function of the call, tested without CUDA.
//
// The staging buffer mirrors the user's buffers at full size, so the host
// algorithm runs exactly as it would on host memory and every rank still
// makes the same algorithm choice (a rank's memory kinds never change what
// its peers see). Only what NCCL's semantics need is copied:
//  - inputs are copied in, outputs copied out; a broadcast's input only on the
//    root, a reduce's output only on the root;
//  - in-place calls stage one region: all-gather copies in only this rank's
//    block, reduce-scatter copies out only this rank's block;
//  - a buffer in host memory is used where it is (no copy), even if the other
//    buffer of the call is staged.
// Copies are cut into pieces of at most `copyChunkBytes` (0: no limit), so
// no single DMA transfer is unbounded and a failure names a byte range.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/p2p.h"

namespace loom::cuda {

struct StagingInputs {
  algo::CollType type = algo::CollType::kAllReduce;
  size_t count = 0;      // as in CollArgs
  size_t elemBytes = 4;
  int nranks = 1;
  int rank = 0;
  int root = 0;
  bool inPlace = false;  // NCCL's in-place convention for this collective
  bool sendStaged = false;
  bool recvStaged = false;
  size_t copyChunkBytes = 0;
};

// Where the host algorithm finds one buffer.
struct Placement {
  bool staged = false;  // false: the user's own pointer
  size_t offset = 0;    // into the staging buffer, when staged
};

// One contiguous copy between a user buffer and the staging buffer.
struct StagedCopy {
  bool userIsSend = true;  // which user buffer (sendbuf or recvbuf)
  size_t userOffset = 0;
  size_t stagingOffset = 0;
  size_t bytes = 0;
};

struct StagingPlan {
  size_t stagingBytes = 0;
  Placement send, recv;
  std::vector<StagedCopy> copyIn;   // user -> staging, before the host algorithm
  std::vector<StagedCopy> copyOut;  // staging -> user, after it
  bool staged() const { return send.staged || recv.staged; }
};

StagingPlan planStaging(const StagingInputs& in);

// True if `args` is in place by NCCL's convention (all-gather: sendbuf ==
// recvbuf + rank*count; reduce-scatter: recvbuf == sendbuf + rank*count;
// others: sendbuf == recvbuf).
bool isInPlace(const algo::CollArgs& args, int rank);

// Send/recv: each staged op gets its own staging region; sends are copied in
// before the fused operation, recvs copied out after it.
struct P2PStagingPlan {
  size_t stagingBytes = 0;
  std::vector<Placement> ops;       // one per op, in order
  std::vector<StagedCopy> copyIn;   // userIsSend: the op's src (userOffset 0 + piece); see opIndex
  std::vector<StagedCopy> copyOut;
  std::vector<size_t> copyInOp, copyOutOp;  // the op index of each copy
};
P2PStagingPlan planP2PStaging(const std::vector<algo::P2POp>& ops, const std::vector<bool>& staged,
                              size_t copyChunkBytes);

}  // namespace loom::cuda
