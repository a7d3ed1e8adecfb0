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
// Test only: LOOM_TCP_TEST_DELAY_US=D holds every chunk D microseconds after
// its commit before it is sent (one-way latency for the multi-host test bed,
// whose kernel has no netem); chunks stay pipelined, so bandwidth is kept.
//
// Failure: a reset or an unannounced EOF fails that peer's link; every wait on
// it (and, through health(), every wait of the communicator) fails with an
// error naming the peer's rank and host. Deadlines and loomCommAbort are
// observed by the waits as for shared memory. On destruction the transport
// flushes committed chunks (bounded), says goodbye on every socket and closes.
#pragma once

#include "transports/transport.h"

namespace loom::transport {

// canConnect: every peer (the policy prefers shm on one host unless
// LOOM_TRANSPORT=tcp or LOOM_SHM_DISABLE=1). create: a new, unconnected TCP transport.
// preferredChunkBytes: 2 MiB unless LOOM_CHUNK_SIZE is given (tcp_transport.cc says why).
const TransportFactory& tcpTransportFactory();

}  // namespace loom::transport
