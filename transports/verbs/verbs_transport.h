// The verbs transport ("ib", as NCCL calls it): chunks move between hosts by
// RDMA WRITE WITH IMMEDIATE over InfiniBand or RoCE reliable-connected queue
// pairs, straight from the sender's registered staging slot into the
// receiver's registered receive slot, with credit-based flow control
// (verbs_link.h) and no progress thread (verbs_progress.h).
//
// Setup (connect): every rank that serves verbs peers opens the first device
// with an active port, allocates a PD and one CQ (with a completion channel),
// and per peer one RC QP (to INIT, receives posted) plus two registered rings
// (through the registration cache). One bootstrap allGather then exchanges,
// per rank, its port (LID, GID, MTU), its chunk geometry and for every peer
// the QPN, first PSN and receive ring's address and rkey; each QP moves to
// RTR and RTS, and a second allGather agrees that every rank succeeded.
// All ranks join these exchanges whenever verbs may serve any pair (another
// host exists, or LOOM_TRANSPORT=ib), since connect() is collective; a
// single-host job pays nothing. Only the Simple protocol is offered.
//
// Failure: an error completion (a peer that died, a QP in error, a bad key)
// fails that peer's link and every wait on it with kRemoteError naming the
// peer's rank and host; waits that hear nothing probe the peer every 100 ms.
// On destruction, committed chunks are flushed (bounded) and every peer gets
// a goodbye, so it can tell an orderly end from a crash.
#pragma once

#include <memory>

#include "transports/transport.h"
#include "transports/verbs/verbs_api.h"

namespace loom::transport {

// canConnect: peers on another host (every peer with LOOM_TRANSPORT=ib), if
// this process has an RDMA device; otherwise no, with one log line saying
// why. create: a transport over libibverbs.
const TransportFactory& verbsTransportFactory();

// A verbs transport over `provider` (tests pass the emulated fabric's).
std::unique_ptr<Transport> createVerbsTransport(std::shared_ptr<verbs::Provider> provider);

// The provider create() uses: libibverbs when built with it, else one that
// reports "built without libibverbs".
std::shared_ptr<verbs::Provider> defaultVerbsProvider();

}  // namespace loom::transport
