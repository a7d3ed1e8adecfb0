// Forming the bootstrap ring: each rank connects to rank+1 and accepts from
// rank-1, introducing itself with a RingHello (secret, rank, nranks).
//
// The acceptor verifies all three and drops (LOOM_WARN, with the peer
// address) any connection that fails, then keeps waiting: its listening port
// is reachable by anyone, and a stranger must not be able to take the place
// of the real predecessor or stall the ring beyond a short hello timeout.
#pragma once

#include <string>

#include "bootstrap/bootstrap.h"
#include "bootstrap/sock_addr.h"
#include "bootstrap/socket.h"
#include "common/log.h"
#include "common/wait.h"

namespace loom::bootstrap {

// Who this rank is, as presented to and expected from ring neighbours.
struct RingIdentity {
  Secret secret{};
  int rank = 0;
  int nranks = 0;
};

// How long an accepted ring connection may take to introduce itself.
constexpr double kRingHelloTimeoutSeconds = 2.0;

// Connects to `peerRank` listening at `addr` and sends our RingHello.
Result<Socket> connectRingPeer(const SockAddr& addr, int peerRank, const RingIdentity& self,
                               const WaitContext& wait);

// Accepts on `listener` until a connection presents our secret, our nranks
// and rank == expectedRank; returns that one. Fails only at the deadline, on
// abort, or if the listener itself fails.
Result<Socket> acceptRingPeer(const Socket& listener, int expectedRank, const RingIdentity& self,
                              const WaitContext& wait, const Logger& log,
                              double helloTimeoutSeconds = kRingHelloTimeoutSeconds);

}  // namespace loom::bootstrap
