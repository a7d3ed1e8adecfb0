// An independent scalar reference for the reduction kernels: numbers are
// decoded to int64/uint64/double, combined there, and encoded back with an
// explicit round-to-nearest-even written from the IEEE definitions (frexp,
// ldexp, floor), sharing no code with kernels/reduce_ops.h.
//
// Double is wide enough that one rounding from double equals the kernels'
// rounding from fp32 for fp16/bf16 (and from fp64 for fp32): p' >= 2p + 2 for
// +, *, / (Figueroa's double-rounding bound).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/types.h"

namespace loom::kernels::testref {

// A 16-bit binary float format: 10 mantissa bits (fp16) or 7 (bf16).
struct Format16 {
  int mantissaBits;
  int exponentBits;
};
constexpr Format16 kHalf{10, 5};
constexpr Format16 kBf16{7, 8};

double decode16(Format16 f, uint16_t bits);
// Nearest-even encoding of x; NaN gives a quiet NaN with the sign of x.
uint16_t encode16(Format16 f, double x);
bool isNan16(Format16 f, uint16_t bits);

// One element of any DataType, widened for reference arithmetic.
struct Value {
  bool isFloat = false;
  bool isSigned = false;
  int bytes = 0;   // width of the DataType
  int64_t i = 0;   // integers: sign- or zero-extended
  uint64_t u = 0;  // integers: raw bits, zero-extended
  double d = 0;    // floats
};

Value load(DataType type, const void* base, size_t index);
void store(DataType type, void* base, size_t index, const Value& v);
Value combine(RedOp op, const Value& a, const Value& b);
// C truncating division for integers; true division for floats.
Value divide(const Value& v, int nranks);
// The value after rounding to `type` (what the kernels round to after every step).
Value roundTo(DataType type, const Value& v);

// The element-wise expected results, computed one element at a time.
std::vector<unsigned char> referenceReduce(DataType type, RedOp op, const void* a, const void* b, size_t count);
std::vector<unsigned char> referenceDivide(DataType type, int nranks, const void* src, size_t count);
std::vector<unsigned char> referenceSumDivide(DataType type, int nranks, const void* a, const void* b,
                                              size_t count);

// Index of the first element where `actual` differs from `expected` (any NaN
// matches any NaN; everything else must match bit for bit), or count.
size_t firstMismatch(DataType type, const void* expected, const void* actual, size_t count);

}  // namespace loom::kernels::testref
