// Which data path a collective takes, as pure functions of facts every rank
// can state (tested without CUDA):
//   kHost      every buffer of this rank is host memory: the host algorithms, as always;
//   kStaged    some buffer is device memory: copied through pinned host memory
//              around the host algorithm (any transport, any host layout);
//   kDirectP2P all ranks on one host, every rank's buffers in device memory
//              on devices with peer access to each other: each rank reads its
//              peers' device buffers (CUDA IPC) and reduces with the CUDA
//              kernels (all-reduce only for now).
//
// Ranks must agree on kDirectP2P (they read each other's buffers), but each
// knows only its own buffers. So the choice has two steps: directEligible()
// uses only facts that are the same on every rank (the communicator, the
// build, LOOM_CUDA_P2P, the call's arguments); when it holds, the ranks
// exchange one record each (cuda/p2p_direct.h) and choosePath() decides from
// what all of them said.
#pragma once

#include <cstddef>

#include "algorithms/algorithm.h"

namespace loom::cuda {

enum class DataPath { kHost, kStaged, kDirectP2P };
const char* dataPathName(DataPath path);

struct DirectFacts {
  bool enabled = false;           // LOOM_CUDA_P2P=1 (must be set alike on every rank)
  bool kernelsBuilt = false;      // the CUDA reduce-copy kernels are compiled in
  bool devicesUsable = false;     // this process sees a CUDA device (same on one host)
  bool singleHost = false;        // every rank of the communicator on this host
  int nranks = 1;
  int maxSources = 8;             // the reduce-copy kernel's source limit
  algo::CollType type = algo::CollType::kAllReduce;
  size_t bytes = 0;
};
// Whether the ranks exchange direct-path records for this call.
bool directEligible(const DirectFacts& facts);

// What one rank says in the exchange.
struct DirectReadiness {
  bool buffersOnDevice = false;   // sendbuff and recvbuff are cudaMalloc memory of one device
  bool reachesAllPeers = false;   // that device can access every peer's device (peer access or the same device)
};

// This rank's path: `eligible` from directEligible(), `allReady` true when
// every rank's record said both readiness bits (false when not eligible).
DataPath choosePath(bool eligible, bool allReady, bool localNeedsStaging);

}  // namespace loom::cuda
