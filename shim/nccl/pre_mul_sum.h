// ncclRedOpCreatePreMulSum on Loom: an op handle (ncclNumOps and up) maps to
// a per-rank scalar; a reduction with it becomes a sum over a scratch copy
// of the input in which every element was multiplied by the scalar (on the
// host: Loom's data is host memory).
#pragma once

#include <loom/loom.h>

#include <cstddef>
#include <functional>
#include <memory>

#include "nccl.h"

namespace loom::nccl_shim {

ncclResult_t createPreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                             ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t destroyPreMulSum(ncclRedOp_t op, ncclComm_t comm);
// Drops comm's ops when it is destroyed or aborted, as NCCL does.
void forgetOpsOf(ncclComm_t comm);

// What a reduction hands to Loom: the caller's buffer and op, or for a
// PreMulSum op the scaled scratch copy and loomSum.
struct ReductionInput {
  const void* send = nullptr;
  loomRedOp_t op = loomSum;
  std::unique_ptr<unsigned char[]> scratch;  // the scaled copy, when op is a PreMulSum
  std::function<void()> scale;               // fills scratch; empty when already done
};

// Resolves op for a reduction over `elements` elements of sendbuff
// (nranks*recvcount for reduce-scatter). Outside a group a PreMulSum input
// is scaled now; inside one, commitReduction defers the scaling to the
// outermost ncclGroupEnd (Loom reads grouped buffers only then).
// onCudaStream: the call is ordered on a CUDA stream; PreMulSum then needs a
// device kernel, which Loom does not have (ncclInvalidUsage).
ncclResult_t prepareReduction(const char* call, int rank, ncclRedOp_t op, ncclDataType_t datatype, ncclComm_t comm,
                              const void* sendbuff, size_t elements, bool onCudaStream, ReductionInput* input);

// After Loom accepted the call: inside a group, hands the scratch copy and
// its scaling to the group end. Otherwise the copy is freed with `input`.
void commitReduction(ReductionInput* input);

}  // namespace loom::nccl_shim
