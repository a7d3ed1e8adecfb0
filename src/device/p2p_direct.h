// The direct path of one communicator (src/device/path_selection.h): same-host
// ranks read each other's device buffers. Built only with CUDA and the
// reduce-copy kernels (kernels/cuda); makeDirectPath() is null otherwise.
//
// One all-reduce, on every rank, after its stream's earlier work finished:
//  1. exchange (bootstrap all-gather) a record: readiness, pid, the sendbuff
//     pointer, the device's PCI bus id, and the CUDA IPC handle + offset of
//     sendbuff's allocation;
//  2. exchange each rank's verdict (every peer device reachable); unless all
//     say yes, every rank returns "not run" and stages instead;
//  3. map each peer's sendbuff: the pointer itself for a peer in this process
//     (UVA), else cudaIpcOpenMemHandle (cached per handle, closed at destroy);
//  4. one reduce-copy kernel reads all nranks inputs in rank order (the same
//     order, so every rank computes identical bits) and writes recvbuff (a
//     device scratch buffer when in place: peers may still read sendbuff);
//  5. bootstrap barrier: no rank returns (and lets its caller overwrite
//     sendbuff) while a peer may still read it; then scratch -> recvbuff.
// One-shot reads (n-1) x size per rank: right for the small and medium
// sizes; a two-shot (reduce-scatter + all-gather over IPC) is the next step.
#pragma once

#include <memory>

#include "algorithms/algorithm.h"
#include "bootstrap/bootstrap.h"
#include "common/status.h"
#include "common/wait.h"
#include "src/device/memory_kind.h"

namespace loom::cuda {

class DirectPath {
 public:
  virtual ~DirectPath() = default;
  // Runs `args` directly if every rank can; *ran false means the ranks
  // agreed to take the staged/host path instead (nothing was touched).
  // Collective: every rank of the communicator calls it for eligible calls.
  virtual Status allReduce(const algo::CollArgs& args, const PointerInfo& send, const PointerInfo& recv,
                           const WaitContext& wait, bool* ran) = 0;
};

// Null in builds without the CUDA kernels.
std::unique_ptr<DirectPath> makeDirectPath(int rank, int nranks, bootstrap::Bootstrap* bootstrap);
bool directPathBuilt();

}  // namespace loom::cuda
