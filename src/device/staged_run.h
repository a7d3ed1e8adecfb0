// Runs a collective or a fused send/recv through a staging plan: queue the
// copies in, wait, run the host algorithm on host pointers, queue the copies
// out, wait. The copy engine decides what a copy is (cudaMemcpyAsync on a
// private stream, or memcpy in tests), so this is the same code with and
// without a GPU.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "src/device/runtime.h"
#include "src/device/staging_plan.h"

namespace loom::cuda {

using HostCollective = std::function<Status(const algo::CollArgs& hostArgs)>;
using HostP2P = std::function<Status(const std::vector<algo::P2POp>& hostOps)>;

// `staging` holds at least plan.stagingBytes. A failed copy leaves the output
// unwritten (or partly written) and returns the copy's error.
Status runStagedCollective(const algo::CollArgs& args, const StagingPlan& plan, void* staging, CopyEngine& copies,
                           const WaitContext& wait, const HostCollective& runHost);
// Work that runs beside a staged send/recv (the device engine's share of a
// batch across hosts, p2p_across_hosts.h): started once the sends are copied
// in, so it may overwrite what they read, and finished before the copies
// out, so it is done reading what they overwrite. Either may be empty.
struct StagedP2PHooks {
  std::function<Status()> afterCopyIn;
  std::function<Status()> beforeCopyOut;
};
Status runStagedP2P(const std::vector<algo::P2POp>& ops, const P2PStagingPlan& plan, void* staging,
                    CopyEngine& copies, const WaitContext& wait, const HostP2P& runHost,
                    const StagedP2PHooks& hooks = {});

}  // namespace loom::cuda
