// loomGroupStart/End: per-thread deferral of collectives (and of
// communicator creation) so one thread can drive several communicators.
#pragma once

#include <functional>

#include "algorithms/algorithm.h"
#include "api/handles.h"

namespace loom::api {

bool inGroup();
// Defers a validated collective to the end of the outermost group.
void deferCollective(loomComm_t comm, const algo::CollArgs& args, loomStream_t stream);
// Defers the creation of a communicator: `init` runs on its own thread at the
// end of the group, concurrently with the other deferred inits.
void deferInit(std::function<loomResult_t()> init);
// True if comm has deferred operations in this thread's open group.
bool hasDeferredWork(loomComm_t comm);

loomResult_t groupStart();
loomResult_t groupEnd();

}  // namespace loom::api
