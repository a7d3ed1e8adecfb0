// A world of GDR paths for tests: ranks are threads of this process, each on
// its own host of the emulated verbs fabric, with its own in-process
// bootstrap, and "device memory" is host memory reduced by the kernel's host
// emulation (makeEmulatedReducer). The paths live across calls, as in a
// communicator, so repeated calls exercise registration reuse.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "src/device/gdr_path.h"
#include "tests/support/local_bootstrap.h"
#include "transports/verbs/emulated_verbs.h"
#include "transports/verbs/verbs_rdma_memory.h"

namespace loom::testing::gdr {

struct GdrWorld {
  int nranks = 0;
  std::shared_ptr<transport::verbs::emulated::Fabric> fabric;
  std::shared_ptr<LocalBootstrapGroup> group;
  std::vector<std::unique_ptr<LocalBootstrap>> boots;
  std::vector<std::unique_ptr<cuda::GdrPath>> paths;
};

// The identity the world's paths see unless a test injects another: every
// buffer is its own allocation, with one buffer id that never changes (host
// memory is never "freed and reallocated" behind the path's back here).
cuda::AllocationIdentityFn unchangingIdentity();

// `customize(rank, options)` may swap a rank's network, reducer or identity.
GdrWorld makeGdrWorld(int nranks, const std::function<void(int, cuda::GdrPathOptions&)>& customize = {});

WaitContext waitFor(double seconds);

// "Device" buffers as the path sees them.
inline cuda::PointerInfo deviceInfo() { return {cuda::MemoryKind::kDevice, 0}; }
inline cuda::PointerInfo hostInfo() { return {}; }

}  // namespace loom::testing::gdr
