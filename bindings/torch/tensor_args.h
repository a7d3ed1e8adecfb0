// What Loom needs from PyTorch's arguments: its datatype and reduction for a
// tensor and a ReduceOp, CPU dense tensors, and contiguous memory. Every
// rejection names the c10d operation, as PyTorch's own backends do.
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
    case at::kInt: return loomInt32;
    case at::kLong: return loomInt64;
    case at::kHalf: return loomFloat16;
    case at::kBFloat16: return loomBfloat16;
    case at::kFloat: return loomFloat32;
    case at::kDouble: return loomFloat64;
    default:
      TORCH_CHECK(false, "loom: ", op, " does not support dtype ", t.scalar_type(),
                  " (Loom reduces int8, uint8, int32, int64, float16, bfloat16, float32 and float64)");
  }
}

inline loomRedOp_t loomOpOf(const c10d::ReduceOp& reduceOp, const char* op) {
  switch (reduceOp.op_) {
    case c10d::ReduceOp::SUM: return loomSum;
    case c10d::ReduceOp::AVG: return loomAvg;
    case c10d::ReduceOp::PRODUCT: return loomProd;
    case c10d::ReduceOp::MIN: return loomMin;
    case c10d::ReduceOp::MAX: return loomMax;
    case c10d::ReduceOp::BAND: TORCH_CHECK(false, "loom: ", op, " does not support ReduceOp.BAND");
    case c10d::ReduceOp::BOR: TORCH_CHECK(false, "loom: ", op, " does not support ReduceOp.BOR");
    case c10d::ReduceOp::BXOR: TORCH_CHECK(false, "loom: ", op, " does not support ReduceOp.BXOR");
    case c10d::ReduceOp::PREMUL_SUM: TORCH_CHECK(false, "loom: ", op, " does not support ReduceOp.PREMUL_SUM");
    default: TORCH_CHECK(false, "loom: ", op, " got an unknown ReduceOp ", static_cast<int>(reduceOp.op_));
  }
}

inline void checkCpuDense(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.device().is_cpu(), "loom: ", op, " takes CPU tensors, got one on ", t.device());
  TORCH_CHECK(t.layout() == at::kStrided, "loom: ", op, " takes dense tensors, got layout ", t.layout());
}

// The single tensor c10d passes in a list for this process (Loom drives one
// tensor per process; PyTorch's multi-device lists are gone from its API).
inline at::Tensor& singleTensor(std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, "loom: ", op, " takes one tensor per process, got ", tensors.size());
  checkCpuDense(tensors[0], op);
  return tensors[0];
}

// Operations that only move data need no arithmetic, so every dtype (bool,
// int16, complex, ...) travels as bytes.
inline size_t byteCount(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

// `t` itself when Loom can work on its memory directly, else a contiguous
// copy (which the caller copies back once the operation is done).
inline at::Tensor contiguousOf(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

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
