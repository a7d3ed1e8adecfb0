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

size_t bytesPerElement(ncclDataType_t datatype) {
  switch (datatype) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;  // ncclInt64, ncclUint64, ncclFloat64 (checkDataType rejected the rest)
  }
}

// Gather and scatter: the root exchanges one block with every rank (itself
// included, which Loom allows inside a group), the others one with the root.
// `rootSends` picks the direction. One group, so the exchanges progress
// together and an in-place block (the root's own) is sent before it lands.
ncclResult_t rootedExchange(Call& call, bool rootSends, const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm) {
  int nranks = 0;
  if (ncclResult_t r = fromLoom(loomCommCount(loom::nccl_shim::toLoom(comm), &nranks)); r != ncclSuccess) return r;
  if (root < 0 || root >= nranks)
    return fail(ncclInvalidArgument, "%s on rank %d: root %d is not a rank of this communicator (0..%d)", call.name,
                call.rank, root, nranks - 1);
  const size_t block = count * bytesPerElement(datatype);
  if (count != 0 && block / count != bytesPerElement(datatype))
    return fail(ncclInvalidArgument, "%s on rank %d: count %zu overflows", call.name, call.rank, count);
  const loomDataType_t type = toLoom(datatype);
  const loomComm_t lcomm = loom::nccl_shim::toLoom(comm);
  if (ncclResult_t r = fromLoom(loomGroupStart()); r != ncclSuccess) return r;
  loomResult_t first = loomSuccess;
  auto keep = [&](loomResult_t r) { if (first == loomSuccess) first = r; };
  if (call.rank == root) {
    for (int peer = 0; peer < nranks; ++peer) {
      if (rootSends) keep(loomSend(static_cast<const char*>(sendbuff) + peer * block, count, type, peer, lcomm, call.stream));
      else keep(loomRecv(static_cast<char*>(recvbuff) + peer * block, count, type, peer, lcomm, call.stream));
    }
  }
  if (rootSends) keep(loomRecv(recvbuff, count, type, root, lcomm, call.stream));
  else keep(loomSend(sendbuff, count, type, root, lcomm, call.stream));
  if (first != loomSuccess) {
    const ncclResult_t code = fromLoom(first);  // keeps the failed call's message
    (void)loomGroupEnd();
    return code;
  }
  return fromLoom(loomGroupEnd());
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

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                          ncclComm_t comm, cudaStream_t stream) {
  Call call{"ncclAlltoAll"};
  if (ncclResult_t r = call.begin(comm, datatype, stream); r != ncclSuccess) return r;
  return fromLoom(loomAllToAll(sendbuff, recvbuff, count, toLoom(datatype), toLoom(comm), call.stream));
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  Call call{"ncclGather"};
  if (ncclResult_t r = call.begin(comm, datatype, stream); r != ncclSuccess) return r;
  return rootedExchange(call, false, sendbuff, recvbuff, count, datatype, root, comm);
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  Call call{"ncclScatter"};
  if (ncclResult_t r = call.begin(comm, datatype, stream); r != ncclSuccess) return r;
  return rootedExchange(call, true, sendbuff, recvbuff, count, datatype, root, comm);
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
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclAlltoAll,
                         (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                          cudaStream_t stream))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclGather,
                         (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream))
LOOM_NCCL_PROFILING_TWIN(ncclResult_t, ncclScatter,
                         (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
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
