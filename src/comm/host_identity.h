// Who this process is, as published to every peer during bootstrap.
#pragma once

#include <string>

#include "transports/transport.h"

namespace loom {

// Fills pid, host name and a host hash (host name + kernel boot id, so two
// machines that share a host name still differ). A non-empty `hostId`
// (Config::hostId, LOOM_HOST_ID) replaces both: ranks with equal ids are one
// host, named by the id.
transport::PeerInfo localPeerInfo(int rank, const std::string& hostId);

}  // namespace loom
