// The compile-time list of transport backends; which one serves each peer is
// decided by comm/transport_policy.h.
#pragma once

#include <vector>

#include "transports/transport.h"

namespace loom {

// Backends built into this Loom.
const std::vector<const transport::TransportFactory*>& transportRegistry();

}  // namespace loom
