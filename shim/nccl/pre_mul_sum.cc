#include "shim/nccl/pre_mul_sum.h"

#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <type_traits>
#include <unordered_map>

#include "shim/nccl/errors.h"
#include "shim/nccl/nccl_group.h"
#include "kernels/float16.h"

namespace loom::nccl_shim {
namespace {

// One op made by ncclRedOpCreatePreMulSum.
struct PreMulSumOp {
  ncclComm_t comm;
  ncclDataType_t datatype;
  ncclScalarResidence_t residence;
  unsigned char value[8];  // ncclScalarHostImmediate: the scalar, copied at creation
  const void* pointer;     // ncclScalarDevice: read each time the op runs
};

std::mutex opsMu;
int nextOp = ncclNumOps;
std::unordered_map<int, PreMulSumOp>& ops() {
  static auto* table = new std::unordered_map<int, PreMulSumOp>;  // never destroyed: usable in exit handlers
  return *table;
}

size_t sizeOf(ncclDataType_t datatype) {
  switch (datatype) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

// x * s with the collective's arithmetic: integers wrap, fp16/bf16 multiply
// in fp32 and round to nearest even (as Loom's reductions do).
template <class T>
T times(T x, T s) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(x) * static_cast<U>(s)));
  } else {
    return x * s;
  }
}

template <class T>
void scaleAs(void* dst, const void* src, size_t n, const unsigned char* scalar) {
  T s;
  std::memcpy(&s, scalar, sizeof(T));
  auto* out = static_cast<unsigned char*>(dst);
  const auto* in = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < n; ++i) {  // memcpy per element: callers' buffers need not be aligned
    T x;
    std::memcpy(&x, in + i * sizeof(T), sizeof(T));
    x = times(x, s);
    std::memcpy(out + i * sizeof(T), &x, sizeof(T));
  }
}

template <float (*widen)(uint16_t), uint16_t (*narrow)(float)>
void scaleHalfAs(void* dst, const void* src, size_t n, const unsigned char* scalar) {
  uint16_t bits;
  std::memcpy(&bits, scalar, sizeof(bits));
  const float s = widen(bits);
  auto* out = static_cast<unsigned char*>(dst);
  const auto* in = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(&bits, in + i * 2, 2);
    bits = narrow(widen(bits) * s);
    std::memcpy(out + i * 2, &bits, 2);
  }
}

void scale(ncclDataType_t datatype, void* dst, const void* src, size_t n, const unsigned char* scalar) {
  namespace k = loom::kernels;
  switch (datatype) {
    case ncclInt8: return scaleAs<int8_t>(dst, src, n, scalar);
    case ncclUint8: return scaleAs<uint8_t>(dst, src, n, scalar);
    case ncclInt32: return scaleAs<int32_t>(dst, src, n, scalar);
    case ncclUint32: return scaleAs<uint32_t>(dst, src, n, scalar);
    case ncclInt64: return scaleAs<int64_t>(dst, src, n, scalar);
    case ncclUint64: return scaleAs<uint64_t>(dst, src, n, scalar);
    case ncclFloat32: return scaleAs<float>(dst, src, n, scalar);
    case ncclFloat64: return scaleAs<double>(dst, src, n, scalar);
    case ncclFloat16: return scaleHalfAs<k::halfToFloat, k::floatToHalf>(dst, src, n, scalar);
    case ncclBfloat16: return scaleHalfAs<k::bf16ToFloat, k::floatToBf16>(dst, src, n, scalar);
    default: return;  // rejected by checkDataType before
  }
}

}  // namespace

ncclResult_t createPreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                             ncclScalarResidence_t residence, ncclComm_t comm) {
  static const char* const call = "ncclRedOpCreatePreMulSum";
  int rank = -1;
  if (ncclResult_t r = rankOf(call, comm, &rank); r != ncclSuccess) return r;
  if (!op) return fail(ncclInvalidArgument, "%s on rank %d: op is NULL", call, rank);
  if (!scalar) return fail(ncclInvalidArgument, "%s on rank %d: scalar is NULL", call, rank);
  if (ncclResult_t r = checkDataType(call, rank, datatype); r != ncclSuccess) return r;
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
    return fail(ncclInvalidArgument,
                "%s on rank %d: residence %d is not an ncclScalarResidence_t (ncclScalarDevice 0, "
                "ncclScalarHostImmediate 1)",
                call, rank, static_cast<int>(residence));
  PreMulSumOp made{comm, datatype, residence, {}, nullptr};
  if (residence == ncclScalarHostImmediate)
    std::memcpy(made.value, scalar, sizeOf(datatype));
  else
    made.pointer = scalar;  // host memory while Loom has no CUDA data path; read when the op runs
  std::lock_guard<std::mutex> lock(opsMu);
  if (nextOp == ncclMaxRedOp)
    return fail(ncclInternalError, "%s on rank %d: all %d op handles of this process are used", call, rank,
                ncclMaxRedOp - ncclNumOps);
  const int handle = nextOp++;
  ops()[handle] = made;
  *op = static_cast<ncclRedOp_t>(handle);
  return ncclSuccess;
}

ncclResult_t destroyPreMulSum(ncclRedOp_t op, ncclComm_t comm) {
  static const char* const call = "ncclRedOpDestroy";
  int rank = -1;
  if (ncclResult_t r = rankOf(call, comm, &rank); r != ncclSuccess) return r;
  const int handle = static_cast<int>(op);
  if (handle >= 0 && handle < ncclNumOps)
    return fail(ncclInvalidArgument, "%s on rank %d: op %d is built in, not made by ncclRedOpCreatePreMulSum", call,
                rank, handle);
  std::lock_guard<std::mutex> lock(opsMu);
  auto it = ops().find(handle);
  if (it == ops().end())
    return fail(ncclInvalidArgument, "%s on rank %d: op %d was not made by ncclRedOpCreatePreMulSum or was destroyed",
                call, rank, handle);
  if (it->second.comm != comm)
    return fail(ncclInvalidArgument, "%s on rank %d: op %d belongs to another communicator", call, rank, handle);
  ops().erase(it);
  return ncclSuccess;
}

void forgetOpsOf(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(opsMu);
  for (auto it = ops().begin(); it != ops().end();) it = it->second.comm == comm ? ops().erase(it) : std::next(it);
}

ncclResult_t prepareReduction(const char* call, int rank, ncclRedOp_t op, ncclDataType_t datatype, ncclComm_t comm,
                              const void* sendbuff, size_t elements, bool onCudaStream, ReductionInput* input) {
  const int handle = static_cast<int>(op);
  input->send = sendbuff;
  if (handle >= 0 && handle < ncclNumOps) {
    input->op = static_cast<loomRedOp_t>(handle);  // the same values as loomRedOp_t
    return ncclSuccess;
  }
  PreMulSumOp found;
  {
    std::lock_guard<std::mutex> lock(opsMu);
    auto it = ops().find(handle);
    if (it == ops().end())
      return fail(ncclInvalidArgument,
                  "%s on rank %d: op %d is neither built in (0..%d) nor made by ncclRedOpCreatePreMulSum (or it was "
                  "destroyed)",
                  call, rank, handle, ncclNumOps - 1);
    found = it->second;
  }
  if (found.comm != comm)
    return fail(ncclInvalidArgument, "%s on rank %d: op %d was made for another communicator", call, rank, handle);
  if (found.datatype != datatype)
    return fail(ncclInvalidArgument, "%s on rank %d: op %d was made for datatype %d, the call passes datatype %d",
                call, rank, handle, static_cast<int>(found.datatype), static_cast<int>(datatype));
  if (onCudaStream)
    return fail(ncclInvalidUsage,
                "%s on rank %d: op %d (ncclRedOpCreatePreMulSum) on a CUDA stream needs a device kernel, which Loom "
                "does not have; PreMulSum works on host buffers where Loom runs calls blocking (no CUDA device)",
                call, rank, handle);
  input->op = loomSum;
  if (elements == 0) return ncclSuccess;  // nothing to scale; Loom checks the rest
  if (!sendbuff)
    return fail(ncclInvalidArgument, "%s on rank %d: sendbuff is NULL with count %zu", call, rank, elements);
  const size_t bytes = elements * sizeOf(datatype);
  if (bytes / sizeOf(datatype) != elements)
    return fail(ncclInvalidArgument, "%s on rank %d: count %zu overflows the address space", call, rank, elements);
  input->scratch.reset(new (std::nothrow) unsigned char[bytes]);
  if (!input->scratch)
    return fail(ncclSystemError, "%s on rank %d: cannot allocate %zu bytes for the PreMulSum copy", call, rank,
                bytes);
  input->send = input->scratch.get();
  input->scale = [found, datatype, dst = input->scratch.get(), sendbuff, elements] {
    const auto* scalar = found.residence == ncclScalarHostImmediate
                             ? found.value
                             : static_cast<const unsigned char*>(found.pointer);
    scale(datatype, dst, sendbuff, elements, scalar);
  };
  if (!inGroup()) {
    input->scale();
    input->scale = nullptr;
  }
  return ncclSuccess;
}

void commitReduction(ReductionInput* input) {
  if (input->scale) deferToGroupEnd(std::move(input->scale), std::move(input->scratch));
}

}  // namespace loom::nccl_shim
