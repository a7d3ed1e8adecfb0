// Which data path a collective takes, as pure functions of facts every rank
// can state (tested without CUDA):
//   kHost      every buffer of this rank is host memory: the host algorithms, as always;
//   kStaged    some buffer is device memory: copied through pinned host memory
//              around the host algorithm (any transport, any host layout);
//   kDirectP2P all ranks on one host, every rank's buffers in device memory
//              on devices with peer access to each other: each rank reads its
//              peers' device buffers (CUDA IPC) and reduces with the CUDA
//              kernels (all-reduce only for now);
//   kEngine    the device engine (device_engine.h): every rank on this host,
//              every device reaching every other; one kernel per call moves
//              and reduces the data between the GPUs, on the caller's stream;
//   kEngineAcrossHosts ranks on several hosts, each host's devices reaching
//              each other: all-reduce, reduce-scatter, all-gather, broadcast
//              and reduce run in the engine of each host, and only their
//              inter-host step is staged through pinned memory, one rail
//              per local rank (engine_across_hosts.h);
//   kDirectGdr ranks on several hosts, every rank's buffers in device memory:
//              the RDMA NIC writes between the device buffers (GPUDirect
//              RDMA over verbs, src/device/gdr_path.h; all-reduce only for now).
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

enum class DataPath { kHost, kStaged, kDirectP2P, kDirectGdr, kEngine, kEngineAcrossHosts };
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

// This rank's path: `eligible` from directEligible() (or gdrEligible()),
// `allReady` true when every rank's record said it was ready (false when not
// eligible); `direct` names the direct path that was tried.
DataPath choosePath(bool eligible, bool allReady, bool localNeedsStaging, DataPath direct = DataPath::kDirectP2P);

// The GPUDirect RDMA path's facts, again the same on every rank. Whether a
// rank has CUDA, an RDMA device and nvidia-peermem differs from host to host,
// so those are not facts here: the ranks agree on them once, when the
// communicator is created (src/device/gdr_availability.h), and `agreed` is the result.
struct GdrFacts {
  bool agreed = false;        // LOOM_NET_GDR=1 and every rank said it can (agreement at creation)
  bool kernelsBuilt = false;  // the CUDA reduce-copy kernels are compiled in
  bool singleHost = false;    // one host: CUDA IPC (kDirectP2P) is the better direct path there
  int nranks = 1;
  int maxSources = 8;         // one reduce-copy combines all ranks' slices
  algo::CollType type = algo::CollType::kAllReduce;
  size_t bytes = 0;
  size_t maxSliceBytes = size_t{32} << 30;  // what one rank's slice may be (QP depth x 1 GiB writes)
};
// Whether the ranks exchange GDR records for this call.
bool gdrEligible(const GdrFacts& facts);

}  // namespace loom::cuda
