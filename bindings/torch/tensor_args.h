// What Loom needs from PyTorch's arguments: its datatype and reduction for a
// tensor and a ReduceOp, dense tensors on one device, and contiguous memory.
// Every rejection names the c10d operation, as PyTorch's own backends do.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <vector>

#include <loom/loom.h>

namespace loom_torch {

inline loomDataType_t loomTypeOf(const at::Tensor& t, const char* op) {
  switch (t.scalar_type()) {
    case at::kChar: return loomInt8;
    case at::kByte: return loomUint8;
    case at::kBool: return loomUint8;  // 0 or 1 in one byte; reductionOf() maps the op
    case at::kInt: return loomInt32;
    case at::kLong: return loomInt64;
    case at::kUInt32: return loomUint32;
    case at::kUInt64: return loomUint64;
    case at::kHalf: return loomFloat16;
    case at::kBFloat16: return loomBfloat16;
    case at::kFloat: return loomFloat32;
    case at::kDouble: return loomFloat64;
    default:
      TORCH_CHECK(false, "loom: ", op, " does not support dtype ", t.scalar_type(),
                  " (Loom reduces bool, int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, float32 "
                  "and float64)");
  }
}

// A c10d ReduceOp as Loom runs it. PREMUL_SUM is a SUM of inputs that are
// first multiplied by `factor` (the caller scales a copy); bool tensors
// reduce as bytes holding 0 or 1, where SUM is a logical or (MAX) and
// PRODUCT a logical and (MIN), as in ProcessGroupNCCL.
struct Reduction {
  loomRedOp_t op = loomSum;
  bool premultiply = false;
  double factor = 1.0;
  at::Tensor tensorFactor;  // PREMUL_SUM with a one-element tensor factor
};

inline Reduction reductionOf(const c10d::ReduceOp& reduceOp, const at::Tensor& t, const char* op) {
  const bool isBool = t.scalar_type() == at::kBool;
  const bool isInteger = isBool || at::isIntegralType(t.scalar_type(), /*includeBool=*/false);
  Reduction r;
  switch (reduceOp.op_) {
    case c10d::ReduceOp::SUM: r.op = isBool ? loomMax : loomSum; return r;
    case c10d::ReduceOp::PRODUCT: r.op = isBool ? loomMin : loomProd; return r;
    case c10d::ReduceOp::MIN: r.op = loomMin; return r;
    case c10d::ReduceOp::MAX: r.op = loomMax; return r;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!isBool, "loom: ", op, " cannot average bool tensors (ReduceOp.AVG)");
      r.op = loomAvg;
      return r;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(isInteger, "loom: ", op, " takes bitwise ReduceOps on integer and bool tensors only, got ",
                  t.scalar_type());
      r.op = reduceOp.op_ == c10d::ReduceOp::BAND ? loomBand : reduceOp.op_ == c10d::ReduceOp::BOR ? loomBor : loomBxor;
      return r;
    case c10d::ReduceOp::PREMUL_SUM: {
      TORCH_CHECK(at::isFloatingType(t.scalar_type()), "loom: ", op,
                  " takes ReduceOp.PREMUL_SUM on floating-point tensors only, got ", t.scalar_type());
      const auto* s = dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(reduceOp.supplement_.get());
      TORCH_CHECK(s != nullptr, "loom: ", op, ": ReduceOp.PREMUL_SUM without its factor");
      r.op = loomSum;
      r.premultiply = true;
      r.factor = s->double_factor;
      r.tensorFactor = s->tensor_factor;
      return r;
    }
    default: TORCH_CHECK(false, "loom: ", op, " got an unknown ReduceOp ", static_cast<int>(reduceOp.op_));
  }
}

// `t` (contiguous, owned by the op) scaled in place for PREMUL_SUM.
inline void premultiply(const Reduction& r, at::Tensor& t) {
  if (!r.premultiply) return;
  if (r.tensorFactor.defined())
    t.mul_(r.tensorFactor.to(t.device()).reshape({}));
  else
    t.mul_(r.factor);
}

inline bool cudaBuilt() {
#ifdef LOOM_TORCH_CUDA
  return true;
#else
  return false;
#endif
}

inline void checkDense(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.device().is_cpu() || (t.device().is_cuda() && cudaBuilt()), "loom: ", op,
              " takes CPU", cudaBuilt() ? " or CUDA" : "", " tensors, got one on ", t.device(),
              cudaBuilt() ? "" : " (this loom_torch was built without CUDA)");
  TORCH_CHECK(t.layout() == at::kStrided, "loom: ", op, " takes dense tensors, got layout ", t.layout());
}

// Every tensor of one operation on the device of the first.
inline void checkSameDevice(const std::vector<at::Tensor>& tensors, const char* op) {
  for (const at::Tensor& t : tensors) {
    checkDense(t, op);
    TORCH_CHECK(t.device() == tensors.front().device(), "loom: ", op, " got tensors on ", tensors.front().device(),
                " and ", t.device());
  }
}

// The single tensor c10d passes in a list for this process (Loom drives one
// tensor per process; PyTorch's multi-device lists are gone from its API).
inline at::Tensor& singleTensor(std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, "loom: ", op, " takes one tensor per process, got ", tensors.size());
  checkDense(tensors[0], op);
  return tensors[0];
}

// Operations that only move data need no arithmetic, so every dtype (bool,
// int16, complex, ...) travels as bytes.
inline size_t byteCount(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

// `t` itself when Loom can work on its memory directly, else a contiguous
// copy (which the caller copies back once the operation is done).
inline at::Tensor contiguousOf(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

// A contiguous buffer holding `t`'s values that Loom may overwrite: a copy
// when the reduction premultiplies (the caller's input stays as it was).
inline at::Tensor reduceBufferOf(const at::Tensor& t, const Reduction& r) {
  at::Tensor buf = r.premultiply ? t.contiguous().clone() : contiguousOf(t);
  premultiply(r, buf);
  return buf;
}

// Copies `flat` (contiguous, the tensors' elements back to back) into `tensors`.
inline void scatterInto(const at::Tensor& flat, const std::vector<at::Tensor>& tensors) {
  int64_t offset = 0;
  for (const at::Tensor& t : tensors) {
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

// The tensors' elements back to back in one new contiguous tensor.
inline at::Tensor flatten(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> pieces;
  pieces.reserve(tensors.size());
  for (const at::Tensor& t : tensors) pieces.push_back(t.reshape({-1}));
  return at::cat(pieces);
}

}  // namespace loom_torch
