// The TCP transport: ranks exchange chunks over plain TCP sockets, so it works
// between any two hosts that can reach each other (and, for tests, on one).
//
// Per peer, LOOM_NSOCKS sockets (default 2) carry both directions; chunk i of
// a direction travels on socket i % LOOM_NSOCKS, so large transfers use
// several TCP streams. Each direction has Config::fifoSlots private slots of
// Config::chunkBytes on each side; one progress thread per transport moves
// bytes between slots and sockets (tcp_progress.h), and executors wait on
// futexes it signals. Setup is in tcp_handshake.h.
//
// Only the Simple protocol is offered: LL's per-8-byte flags buy nothing
// once a system call separates every chunk.
//
// Failure: a reset or an unannounced EOF fails that peer's link; every wait on
// it (and, through health(), every wait of the communicator) fails with an
// error naming the peer's rank and host. Deadlines and loomCommAbort are
// observed by the waits as for shared memory. On destruction the transport
// flushes committed chunks (bounded), says goodbye on every socket and closes.
#pragma once

#include "transports/transport.h"

namespace loom::transport {

// canConnect: LOOM_TRANSPORT=tcp (every peer), else peers on another host
// (LOOM_TRANSPORT=shm: none). create: a new, unconnected TCP transport.
const TransportFactory& tcpTransportFactory();

}  // namespace loom::transport
