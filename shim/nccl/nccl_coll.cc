// NCCL's collectives, point to point, groups and PreMulSum ops on Loom's.
// Each call checks what NCCL has and Loom does not (fp8 types, PreMulSum
// ops), binds the CUDA stream (cuda_binding.h) and hands over to Loom,
// which checks the rest and reports it under NCCL's names.
#include <cstdint>

#include <loom/loom.h>

#include "shim/nccl/cuda_binding.h"
#include "shim/nccl/errors.h"
#include "shim/nccl/nccl_group.h"
#include "nccl.h"
#include "shim/nccl/pre_mul_sum.h"
#include "shim/nccl/profiling_twin.h"

using namespace loom::nccl_shim;

namespace {

loomDataType_t toLoom(ncclDataType_t datatype) { return static_cast<loomDataType_t>(static_cast<int>(datatype)); }

// What every call needs: a live comm (its rank names errors), a data type
// Loom has and the Loom stream for the CUDA stream.
struct Call {
  const char* name;
  int rank = -1;
  loomStream_t stream = nullptr;

  ncclResult_t begin(ncclComm_t comm, ncclDataType_t datatype, cudaStream_t cudaStream) {
    if (ncclResult_t r = rankOf(name, comm, &rank); r != ncclSuccess) return r;
    if (ncclResult_t r = checkDataType(name, rank, datatype); r != ncclSuccess) return r;
    return fromLoom(streamFor(cudaStream, &stream));
  }
};

// Runs a reduction: `run` gets the input Loom should read and the op.
template <class Run>
ncclResult_t reduction(Call& call, ncclComm_t comm, ncclRedOp_t op, ncclDataType_t datatype, const void* sendbuff,
                       size_t elements, Run run) {
  ReductionInput input;
  if (ncclResult_t r = prepareReduction(call.name, call.rank, op, datatype, comm, sendbuff, elements,
                                        call.stream != nullptr, &input);
      r != ncclSuccess)
    return r;
  const ncclResult_t r = fromLoom(run(input.send, input.op));
  if (r == ncclSuccess) commitReduction(&input);
  return r;
}

}  // namespace

extern "C" {

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  Call call{"ncclAllReduce"};
  if (ncclResult_t r = call.begin(comm, datatype, stream); r != ncclSuccess) return r;
  return reduction(call, comm, op, datatype, sendbuff, count, [&](const void* send, loomRedOp_t loomOp) {
    return loomAllReduce(send, recvbuff, count, toLoom(datatype), loomOp, toLoom(comm), call.stream);
  });
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  Call call{"ncclReduce"};
  if (ncclResult_t r = call.begin(comm, datatype, stream); r != ncclSuccess) return r;
  return reduction(call, comm, op, datatype, sendbuff, count, [&](const void* send, loomRedOp_t loomOp) {
    return loomReduce(send, recvbuff, count, toLoom(datatype), loomOp, root, toLoom(comm), call.stream);
  });
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  Call call{"ncclReduceScatter"};
  if (ncclResult_t r = call.begin(comm, datatype, stream); r != ncclSuccess) return r;
  int nranks = 0;
  if (ncclResult_t r = fromLoom(loomCommCount(toLoom(comm), &nranks)); r != ncclSuccess) return r;
  if (recvcount > SIZE_MAX / static_cast<size_t>(nranks))
    return fail(ncclInvalidArgument, "ncclReduceScatter on rank %d: recvcount %zu x %d ranks overflows", call.rank,
                recvcount, nranks);
  return reduction(call, comm, op, datatype, sendbuff, recvcount * static_cast<size_t>(nranks),
                   [&](const void* send, loomRedOp_t loomOp) {
                     return loomReduceScatter(send, recvbuff, recvcount, toLoom(datatype), loomOp, toLoom(comm),
                                              call.stream);
                   });
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  Call call{"ncclBroadcast"};
  if (ncclResult_t r = call.begin(comm, datatype, stream); r != ncclSuccess) return r;
  return fromLoom(loomBroadcast(sendbuff, recvbuff, count, toLoom(datatype), root, toLoom(comm), call.stream));
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  Call call{"ncclBcast"};
  if (ncclResult_t r = call.begin(comm, datatype, stream); r != ncclSuccess) return r;
  return fromLoom(loomBcast(buff, count, toLoom(datatype), root, toLoom(comm), call.stream));
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  Call call{"ncclAllGather"};
  if (ncclResult_t r = call.begin(comm, datatype, stream); r != ncclSuccess) return r;
  return fromLoom(loomAllGather(sendbuff, recvbuff, sendcount, toLoom(datatype), toLoom(comm), call.stream));
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  Call call{"ncclSend"};
  if (ncclResult_t r = call.begin(comm, datatype, stream); r != ncclSuccess) return r;
  return fromLoom(loomSend(sendbuff, count, toLoom(datatype), peer, toLoom(comm), call.stream));
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  Call call{"ncclRecv"};
  if (ncclResult_t r = call.begin(comm, datatype, stream); r != ncclSuccess) return r;
  return fromLoom(loomRecv(recvbuff, count, toLoom(datatype), peer, toLoom(comm), call.stream));
}

ncclResult_t ncclGroupStart(void) { return groupStart(); }
ncclResult_t ncclGroupEnd(void) { return groupEnd(); }

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  return createPreMulSum(op, scalar, datatype, residence, comm);
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) { return destroyPreMulSum(op, comm); }

}  // extern "C"

LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclAllReduce,
                         (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                          ncclComm_t comm, cudaStream_t stream))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclReduce,
                         (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                          int root, ncclComm_t comm, cudaStream_t stream))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclReduceScatter,
                         (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                          ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclBroadcast,
                         (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclBcast,
                         (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                          cudaStream_t stream))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclAllGather,
                         (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t stream))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclSend,
                         (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                          cudaStream_t stream))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclRecv,
                         (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                          cudaStream_t stream))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclGroupStart, (void))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclGroupEnd, (void))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclRedOpCreatePreMulSum,
                         (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,
                          ncclComm_t comm))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm))
