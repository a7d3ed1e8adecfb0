// NCCL's communicator API on Loom's: version, ids, creation, split,
// destruction, queries and error strings.
#include <cstring>

#include <loom/loom.h>

#include "shim/nccl/nccl_comm_devices.h"
#include "shim/nccl/cuda_binding.h"
#include "shim/nccl/errors.h"
#include "shim/nccl/nccl_env.h"
#include "nccl.h"
#include "shim/nccl/pre_mul_sum.h"
#include "shim/nccl/profiling_twin.h"

using namespace loom::nccl_shim;

namespace {

static_assert(sizeof(ncclUniqueId) == sizeof(loomUniqueId), "ids are passed through as bytes");
static_assert(static_cast<int>(ncclInProgress) == static_cast<int>(loomInProgress), "result codes share values");
static_assert(static_cast<int>(ncclBfloat16) == static_cast<int>(loomBfloat16), "data types share values");
static_assert(static_cast<int>(ncclAvg) == static_cast<int>(loomAvg), "built-in ops share values");

loomUniqueId toLoom(const ncclUniqueId& id) {
  loomUniqueId out;
  std::memcpy(out.internal, id.internal, sizeof(out.internal));
  return out;
}

// A config must come from NCCL_CONFIG_INITIALIZER (any NCCL version's: the
// caller's size says which fields it has). Its fields tune NCCL's GPU
// engine; Loom has nothing they apply to, so they are only validated.
ncclResult_t checkConfig(const char* call, int rank, const ncclConfig_t* config) {
  if (!config) return ncclSuccess;
  const size_t minimum = offsetof(ncclConfig_t, blocking) + sizeof(int);
  if (config->size < minimum || config->magic != LOOM_NCCL_CONFIG_MAGIC)
    return fail(ncclInvalidArgument,
                "%s on rank %d: config was not initialized with NCCL_CONFIG_INITIALIZER (size %zu, magic 0x%x)", call,
                rank, config->size, config->magic);
  return ncclSuccess;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  applyNcclSettingsOnce();
  if (!version) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;  // the NCCL API this library implements (see nccl.h): 22809
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  applyNcclSettingsOnce();
  if (!uniqueId) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  loomUniqueId id;
  const loomResult_t r = loomGetUniqueId(&id);
  if (r == loomSuccess) std::memcpy(uniqueId->internal, id.internal, sizeof(id.internal));
  return fromLoom(r);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  applyNcclSettingsOnce();
  if (ncclResult_t r = checkConfig("ncclCommInitRankConfig", rank, config); r != ncclSuccess) return r;
  // Inside a group Loom returns the handle at once and connects at group end.
  loomComm_t made = nullptr;
  const loomResult_t r = loomCommInitRank(comm ? &made : nullptr, nranks, toLoom(commId), rank);
  if (comm) *comm = toNccl(made);
  if (r == loomSuccess) rememberDevice(toNccl(made), currentCudaDevice());
  return fromLoom(r);
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return ncclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  applyNcclSettingsOnce();
  // ncclComm_t and loomComm_t are both one pointer: the array is filled in place.
  static_assert(sizeof(ncclComm_t) == sizeof(loomComm_t));
  const loomResult_t r = loomCommInitAll(reinterpret_cast<loomComm_t*>(comm), ndev, devlist);
  if (r == loomSuccess)
    for (int i = 0; i < ndev; ++i) rememberDevice(comm[i], devlist ? devlist[i] : i);
  return fromLoom(r);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  // Nothing to flush ahead of ncclCommDestroy: Loom's destroy waits for the
  // communicator's queued work itself, so finalize only checks the handle.
  int rank = -1;
  return rankOf("ncclCommFinalize", comm, &rank);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;  // as NCCL: e.g. the NULL of an NCCL_SPLIT_NOCOLOR split
  const loomResult_t r = loomCommDestroy(toLoom(comm));
  if (r == loomSuccess) {
    forgetOpsOf(comm);
    forgetDevice(comm);
  }
  return fromLoom(r);
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  const loomResult_t r = loomCommAbort(toLoom(comm));
  if (r == loomSuccess) {
    forgetOpsOf(comm);
    forgetDevice(comm);
  }
  return fromLoom(r);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  int rank = -1;
  if (ncclResult_t r = rankOf("ncclCommSplit", comm, &rank); r != ncclSuccess) return r;
  if (ncclResult_t r = checkConfig("ncclCommSplit", rank, config); r != ncclSuccess) return r;
  loomComm_t made = nullptr;
  const loomResult_t r = loomCommSplit(toLoom(comm), color, key, newcomm ? &made : nullptr);
  if (newcomm) *newcomm = toNccl(made);
  if (r == loomSuccess && made) rememberDevice(toNccl(made), deviceOf(comm));
  return fromLoom(r);
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (ncclGetLastError has the details)";
    case ncclSystemError: return "unhandled system error (ncclGetLastError has the details)";
    case ncclInternalError: return "internal error (a bug in Loom; ncclGetLastError has the details)";
    case ncclInvalidArgument: return "invalid argument (ncclGetLastError names it)";
    case ncclInvalidUsage: return "invalid usage (ncclGetLastError has the details)";
    case ncclRemoteError: return "remote process exited, timed out or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  const char* own = lastErrorOfThread();
  if (*own || !comm) return own;
  thread_local std::string fromComm;
  fromComm = withNcclNames(loomGetLastError(toLoom(comm)));
  return fromComm.c_str();
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  int rank = -1;
  if (ncclResult_t r = rankOf("ncclCommGetAsyncError", comm, &rank); r != ncclSuccess) return r;
  if (!asyncError) return fail(ncclInvalidArgument, "ncclCommGetAsyncError on rank %d: asyncError is NULL", rank);
  loomResult_t state = loomSuccess;
  const loomResult_t r = loomCommGetAsyncError(toLoom(comm), &state);
  if (r != loomSuccess) return fromLoom(r);
  *asyncError = state == loomTimeout ? ncclRemoteError : static_cast<ncclResult_t>(static_cast<int>(state));
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  int rank = -1;
  if (ncclResult_t r = rankOf("ncclCommCount", comm, &rank); r != ncclSuccess) return r;
  if (!count) return fail(ncclInvalidArgument, "ncclCommCount on rank %d: count is NULL", rank);
  return fromLoom(loomCommCount(toLoom(comm), count));
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  int rank = -1;
  if (ncclResult_t r = rankOf("ncclCommCuDevice", comm, &rank); r != ncclSuccess) return r;
  if (!device) return fail(ncclInvalidArgument, "ncclCommCuDevice on rank %d: device is NULL", rank);
  *device = deviceOf(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  int own = -1;
  if (ncclResult_t r = rankOf("ncclCommUserRank", comm, &own); r != ncclSuccess) return r;
  if (!rank) return fail(ncclInvalidArgument, "ncclCommUserRank on rank %d: rank is NULL", own);
  *rank = own;
  return ncclSuccess;
}

}  // extern "C"

LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclGetVersion, (int* version))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclCommInitRankConfig,
                         (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int* devlist))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclCommFinalize, (ncclComm_t comm))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclCommDestroy, (ncclComm_t comm))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclCommAbort, (ncclComm_t comm))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclCommSplit,
                         (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config))
LOOM_NCCL_PROFILING_TWIN(const char*, ncclGetErrorString, (ncclResult_t result))
LOOM_NCCL_PROFILING_TWIN(const char*, ncclGetLastError, (ncclComm_t comm))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* asyncError))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank))
