// Data types and reduction operations, as the internal layers see them.
// The numeric values equal loomDataType_t / loomRedOp_t so the API layer
// converts by a checked cast.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/host_device.h"

namespace loom {

enum class DataType : int {
  kInt8 = 0, kUint8 = 1, kInt32 = 2, kUint32 = 3, kInt64 = 4, kUint64 = 5,
  kFloat16 = 6, kFloat32 = 7, kFloat64 = 8, kBfloat16 = 9,
};
constexpr int kNumDataTypes = 10;

// kBand, kBor, kBxor: bitwise, integer types only (opTakesType).
enum class RedOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4, kBand = 5, kBor = 6, kBxor = 7 };
constexpr int kNumRedOps = 8;

// LOOM_HOST_DEVICE: the CUDA kernels size elements with it too.
LOOM_HOST_DEVICE constexpr size_t dataTypeSize(DataType t) {
  switch (t) {
    case DataType::kInt8: case DataType::kUint8: return 1;
    case DataType::kFloat16: case DataType::kBfloat16: return 2;
    case DataType::kInt32: case DataType::kUint32: case DataType::kFloat32: return 4;
    case DataType::kInt64: case DataType::kUint64: case DataType::kFloat64: return 8;
  }
  return 0;
}

// Names as nccl-tests prints them.
constexpr const char* dataTypeName(DataType t) {
  switch (t) {
    case DataType::kInt8: return "int8";
    case DataType::kUint8: return "uint8";
    case DataType::kInt32: return "int32";
    case DataType::kUint32: return "uint32";
    case DataType::kInt64: return "int64";
    case DataType::kUint64: return "uint64";
    case DataType::kFloat16: return "half";
    case DataType::kFloat32: return "float";
    case DataType::kFloat64: return "double";
    case DataType::kBfloat16: return "bfloat16";
  }
  return "?";
}

constexpr const char* redOpName(RedOp op) {
  switch (op) {
    case RedOp::kSum: return "sum";
    case RedOp::kProd: return "prod";
    case RedOp::kMax: return "max";
    case RedOp::kMin: return "min";
    case RedOp::kAvg: return "avg";
    case RedOp::kBand: return "band";
    case RedOp::kBor: return "bor";
    case RedOp::kBxor: return "bxor";
  }
  return "?";
}

constexpr bool isBitwiseOp(RedOp op) { return op == RedOp::kBand || op == RedOp::kBor || op == RedOp::kBxor; }
LOOM_HOST_DEVICE constexpr bool isFloatingType(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kBfloat16;
}
// Whether `op` is defined on `type`: bitwise ops on integer types only.
constexpr bool opTakesType(RedOp op, DataType type) { return !isBitwiseOp(op) || !isFloatingType(type); }

constexpr bool isValidDataType(int t) { return t >= 0 && t < kNumDataTypes; }
constexpr bool isValidRedOp(int op) { return op >= 0 && op < kNumRedOps; }

}  // namespace loom
