// The UCX transport: chunks move as tagged UCP messages, so one backend runs
// over whatever UCX finds between two ranks (TCP, shared memory, CMA, and on
// machines that have them InfiniBand, RoCE, ...). UCX_TLS and
// UCX_NET_DEVICES choose, as for any UCX program.
//
// One UCP context and worker per communicator, one endpoint per peer. Each
// direction has Config::fifoSlots slots of Config::chunkBytes on each side;
// the receiver keeps a tagged receive posted in every free slot and returns
// releases to the sender as credit, and one progress thread per transport
// posts and completes the operations (ucx_progress.h explains the choice of
// tagged messages). Setup is in ucx_handshake.h.
//
// Only the Simple protocol is offered: LL's per-8-byte flags buy nothing once
// a message and a wake separate every chunk.
//
// Failure: UCX's endpoint error handler and failed operations fail that
// peer's link; every wait on it (and, through health(), every wait of the
// communicator) fails with an error naming the peer's rank and host.
// Deadlines and loomCommAbort are observed by the waits as for the other
// transports. On destruction the transport flushes committed chunks
// (bounded), says goodbye to every peer, closes the endpoints and destroys
// the worker and context; no thread is left.
#pragma once

#include "transports/transport.h"

namespace loom::transport {

// canConnect: LOOM_TRANSPORT=ucx (every peer), else peers on another host
// (any other LOOM_TRANSPORT: none). create: a new, unconnected UCX transport.
const TransportFactory& ucxTransportFactory();

}  // namespace loom::transport
