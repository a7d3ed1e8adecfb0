// Send/recv and all-to-all on device buffers in a communicator that spans
// hosts, with a device engine on each host (CommDevices::hostEngine): the
// path is chosen per peer pair, as transports are. An op whose peer is on
// this rank's host (itself included) moves device to device in the host's
// engine; an op whose peer is on another host is staged through pinned
// memory and moved by the host send/recv, the fallback where no direct
// device path crosses hosts. A rank so stages only the bytes that cross
// hosts.
//
// Both ends of a pair decide alike from facts they share (whether the two
// ranks are on one host, the buffers' kind: device buffers on both ends, as
// the engine requires), so matching ops always take the same path; hosts
// need not have the same number of ranks.
//
// Order within one batch: the staged sends are copied to pinned memory
// first; then the engine's share is launched and runs on the device while
// this thread runs the staged share; the engine is waited for before the
// staged receives are copied out. Neither share waits for the other, so a
// batch that completes as one fused operation (NCCL's group semantics)
// completes here too: a rank's engine ops need only its host peers' engine
// ops, which run whatever their staged ops wait for. The copy-in before the
// launch and the copy-out after the wait keep an in-place batch right (a
// receive may overwrite what a send reads); within the engine's share,
// DeviceEngine::enqueueP2P sees to it.
#pragma once

#include <functional>
#include <vector>

#include "algorithms/p2p.h"
#include "common/status.h"
#include "common/wait.h"
#include "src/device/device_engine.h"
#include "src/device/memory_kind.h"
#include "src/device/runtime.h"
#include "src/device/staged_run.h"

namespace loom::cuda {

// A batch split by path. `engine` names peers by their index among the
// engine's members; `elsewhere` keeps the communicator's ranks, with
// `elsewhereStaged` saying which of them hold device memory.
struct P2PSplit {
  std::vector<algo::P2POp> engine;
  std::vector<algo::P2POp> elsewhere;
  std::vector<bool> elsewhereStaged;
};

// An op goes to the engine when its peer is one of `hostRanks` (the
// engine's members, ascending) and its buffer is on `device` (or it moves
// no bytes); every other op stays with the host send/recv.
P2PSplit splitP2PByHost(const std::vector<algo::P2POp>& ops, const std::vector<PointerInfo>& kinds,
                        const std::vector<int>& hostRanks, int device);

struct P2PAcrossHosts {
  DeviceEngine* engine = nullptr;  // this host's
  CopyEngine* copies = nullptr;    // of the engine's device
  // Pinned host memory of at least `bytes`, kept by the caller.
  std::function<Result<void*>(size_t bytes)> staging;
  HostP2P runHost;  // the host send/recv over the communicator's links
  int rank = 0;
  size_t copyChunkBytes = 0;
  WaitContext wait = {};
};

// Runs a batch that splitP2PByHost split (its engine share not empty).
Status runP2PAcrossHosts(const P2PSplit& split, const P2PAcrossHosts& ctx);

}  // namespace loom::cuda
