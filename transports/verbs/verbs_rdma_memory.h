// The verbs transport's RDMA on registered memory (transports/rdma_memory.h):
// an RdmaNetwork over a verbs Provider. The communicator hands it to the
// GPUDirect RDMA path (src/device/gdr_path.h), which registers device
// buffers with it; nothing above the transports sees verbs itself.
#pragma once

#include <memory>

#include "transports/rdma_memory.h"

namespace loom::transport {

namespace verbs { class Provider; }

// Over `provider` (tests pass the emulated fabric's).
std::shared_ptr<RdmaNetwork> verbsRdmaNetwork(std::shared_ptr<verbs::Provider> provider);

// Over the provider the verbs transport uses (defaultVerbsProvider(): libibverbs
// when built with it), taken at the first probe or connect, so a communicator
// that never asks for GDR opens nothing.
std::shared_ptr<RdmaNetwork> defaultVerbsRdmaNetwork();

}  // namespace loom::transport
