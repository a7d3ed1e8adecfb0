// Collectives on device buffers in a communicator that spans hosts, with a
// device engine on each host (CommDevices::hostEngine): the steps within a
// host run in that host's engine, and only what must cross hosts is staged
// through pinned memory and moved by a host collective over the rank's rail
// (the rank with its local index on every host, in host order). Each rank
// stages only its fraction of the call: 1/L of it with L ranks per host.
//
// With H hosts of L ranks, this rank local index j on host h0, block b of a
// per-rank layout (all-gather's output, reduce-scatter's input) belonging to
// rank b, and "column j" = the blocks of rail j's ranks, in host order:
//   all-reduce:     engine reduce-scatter of shard j (1/L of the buffer, plus
//                   the count % L tail, which every rank carries) ->
//                   rail all-reduce -> engine all-gather of the shards;
//   reduce-scatter: column j of every local rank's input packed together and
//                   engine reduce-scattered -> rail reduce-scatter;
//   all-gather:     rail all-gather of this rank's block -> column j, engine
//                   all-gather of the columns, unpacked into rank order;
//   broadcast:      the root's host broadcasts in its engine -> shard j
//                   broadcast over rail j -> engine all-gather of the shards
//                   on every other host;
//   reduce:         engine reduce-scatter of the shards -> rail reduce to the
//                   root's host -> the root gathers the shards in its engine.
// Host blocks need not be contiguous (ranks interleaved across hosts): the
// columns are packed and unpacked with device-to-device copies in an engine
// scratch buffer. An average sums everywhere and divides once, by the
// communicator's size, in the rail step.
//
// Every rank of the communicator must take this path for the call alike
// (CommDevices decides it from facts that are the same on every rank).
#pragma once

#include <functional>
#include <vector>

#include "algorithms/algorithm.h"
#include "common/status.h"
#include "common/wait.h"
#include "src/device/device_engine.h"
#include "src/device/runtime.h"

namespace loom::cuda {

// Runs a host collective on host buffers among `members` (global ranks, in
// order; hostArgs.root is an index into them), over the communicator's links:
// the inter-host step of a device collective whose intra-host steps run in
// the engine. Its members carry whole hosts' partial results, so kAvg sums
// and divides by the communicator's size, not by the members'.
using HostSubgroupCollective = std::function<Status(const algo::CollArgs& hostArgs, const std::vector<int>& members)>;

struct AcrossHosts {
  DeviceEngine* engine = nullptr;  // this host's (its members: hosts[host])
  CopyEngine* copies = nullptr;    // of the engine's device
  // Pinned host memory of at least `bytes`, kept by the caller.
  std::function<Result<void*>(size_t bytes)> staging;
  HostSubgroupCollective runOnRail;
  // Host index -> its ranks, ascending; every host has as many.
  const std::vector<std::vector<int>>* hosts = nullptr;
  int rank = 0;
  int nranks = 1;
  WaitContext wait = {};
};

// Whether the layout has rails: at least two hosts, all of one size, and
// `rank` on one of them.
bool acrossHostsLayoutFits(const std::vector<std::vector<int>>& hosts, int rank);

// Runs `args` (device buffers of the engine's device, every rank alike).
Status runAcrossHosts(const algo::CollArgs& args, const AcrossHosts& ctx);

}  // namespace loom::cuda
