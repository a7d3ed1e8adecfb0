// The compile-time list of transport backends and the per-peer choice among
// them: the first backend whose canConnect() accepts a peer serves it.
#pragma once

#include <vector>

#include "transports/transport.h"

namespace loom {

// Backends in order of preference.
const std::vector<const transport::TransportFactory*>& transportRegistry();

}  // namespace loom
