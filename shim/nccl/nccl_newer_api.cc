// The functions NCCL added after 2.18 (up to 2.28): what Loom can do it
// does (ncclCommInitRankScalable, ncclCommRegister as a no-op); for the rest
// Loom has no such feature, and the call fails with ncclInvalidUsage and a
// message saying so, as NCCL does for a feature its build lacks.
#include <loom/loom.h>

#include "shim/nccl/cuda_binding.h"
#include "shim/nccl/errors.h"
#include "shim/nccl/nccl_group.h"
#include "nccl.h"
#include "shim/nccl/profiling_twin.h"

using namespace loom::nccl_shim;

namespace {

// Registration handles carry nothing: any non-NULL token will do.
char registrationToken;

ncclResult_t unsupported(const char* call, const char* instead) {
  return fail(ncclInvalidUsage, "%s is not supported by Loom's NCCL (libnccl.so.2 on Loom): %s", call, instead);
}

}  // namespace

extern "C" {

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (!ptr) return fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  *ptr = nullptr;
  if (size == 0) return ncclSuccess;
  const char* why = "";
  const loomResult_t r = allocMemory(ptr, size, &why);
  if (r != loomSuccess) return fail(r == loomUnhandledCudaError ? ncclUnhandledCudaError : ncclSystemError,
                                    "ncclMemAlloc of %zu bytes: %s", size, why);
  return ncclSuccess;
}

ncclResult_t ncclMemFree(void* ptr) {
  if (!ptr) return ncclSuccess;
  const char* why = "";
  if (freeMemory(ptr, &why) != loomSuccess) return fail(ncclInvalidArgument, "ncclMemFree of %p: %s", ptr, why);
  return ncclSuccess;
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  (void)comm;
  (void)revokeFlags;
  return unsupported("ncclCommRevoke", "ncclCommAbort stops a communicator's work and frees it");
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags) {
  (void)comm;
  (void)excludeRanksList;
  (void)excludeRanksCount;
  (void)config;
  (void)shrinkFlags;
  if (newcomm) *newcomm = nullptr;
  return unsupported("ncclCommShrink",
                     "ncclCommSplit (called by every rank, NCCL_SPLIT_NOCOLOR on the excluded ones) makes the "
                     "smaller communicator");
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config) {
  if (nId < 1 || !commIds)
    return fail(ncclInvalidArgument, "ncclCommInitRankScalable on rank %d: nId is %d and commIds %s (need >= 1 id)",
                myrank, nId, commIds ? "set" : "NULL");
  // Loom's bootstrap root (started by whoever made commIds[0]) serves every
  // rank, so the other ids, meant to spread NCCL's bootstrap, are not needed.
  return ncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}

void ncclResetDebugInit(void) {
  // Nothing returns a result here: the message is all the caller can see.
  (void)fail(ncclInvalidUsage,
             "ncclResetDebugInit has no effect on Loom: it reads NCCL_DEBUG/LOOM_DEBUG once per process");
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  (void)size;
  int rank = -1;
  if (ncclResult_t r = rankOf("ncclCommRegister", comm, &rank); r != ncclSuccess) return r;
  if (!handle) return fail(ncclInvalidArgument, "ncclCommRegister on rank %d: handle is NULL", rank);
  if (!buff) return fail(ncclInvalidArgument, "ncclCommRegister on rank %d: buff is NULL", rank);
  *handle = &registrationToken;
  return ncclSuccess;
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  int rank = -1;
  if (ncclResult_t r = rankOf("ncclCommDeregister", comm, &rank); r != ncclSuccess) return r;
  if (handle != &registrationToken)
    return fail(ncclInvalidArgument, "ncclCommDeregister on rank %d: handle %p did not come from ncclCommRegister",
                rank, handle);
  return ncclSuccess;
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  (void)comm;
  (void)buff;
  (void)size;
  (void)winFlags;
  if (win) *win = nullptr;
  return unsupported("ncclCommWindowRegister", "Loom has no symmetric-memory windows; pass the buffer itself");
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  (void)comm;
  (void)win;
  return unsupported("ncclCommWindowDeregister", "Loom has no symmetric-memory windows");
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  // The group must close either way, or every later call would join it.
  const ncclResult_t ended = groupEnd();
  if (ended != ncclSuccess) return ended;
  if (simInfo && simInfo->size >= sizeof(ncclSimInfo_t) && simInfo->magic == LOOM_NCCL_SIM_INFO_MAGIC)
    simInfo->estimatedTime = NCCL_UNDEF_FLOAT;
  return unsupported("ncclGroupSimulateEnd", "Loom has no cost simulator; the group ran as with ncclGroupEnd");
}

}  // extern "C"

LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclMemFree, (void* ptr))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclCommShrink,
                         (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                          ncclConfig_t* config, int shrinkFlags))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclCommInitRankScalable,
                         (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                          ncclConfig_t* config))
LOOM_NCCL_PROFILING_TWIN(void, ncclResetDebugInit, (void))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclCommRegister,
                         (const ncclComm_t comm, void* buff, size_t size, void** handle))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclCommWindowRegister,
                         (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo))
