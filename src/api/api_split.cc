// C ABI: loomCommSplit (MPI_Comm_split's semantics, see loom.h and
// Communicator::split). Inside a group it is deferred like loomCommInitRank,
// so one thread can split every communicator of a clique at loomGroupEnd.
#include "src/api/group.h"
#include "src/api/handles.h"

using loom::Code;
using loom::Status;
using loom::api::fail;

namespace {

// Splits `parent`; on a new communicator fills and registers `handle` (null
// for a negative color, which gets no communicator). Holds a reference to
// parent throughout, so a concurrent loomCommAbort cannot free it.
loomResult_t splitNow(loomComm_t parent, int color, int key, loomComm_t handle) {
  loom::api::CommRef ref{parent, "loomCommSplit"};
  if (!ref)
    return fail(nullptr, loom::makeError(Code::kInvalidUsage,
                                         "loomCommSplit: the communicator was destroyed or aborted before the split "
                                         "ran (%s)",
                                         ref.status().message().c_str()));
  try {
    auto child = ref->impl->split(color, key);
    if (!child.isOk()) return fail(ref, child.status());
    if (!child.value()) return loomSuccess;
    handle->impl = std::move(child).value();
    loom::api::registerComm(handle);
    return loomSuccess;
  } catch (const std::exception& e) {
    return fail(ref, loom::makeError(Code::kInternalError, "loomCommSplit: unexpected exception: %s", e.what()));
  }
}

}  // namespace

extern "C" {

loomResult_t loomCommSplit(loomComm_t comm, int color, int key, loomComm_t* newcomm) {
  {
    loom::api::CommRef ref{comm, "loomCommSplit"};
    if (!ref) return fail(nullptr, ref.status());
    if (!newcomm)
      return fail(ref, loom::makeError(Code::kInvalidArgument, "loomCommSplit on rank %d: newcomm is NULL",
                                       ref->impl->rank()));
  }
  *newcomm = nullptr;
  loomComm_t handle = color < 0 ? nullptr : new loomComm;
  if (loom::api::inGroup()) {
    *newcomm = handle;  // filled in at loomGroupEnd
    loom::api::deferInit([=] { return splitNow(comm, color, key, handle); }, newcomm, handle);
    return loomSuccess;
  }
  loomResult_t r = splitNow(comm, color, key, handle);
  if (r != loomSuccess || !handle) {
    delete handle;
    return r;
  }
  *newcomm = handle;
  return loomSuccess;
}

}  // extern "C"
