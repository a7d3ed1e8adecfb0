// loomGroupStart/End: per-thread deferral of collectives, point-to-point
// calls and communicator creation, so one thread can drive several
// communicators and exchanges in both directions cannot deadlock.
//
// What loomGroupEnd (of the outermost group) does, in this order:
//   1. runs the deferred communicator creations (init, split) concurrently,
//      one thread each;
//   2. enqueues every deferred collective (and all-to-all, barrier) in call
//      order;
//   3. enqueues, per communicator, ALL its deferred sends and recvs as ONE
//      fused operation (algo::runP2P), after that communicator's collectives;
//   4. waits for the work enqueued without a stream.
#pragma once

#include <functional>

#include "algorithms/algorithm.h"
#include "algorithms/p2p.h"
#include "src/api/handles.h"

namespace loom::api {

bool inGroup();
// Defers a validated collective to the end of the outermost group.
void deferCollective(loomComm_t comm, const algo::CollArgs& args, loomStream_t stream);
// Defers other validated work that runs in call order with the collectives:
// `launch` enqueues it on the communicator (with the stream) and returns its completion.
void deferOrdered(loomComm_t comm, loomStream_t stream, std::function<CompletionPtr(Stream*)> launch);
// Adds a validated send or recv to comm's fused operation of this group. All
// of one communicator's sends and recvs in a group must use one stream
// (kInvalidUsage otherwise, naming both).
Status deferP2P(loomComm_t comm, const algo::P2POp& op, loomStream_t stream);
// Defers the creation of a communicator: `init` runs on its own thread at the
// end of the group, concurrently with the other deferred inits, and fills
// `handle` (already given to the caller through `out`). If it fails,
// loomGroupEnd frees `handle` and sets *out to NULL, so a failed init leaves
// no handle behind, as outside a group. `out` must stay valid until then.
void deferInit(std::function<loomResult_t()> init, loomComm_t* out, loomComm_t handle);
// True if comm has deferred operations in this thread's open group.
bool hasDeferredWork(loomComm_t comm);

loomResult_t groupStart();
loomResult_t groupEnd();

}  // namespace loom::api
